/*
 * backward.c - reverse-mode differentiation over the tape.
 *
 * Ops are recorded in execution order, so the tape read newest-first is a valid reverse
 * topological order: when a node is reached, every consumer of its output has already added
 * its share to out->grad. A node whose output received no gradient (not on the loss's path)
 * is skipped. The gradient of a non-leaf is released right after its node has run
 * (give_back_gradient): read it afterwards only where retain_grad was set.
 *
 * With a gradient-ready hook set (snn_backward_set_hook, for distributed/), the walk calls it
 * for each parameter as soon as that parameter's gradient is final (grad_ready.c says when).
 */
#include <stdio.h>

#include "autograd.h"
#include "grad_ready.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

/* Once the op that made `out` has run its backward, nothing reads out's gradient again: every
 * consumer of `out` came later on the tape and has already added its share. A pooled gradient
 * of a non-leaf goes back to the step pool there, so a training step holds only the gradients
 * on the frontier of the backward pass, not all of them (tensor/step_pool.c). */
static void give_back_gradient(snn_tensor *out)
{
    if (!out->grad || !out->grad->pooled || out->retain_grad) return;
    snn_step_pool_release(out->grad->data, out->grad->device);
    out->grad->data = NULL;
    out->grad = NULL;
}

static snn_grad_ready_fn ready_hook;
static void *ready_ctx;

void snn_backward_set_hook(snn_grad_ready_fn fn, void *ctx)
{
    ready_hook = fn;
    ready_ctx = fn ? ctx : NULL;
}

static snn_status run_tape(const char *fn)
{
    snn_backward_take_failure();
    snn_grad_ready_plan *ready = NULL;
    if (ready_hook && !(ready = snn_grad_ready_plan_new(fn))) return snn_last_status();
    const int deferred = snn_grad_deferred_mark(); /* (grad_deferred.c) */
    for (snn_node *node = snn_tape_head; node; node = node->prev) {
        if (node->out->grad) {
            /* a gradient left half made (grad_deferred.c): made now, unless this node does */
            if (!node->takes_deferred_grad) snn_grad_settle(node->out);
            /* the pool's profile names its takers (a nested backward's nodes, then this one) */
            const char *outer = snn_step_pool_backward_op(node->op);
            node->backward(node);
            snn_step_pool_backward_op(outer);
            int failed = snn_backward_take_failure();
            if (failed) {
                snn_grad_deferred_drop_since(deferred);
                char why[512]; /* the message is rewritten below: copy it first */
                snprintf(why, sizeof why, "%s", snn_last_error());
                if (failed == SNN_ERR_MEMORY)
                    return snn_error(SNN_ERR_MEMORY, "%s: out of memory for gradients in the "
                                     "backward of '%s' (%s)", fn, node->op, why);
                return snn_error((snn_status)failed, "%s: the backward of '%s' failed: %s", fn,
                                 node->op, why);
            }
            snn_grad_settle(node->out); /* a taker that left it: made before it goes back */
            give_back_gradient(node->out);
        }
        if (ready) snn_grad_ready_after(ready, node, ready_hook, ready_ctx);
    }
    snn_grad_settle_since(deferred); /* none in a walk that reached every maker */
    return SNN_OK;
}

snn_status snn_backward(snn_tensor *loss)
{
    const char *fn = "snn_backward";
    if (snn_check_tensor(fn, "loss", loss)) return snn_last_status();
    char buf[96];
    if (loss->numel != 1)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'loss' (expected 1 element, got shape "
                         "%s); hint: reduce it with snn_mean_all or use snn_backward_from", fn,
                         snn_shape_str(loss->shape, buf, sizeof buf));
    if (!loss->requires_grad)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'loss' (it does not require grad); "
                         "hint: no parameter reached it, or it was computed in no-grad mode", fn);
    float *g = snn_grad_for(loss);
    if (!g) return snn_error(SNN_ERR_MEMORY, "%s: out of memory for the seed gradient", fn);
    snn_kernels_for(loss->device)->fill(g, 1.0f, 1);
    return run_tape(fn);
}

/* Whether `seed` can seed `out` (same shape and device, out differentiable); else the error,
 * naming both arguments. */
static bool seed_fits(const char *fn, const char *out_name, const snn_tensor *out,
                      const char *seed_name, const snn_tensor *seed)
{
    if (snn_check_same_shape(fn, out_name, out, seed_name, seed) ||
        snn_check_same_device(fn, out_name, out, seed_name, seed))
        return false;
    if (!out->requires_grad) {
        snn_error(SNN_ERR_ARGUMENT, "%s: bad argument '%s' (it does not require grad)", fn,
                  out_name);
        return false;
    }
    return true;
}

/* out's gradient += seed (checked by seed_fits first). */
static snn_status add_seed(const char *fn, snn_tensor *out, const snn_tensor *seed)
{
    float *g = snn_grad_for(out);
    if (!g) return snn_error(SNN_ERR_MEMORY, "%s: out of memory for the seed gradient", fn);
    snn_kernels_for(out->device)->axpy(g, 1.0f, seed->data, seed->numel);
    return SNN_OK;
}

snn_status snn_backward_from(snn_tensor *out, const snn_tensor *seed)
{
    const char *fn = "snn_backward_from";
    if (!seed_fits(fn, "out", out, "seed", seed)) return snn_last_status();
    const snn_status seeded = add_seed(fn, out, seed);
    return seeded != SNN_OK ? seeded : run_tape(fn);
}

snn_status snn_backward_from_many(int count, snn_tensor *const *outs,
                                  const snn_tensor *const *seeds)
{
    const char *fn = "snn_backward_from_many";
    if (count < 1 || !outs || !seeds)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'count' (expected >= 1 outputs and "
                         "as many seeds, got %d%s)", fn, count,
                         outs && seeds ? "" : " and a NULL array");
    for (int i = 0; i < count; i++) { /* every pair checked before any is seeded */
        char out_name[32], seed_name[32];
        snprintf(out_name, sizeof out_name, "outs[%d]", i);
        snprintf(seed_name, sizeof seed_name, "seeds[%d]", i);
        if (!seed_fits(fn, out_name, outs[i], seed_name, seeds[i])) return snn_last_status();
    }
    for (int i = 0; i < count; i++) {
        const snn_status seeded = add_seed(fn, outs[i], seeds[i]);
        if (seeded != SNN_OK) return seeded;
    }
    return run_tape(fn);
}
