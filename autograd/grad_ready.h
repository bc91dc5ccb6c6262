/*
 * grad_ready.h - when each parameter's gradient is final during a backward (internal to
 * autograd/): grad_ready.c plans it from the tape, backward.c calls the gradient-ready hook
 * (snn_backward_set_hook) as the walk passes each such point.
 */
#ifndef SNN_GRAD_READY_H
#define SNN_GRAD_READY_H

#include "autograd.h"

typedef struct snn_grad_ready_plan snn_grad_ready_plan;

/* For the tape recorded now: for every parameter, the last node of the backward walk that can
 * add to its gradient. In step memory (gone with the step); NULL with the error set when out
 * of memory, `fn` naming the caller. */
snn_grad_ready_plan *snn_grad_ready_plan_new(const char *fn);
/* Calls hook(ctx, param) for each parameter whose gradient `node`'s backward has finished. */
void snn_grad_ready_after(const snn_grad_ready_plan *plan, const snn_node *node,
                          snn_grad_ready_fn hook, void *ctx);

#endif /* SNN_GRAD_READY_H */
