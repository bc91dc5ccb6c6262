/*
 * grad_deferred.c - a gradient whose last elementwise step is left to the op that reads it.
 *
 * The fused batch-norm -> neuron op (neurons/bn_neuron.c) writes dL/dX (X, the batch-norm's
 * output) into its input x's gradient and then, in place, turns it into dL/dx:
 *
 *   dL/dx = gamma invstd (dL/dX - mean(dL/dX) - xhat mean(dL/dX xhat))      (per channel)
 *
 * a pass that reads dL/dX and x and writes dL/dx. In a ResNet the conv that made x is its only
 * reader, and on CUDA's channels-last path the conv's backward starts by reading dL/dx once
 * more, to copy it channels-last for the tensor cores. That copy can make dL/dx itself as it
 * loads dL/dX and x (kernels.h, conv2d_backward_bn_dout): one pass over the activations less.
 * So the batch-norm's op may leave dL/dX in x's gradient and record here what the last step
 * needs (snn_bn_dout: x, the statistics, and the sums the neuron kernel made). Whoever reads
 * that gradient next either takes the record or has the step done first (snn_grad_settle, the
 * batch-norm's own in-place kernel, the same bits):
 *   - the node that made x, if it takes records (snn_node.takes_deferred_grad: the conv),
 *     which calls snn_grad_deferred_done where its kernels took it (a record it left is made
 *     right after its backward, before the gradient goes back to the pool);
 *   - any other node that made x: backward.c settles before running it;
 *   - an op that adds into x's gradient (snn_grad_for settles first): a second reader of x;
 *   - the end of the walk settles what it left (snn_grad_settle_since), or a failed walk
 *     drops it; records an enclosing walk left stay (a walk run inside another's node).
 * The op only defers where x's maker takes records and x keeps no gradient for the user
 * (retain_grad), so a gradient read after backward is never one left half made.
 *
 * Records are few (a fused layer's record lives from its backward to its conv's, the next
 * node but one or so), so a short list, searched by tensor, suffices.
 */
#include <string.h>

#include "autograd.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

#define DEFERRED_MAX 32

typedef struct deferred {
    const snn_tensor *t;
    snn_bn_dout bn;
    int N, C, HW;
} deferred;

static deferred records[DEFERRED_MAX];
static int record_count;
static int64_t taken_count; /* records their reader took (snn_grad_deferred_taken) */

static int find(const snn_tensor *t)
{
    for (int i = 0; i < record_count; i++)
        if (records[i].t == t) return i;
    return -1;
}

/* removes record i, keeping the others in the order they were made (a walk's are the last) */
static void forget(int i)
{
    record_count--;
    memmove(&records[i], &records[i + 1], (size_t)(record_count - i) * sizeof records[0]);
}

bool snn_grad_defer_bn(const snn_tensor *t, const snn_bn_dout *bn, int N, int C, int HW)
{
    SNN_ASSERT(t && t->grad && bn && find(t) < 0);
    if (record_count == DEFERRED_MAX) return false;
    records[record_count++] = (deferred){.t = t, .bn = *bn, .N = N, .C = C, .HW = HW};
    return true;
}

bool snn_grad_deferred_bn(const snn_tensor *t, int N, int C, int HW, snn_bn_dout *out)
{
    const int i = record_count ? find(t) : -1;
    if (i < 0) return false;
    const deferred *r = &records[i];
    if (r->N != N || r->C != C || r->HW != HW) return false;
    if (out) *out = r->bn; /* a copy: settling another record moves this one in the list */
    return true;
}

void snn_grad_deferred_done(const snn_tensor *t)
{
    const int i = record_count ? find(t) : -1;
    if (i < 0) return;
    forget(i);
    taken_count++;
}

int64_t snn_grad_deferred_taken(void) { return taken_count; }

void snn_grad_settle(const snn_tensor *t)
{
    const int i = record_count ? find(t) : -1;
    if (i < 0) return;
    const deferred r = records[i];
    forget(i);
    const snn_kernels *k = snn_kernels_for(t->device);
    SNN_ASSERT(k && k->batchnorm_backward_in_place_sums && t->grad);
    k->batchnorm_backward_in_place_sums(t->grad->data, NULL, NULL, r.bn.x, r.bn.x_bf16,
                                        r.bn.gamma, r.bn.save_mean, r.bn.save_invstd,
                                        r.bn.sums, r.N, r.C, r.HW);
}

int snn_grad_deferred_mark(void) { return record_count; }

void snn_grad_settle_since(int mark)
{
    while (record_count > mark) snn_grad_settle(records[record_count - 1].t);
}

void snn_grad_deferred_drop_since(int mark)
{
    if (record_count > mark) record_count = mark;
}
