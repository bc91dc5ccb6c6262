/*
 * error.c - the thread-local error message and the argument checks every op uses.
 * See error.h for the two kinds of trouble and how each is reported.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

#define SNN_ERROR_CAPACITY 1024

static _Thread_local char error_message[SNN_ERROR_CAPACITY];
static _Thread_local snn_status error_status = SNN_OK;

/* Formats into a local buffer first: a message may quote snn_last_error() to wrap an inner
 * error ("%s: bad metadata: %s", path, snn_last_error()), and vsnprintf from a buffer into
 * itself is undefined (it garbled those messages). */
static void store(snn_status status, const char *fmt, va_list args)
{
    char message[SNN_ERROR_CAPACITY];
    vsnprintf(message, sizeof message, fmt, args);
    memcpy(error_message, message, sizeof message);
    error_status = status;
}

snn_status snn_error(snn_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    store(status, fmt, args);
    va_end(args);
    return status;
}

void *snn_error_null(snn_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    store(status, fmt, args);
    va_end(args);
    return NULL;
}

int snn_error_pending(void) { return error_status != SNN_OK; }
const char *snn_last_error(void) { return error_message; }
snn_status snn_last_status(void) { return error_status; }

void snn_clear_error(void)
{
    error_message[0] = '\0';
    error_status = SNN_OK;
}

/* ---- argument checks ---------------------------------------------------------------------- */

int snn_check_tensor(const char *fn, const char *arg, const snn_tensor *t)
{
    if (t && (t->data || !t->spike_bits)) return 0;
    if (t) {
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (its values were kept as bits for "
                  "backward by snn_spikes_pack, and no forward op reads it again); hint: "
                  "the model option pack_spikes off (snn_model_set_options) to read a "
                  "layer's spikes after the forward", fn, arg);
        return 1;
    }
    /* A NULL that came out of an earlier failed op keeps that op's message. */
    if (!snn_error_pending())
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected a tensor, got NULL)", fn, arg);
    return 1;
}

int snn_check_rank(const char *fn, const char *arg, const snn_tensor *t, int ndim,
                   const char *layout)
{
    if (snn_check_tensor(fn, arg, t)) return 1;
    if (t->shape.ndim == ndim) return 0;
    char buf[96];
    snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected %d-D %s, got %d-D %s)", fn, arg,
              ndim, layout ? layout : "", t->shape.ndim, snn_shape_str(t->shape, buf, sizeof buf));
    return 1;
}

int snn_check_same_device(const char *fn, const char *arg_a, const snn_tensor *a,
                          const char *arg_b, const snn_tensor *b)
{
    if (snn_check_tensor(fn, arg_a, a) || snn_check_tensor(fn, arg_b, b)) return 1;
    if (a->device == b->device) return 0;
    snn_error(SNN_ERR_ARGUMENT,
              "%s: bad argument '%s' (expected a %s tensor like '%s', got a %s tensor); "
              "hint: move both to one device with snn_to_device or snn_module_to",
              fn, arg_b, snn_device_name(a->device), arg_a, snn_device_name(b->device));
    return 1;
}

int snn_check_same_shape(const char *fn, const char *arg_a, const snn_tensor *a,
                         const char *arg_b, const snn_tensor *b)
{
    if (snn_check_tensor(fn, arg_a, a) || snn_check_tensor(fn, arg_b, b)) return 1;
    if (snn_shape_equal(a->shape, b->shape)) return 0;
    char sa[96], sb[96];
    snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected shape %s like '%s', got %s)", fn,
              arg_b, snn_shape_str(a->shape, sa, sizeof sa), arg_a,
              snn_shape_str(b->shape, sb, sizeof sb));
    return 1;
}

int snn_check_dim(const char *fn, const char *arg, const snn_tensor *t, int dim, int64_t expected,
                  const char *what)
{
    if (snn_check_tensor(fn, arg, t)) return 1;
    if (dim < t->shape.ndim && t->shape.dim[dim] == expected) return 0;
    char buf[96];
    snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (expected %s = %lld in dim %d, got shape %s)",
              fn, arg, what, (long long)expected, dim, snn_shape_str(t->shape, buf, sizeof buf));
    return 1;
}
