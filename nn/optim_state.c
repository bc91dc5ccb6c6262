/*
 * optim_state.c - what a checkpoint saves and restores of an optimizer: its state tensors under
 * PyTorch's names (momentum_buffer.<param>, exp_avg.<param>, exp_avg_sq.<param>), which a load
 * fills in place, and its step counts. Training itself never needs this file: nn/optim.c makes
 * and steps the optimizer.
 *
 * Step counts: snn_optimizer_steps() counts calls to snn_optimizer_step(); each parameter also
 * counts its own updates (Adam's bias corrections use that count). snn_optimizer_set_steps(n),
 * after a checkpoint load, sets every parameter's count to n, which is exact whenever every
 * parameter received a gradient on every step (the normal case).
 *
 * Test: tests/test_optim.c (ctest -R '^optim$').
 */
#include <stdio.h>

#include "optim_internal.h"
#include "tensor/error.h"

int64_t snn_optimizer_steps(const snn_optimizer *opt) { return opt ? opt->steps : 0; }

void snn_optimizer_set_steps(snn_optimizer *opt, int64_t steps)
{
    if (!opt) return;
    if (steps < 0) steps = 0;
    opt->steps = steps;
    for (int i = 0; i < opt->n; i++) opt->slots[i].steps = steps;
}

/* Appends "<prefix>.<param name>" -> t to the list; false when the name does not fit. */
static bool add_state(snn_param_list *out, const char *prefix, const snn_named_param *p,
                      snn_tensor *t)
{
    snn_named_param *item = &out->items[out->count++];
    int n = snprintf(item->name, sizeof item->name, "%s.%s", prefix, p->name);
    item->tensor = t;
    item->trainable = false;
    return n >= 0 && (size_t)n < sizeof item->name;
}

snn_status snn_optimizer_state(snn_optimizer *opt, snn_param_list *out)
{
    const char *fn = "snn_optimizer_state";
    if (!out) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'out' (got NULL)", fn);
    out->items = NULL;
    out->count = 0;
    if (!opt) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'opt' (got NULL)", fn);
    int total = opt->n_states * opt->n;
    if (total == 0) return SNN_OK; /* plain SGD keeps no state */
    /* exactly `total` items, as snn_param_list_free() frees count * sizeof(item) bytes */
    out->items = snn_alloc((size_t)total * sizeof *out->items, SNN_CPU);
    if (!out->items) return snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    /* PyTorch's names for state[0] and state[1] of each rule */
    const char *const names[2] = {opt->kind == SNN_OPT_SGD ? "momentum_buffer" : "exp_avg",
                                  "exp_avg_sq"};
    for (int i = 0; i < opt->n; i++) {
        const snn_optim_slot *slot = &opt->slots[i];
        bool fits = true;
        for (int s = 0; s < opt->n_states; s++)
            fits &= add_state(out, names[s], &slot->param, slot->state[s]);
        if (!fits) {
            out->count = total; /* the size that was allocated */
            snn_param_list_free(out);
            return snn_error(SNN_ERR_ARGUMENT, "%s: the state name of parameter '%s' is longer "
                             "than %zu characters", fn, slot->param.name,
                             sizeof slot->param.name - 1);
        }
    }
    SNN_ASSERT(out->count == total);
    return SNN_OK;
}
