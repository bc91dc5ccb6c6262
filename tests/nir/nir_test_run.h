/*
 * nir_test_run.h - what the NIR tests share around snn.c's executor (tests/test_nir_*.c): a
 * file loaded with T, dt and a device, a refusal printed with its message; and the Output of
 * every step of a loaded graph copied to host memory. Include after tests/test.h (CHECK).
 */
#ifndef SNN_TEST_NIR_RUN_H
#define SNN_TEST_NIR_RUN_H

#include <stdbool.h>
#include <stdio.h>

#include "nir/nir.h"
#include "snn.h"

/* snn_nir_load(path) with time_steps T, dt (0: the file's) on `device`; a failed CHECK and the
 * error's message when it refuses the file (NULL then). */
static inline snn_module *nir_test_load(const char *path, int T, double dt, snn_device device)
{
    snn_nir_options o = snn_nir_options_default();
    o.time_steps = T;
    o.dt = dt;
    o.device = device;
    snn_module *m = snn_nir_load(path, &o);
    if (!m) fprintf(stderr, "  %s: %s\n", path, snn_last_error());
    CHECK(m != NULL);
    return m;
}

/* The Output of `m` at every step, (T, N, out...), for the host values x of `shape` (moved to
 * m's device `device`), into host memory y of `count` floats. False, with the reason printed,
 * when it fails or gives another size. */
static inline bool nir_test_steps_on_host(snn_module *m, snn_shape shape, const float *x,
                                          snn_device device, float *y, int64_t count)
{
    snn_no_grad_begin();
    snn_step_begin();
    snn_tensor *out = snn_nir_forward_steps(m, snn_from_host(shape, x, device));
    bool ok = out && out->numel == count && out->device == device;
    if (ok) snn_tensor_copy_to_host(out, y);
    else fprintf(stderr, "  %s\n", out ? "unexpected output size or device" : snn_last_error());
    snn_step_end();
    snn_no_grad_end();
    return ok;
}

#endif
