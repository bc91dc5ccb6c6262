/*
 * error.h - how snn.c reports trouble (internal header, shared by every folder).
 *
 * Two kinds of trouble, two mechanisms:
 *   - Bad input from a user (wrong shape, missing file, NaN loss) never aborts. The function
 *     stores a message and returns a status, or NULL where it returns a pointer:
 *       snn_conv2d: bad argument 'input' (expected 4-D (N, C, H, W), got 3-D [2, 3, 4]);
 *       hint: fold time into the batch with snn_flatten_time
 *   - A bug inside snn.c (a broken invariant) aborts at once with file:line: SNN_ASSERT.
 *
 * The message buffer is thread-local, so the data loader thread cannot clobber the caller's.
 */
#ifndef SNN_ERROR_H
#define SNN_ERROR_H

#include <stdio.h>
#include <stdlib.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SNN_PRINTF_LIKE(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define SNN_PRINTF_LIKE(fmt_index, first_arg)
#endif

/* Stores a printf-formatted message and returns `status`. */
snn_status snn_error(snn_status status, const char *fmt, ...) SNN_PRINTF_LIKE(2, 3);
/* Same, returning NULL: `return snn_error_null(SNN_ERR_ARGUMENT, "...")` in pointer functions. */
void *snn_error_null(snn_status status, const char *fmt, ...) SNN_PRINTF_LIKE(2, 3);
/* True when a message is pending (not cleared since it was set). */
int snn_error_pending(void);

/* Aborts with file:line on a broken invariant. Active in every build type. */
#define SNN_ASSERT(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "snn.c: internal error: assertion '%s' failed at %s:%d\n",     \
                    #cond, __FILE__, __LINE__);                                            \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* ---------------------------------------------------------------------------------------------
 * Argument checks for ops (checks.c). Each returns 0 when the check passes; otherwise it stores
 * a message naming the function and the argument and returns 1, so ops read
 *     if (snn_check_rank(fn, "input", x, 4, "(N, C, H, W)")) return NULL;
 * A NULL tensor passes the error of whatever produced it through unchanged.
 * ------------------------------------------------------------------------------------------- */

/* A shape a tensor can have: 0 to SNN_MAX_DIMS dims, none negative, and numel floats that
 * memory could hold (sizes come from files too: checkpoint metadata). */
int snn_check_shape(const char *fn, snn_shape shape);
int snn_check_tensor(const char *fn, const char *arg, const snn_tensor *t);
int snn_check_rank(const char *fn, const char *arg, const snn_tensor *t, int ndim,
                   const char *layout);
int snn_check_same_device(const char *fn, const char *arg_a, const snn_tensor *a,
                          const char *arg_b, const snn_tensor *b);
int snn_check_same_shape(const char *fn, const char *arg_a, const snn_tensor *a,
                         const char *arg_b, const snn_tensor *b);
/* b on a's device (and, with same_shape, of a's shape), where a may hold its values as bits or
 * bf16 (spikes packed, a conv output kept as bf16: the ops that read those check a themselves);
 * b must hold values. */
int snn_check_like(const char *fn, const char *arg_a, const snn_tensor *a, const char *arg_b,
                   const snn_tensor *b, bool same_shape);
int snn_check_dim(const char *fn, const char *arg, const snn_tensor *t, int dim, int64_t expected,
                  const char *what);

#ifdef __cplusplus
}
#endif

#endif /* SNN_ERROR_H */
