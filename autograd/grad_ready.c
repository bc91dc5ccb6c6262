/*
 * grad_ready.c - when a parameter's gradient is final during a backward, for the gradient-ready
 * hook (snn_backward_set_hook): data-parallel training (distributed/) starts all-reducing a
 * bucket of gradients while the backward still runs, as soon as each gradient is complete.
 *
 * A parameter's gradient is final once the oldest node that takes it has run, since older
 * nodes cannot use it. Before walking, one pass over the tape finds that node for every
 * parameter (an OWNED tensor that requires grad); the walk (backward.c) then calls the hook
 * right after it. The pass costs O(nodes x parameters) pointer compares, a few thousand for a
 * ResNet-18, on the host. Parameters are leaves, whose gradients are OWNED and never given
 * back, so the hook always sees them whole.
 */
#include "grad_ready.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* A parameter and the last node (in backward order) that can add to its gradient. */
typedef struct ready_entry {
    snn_tensor *param;
    const snn_node *last;
} ready_entry;

struct snn_grad_ready_plan {
    int count;
    ready_entry entries[]; /* room for SNN_MAX_NODE_INPUTS per node */
};

snn_grad_ready_plan *snn_grad_ready_plan_new(const char *fn)
{
    int nodes = 0;
    for (snn_node *node = snn_tape_head; node; node = node->prev) nodes++;
    const size_t room = (size_t)SNN_MAX_NODE_INPUTS * (size_t)nodes + 1;
    snn_grad_ready_plan *plan = snn_step_alloc(fn, sizeof *plan + room * sizeof(ready_entry),
                                               SNN_CPU);
    if (!plan) return NULL;
    int n = 0;
    for (snn_node *node = snn_tape_head; node; node = node->prev) {
        for (int i = 0; i < node->n_inputs; i++) {
            snn_tensor *t = node->inputs[i];
            if (!t || t->lifetime != SNN_OWNED || !t->requires_grad) continue;
            int j = 0;
            while (j < n && plan->entries[j].param != t) j++;
            if (j == n) plan->entries[n++].param = t;
            plan->entries[j].last = node; /* older nodes come later in this walk: the last wins */
        }
    }
    plan->count = n;
    return plan;
}

void snn_grad_ready_after(const snn_grad_ready_plan *plan, const snn_node *node,
                          snn_grad_ready_fn hook, void *ctx)
{
    for (int j = 0; j < plan->count; j++)
        if (plan->entries[j].last == node) hook(ctx, plan->entries[j].param);
}
