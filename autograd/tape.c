/*
 * tape.c - recording: the tape of nodes, grad mode, and gradient buffers.
 *
 * The tape is a singly linked list, newest node first, whose head (snn_tape_head) the step
 * arena saves at snn_step_begin() and restores at snn_step_end(): nodes live in the arena, so
 * closing a step drops them with the activations they point to.
 */
#include <string.h>

#include "autograd.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

static int no_grad_depth;

void snn_no_grad_begin(void) { no_grad_depth++; }

void snn_no_grad_end(void)
{
    SNN_ASSERT(no_grad_depth > 0 && "snn_no_grad_end() without snn_no_grad_begin()");
    no_grad_depth--;
}

bool snn_grad_enabled(void) { return no_grad_depth == 0; }

bool snn_should_record(int n_inputs, snn_tensor *const *inputs)
{
    if (no_grad_depth > 0) return false;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && inputs[i]->requires_grad) return true;
    return false;
}

snn_node *snn_tape_record(const char *op, snn_backward_fn backward, snn_tensor *out, int n_inputs,
                          snn_tensor *const *inputs, size_t saved_bytes)
{
    SNN_ASSERT(n_inputs >= 0 && n_inputs <= SNN_MAX_NODE_INPUTS);
    snn_node *node = snn_step_alloc(op, sizeof *node, SNN_CPU);
    void *saved = node && saved_bytes ? snn_step_alloc(op, saved_bytes, SNN_CPU) : NULL;
    if (!node || (saved_bytes && !saved)) return NULL;
    if (saved) memset(saved, 0, saved_bytes);
    *node = (snn_node){.op = op, .backward = backward, .out = out, .n_inputs = n_inputs,
                       .saved = saved, .prev = snn_tape_head};
    for (int i = 0; i < n_inputs; i++) node->inputs[i] = inputs[i];
    snn_tape_head = node;
    out->requires_grad = true;
    out->grad_fn = node;
    return node;
}

/* Set when a backward function could not finish (0: none; else the snn_status to return);
 * snn_backward reports it. */
static int backward_failed;

void snn_backward_out_of_memory(void) { backward_failed = SNN_ERR_MEMORY; }

void snn_backward_fail(snn_status status) { backward_failed = status != SNN_OK ? (int)status : SNN_ERR_STATE; }

int snn_backward_take_failure(void)
{
    int failed = backward_failed;
    backward_failed = 0;
    return failed;
}

/* A zero gradient for the STEP tensor t, its data from the step pool: backward.c gives it back
 * as soon as the op that made t has run its backward (tensor/step_pool.c says why). */
static snn_tensor *pooled_zeros(const snn_tensor *t)
{
    snn_tensor *g = snn_step_pooled_tensor("gradient", t->shape, t->device);
    if (!g) return NULL;
    snn_kernels_for(t->device)->fill(g->data, 0.0f, t->numel);
    return g;
}

float *snn_grad_unfilled(snn_tensor *t)
{
    if (!t || !t->requires_grad || t->grad || t->lifetime == SNN_OWNED) return NULL;
    t->grad = snn_step_pooled_tensor("gradient", t->shape, t->device);
    if (!t->grad) backward_failed = SNN_ERR_MEMORY;
    return t->grad ? t->grad->data : NULL;
}

bool snn_grad_can_hand_over(const snn_tensor *from, const snn_tensor *to)
{
    return from && to && from->grad && from->grad->pooled && !from->retain_grad && !to->grad &&
           to->requires_grad && to->lifetime != SNN_OWNED && from->device == to->device &&
           snn_shape_equal(from->shape, to->shape);
}

float *snn_grad_hand_over(snn_tensor *from, snn_tensor *to)
{
    if (!snn_grad_can_hand_over(from, to)) return NULL;
    snn_grad_settle(from); /* (a reader of a deferred gradient has made it by now) */
    to->grad = from->grad; /* backward.c gives it back after to's op, not after from's */
    from->grad = NULL;
    return to->grad->data;
}

float *snn_grad_for(snn_tensor *t)
{
    if (!t || !t->requires_grad) return NULL;
    snn_grad_settle(t); /* a gradient left half made is made before anything adds to it */
    if (!t->grad) {
        if (t->lifetime == SNN_OWNED) {
            snn_tensor_grad(t);
        } else {
            t->grad = pooled_zeros(t);
        }
        if (!t->grad) {
            backward_failed = SNN_ERR_MEMORY;
            return NULL;
        }
    }
    return t->grad->data;
}

void snn_tape_print(FILE *out)
{
    char buf[96];
    int index = 0;
    for (snn_node *node = snn_tape_head; node; node = node->prev, index++) {
        fprintf(out, "#%-4d %-16s -> %s", index, node->op,
                snn_shape_str(node->out->shape, buf, sizeof buf));
        for (int i = 0; i < node->n_inputs; i++)
            if (node->inputs[i])
                fprintf(out, "  in%d %s%s", i, snn_shape_str(node->inputs[i]->shape, buf, sizeof buf),
                        node->inputs[i]->requires_grad ? "*" : "");
        fputc('\n', out);
    }
}
