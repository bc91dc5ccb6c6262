/*
 * train_online.c - SLTT, training through time online (Meng et al., "Towards Memory- and
 * Time-Efficient Backpropagation for Training Spiking Neural Networks", ICCV 2023).
 *
 * BPTT runs the T steps forward, keeps every step's activations, then runs backward through
 * all of them: memory grows with T. SLTT observes that in a trained SNN the gradient that
 * flows back through the membrane (V[t] -> V[t+1], the temporal path) contributes little next
 * to the one that flows through the spikes of each step (the spatial path), and drops it:
 *
 *   dL/dW = sum_t  dL_t/dW |_(V[t-1] held constant)        L = (1/T) sum_t CE(o[t], y)
 *
 * Each step's term needs only that step's activations, so step t can run forward AND
 * backward before step t+1 starts, and its graph is freed at once (a nested snn_step_begin /
 * snn_step_end per time step). What stays is one step's graph and the neurons' state V (one
 * value per neuron): memory independent of T. The loss is the per-step cross-entropy (as TET
 * and OTTT use): the cross-entropy of the time-mean logits couples every step and cannot be
 * taken online.
 *
 * SLTT-K runs backward on K of the T steps only, drawn at random for each batch, and scales
 * them by 1/K (an unbiased estimate of the mean over t): the other steps run forward without
 * a tape, to carry the state. Time per batch falls towards the forward passes alone.
 *
 * Batch-norm sees one time step per forward: its statistics are over N samples (BPTT's over
 * T N), and its running statistics are updated T times per batch.
 *
 * OTTT (Xiao et al., "Online Training Through Time for Spiking Neural Networks", NeurIPS 2022)
 * is the same loop with one change: each conv and linear layer takes its weight gradient at
 * step t against a trace of its inputs, a[t] = lambda a[t-1] + x[t] (lambda the neurons'
 * decay, 1 - 1/tau; 1 for IF), instead of x[t] (nn/synapse_trace.c). The trace carries the
 * inputs of the steps before, so part of the credit SLTT drops comes back, for one more tensor
 * per synaptic layer; what the step holds still does not grow with T.
 */
#include "app/train_online.h"
#include "tensor/arena.h"
#include "tensor/error.h"
#include "tensor/hash.h"

/* A STEP tensor of zeros. */
static snn_tensor *step_zeros(const char *fn, snn_shape shape, snn_device device)
{
    snn_tensor *t = snn_step_tensor(fn, shape, device);
    return t && snn_tensor_fill(t, 0.0f) == SNN_OK ? t : NULL;
}

snn_status train_online_check(const char *prog, const char *mode, snn_module *model)
{
    const snn_model_config *c = snn_model_config_of(model);
    if (!c)
        return snn_error(SNN_ERR_ARGUMENT, "%s: --train-mode %s: expected a model made by "
                         "snn_model_new", prog, mode);
    if (c->encoding != SNN_ENCODING_DIRECT && c->encoding != SNN_ENCODING_POISSON)
        return snn_error(SNN_ERR_ARGUMENT, "%s: --train-mode %s takes images with direct or "
                         "Poisson encoding for now (the model's input is %s); hint: train event "
                         "frames and sequences with --train-mode bptt", prog, mode,
                         c->encoding == SNN_ENCODING_EVENTS       ? "event frames"
                         : c->encoding == SNN_ENCODING_FIRST_STEP ? "a converted network's"
                                                                    " first step"
                                                                  : "a sequence");
    if (snn_neuron_is_ann(c->neuron.kind))
        return snn_error(SNN_ERR_ARGUMENT, "%s: --train-mode %s: a %s model is an ANN (T = 1): "
                         "there is no time to train through", prog, mode,
                         snn_neuron_kind_name(c->neuron.kind));
    /* each one-step forward would draw its own dropout masks, where the model shares one mask
     * over all T steps: a silent change of the model, refused */
    if (c->dropout > 0.0f)
        return snn_error(SNN_ERR_ARGUMENT, "%s: --train-mode %s: expected --dropout 0 (got %g: "
                         "its mask is shared by all T steps, which one-step forwards cannot do)",
                         prog, mode, (double)c->dropout);
    return SNN_OK;
}

/* SLTT-K's draw: marks K of the T steps (all when K is 0 or >= T), a partial Fisher-Yates
 * shuffle on a stream seeded by (seed, optimizer step), so a resumed run draws the same. */
static void choose_steps(bool *chosen, int T, int K, uint64_t seed, int64_t step)
{
    if (K <= 0 || K >= T) {
        for (int t = 0; t < T; t++) chosen[t] = true;
        return;
    }
    int order[1024];
    for (int t = 0; t < T; t++) order[t] = t, chosen[t] = false;
    uint64_t s = snn_hash64(seed ^ snn_hash64((uint64_t)step + 1));
    for (int i = 0; i < K; i++) {
        s = snn_hash64(s);
        int j = i + (int)(s % (uint64_t)(T - i));
        int tmp = order[i];
        order[i] = order[j], order[j] = tmp;
        chosen[order[i]] = true;
    }
}

/* Step t of the loop: forward from the carried state, the loss, its backward when chosen,
 * and the running sums of the logits and the loss (no tape: they are read, not trained). */
static snn_status one_time_step(snn_module *model, snn_tensor *x, snn_tensor *y, bool backward,
                                float scale, float smoothing, snn_tensor *sum_logits,
                                snn_tensor *sum_loss)
{
    if (!backward) snn_no_grad_begin();
    /* a taped fused layer's state advances in its backward (snn_batchnorm_neuron_carry) */
    const int pending = snn_batchnorm_neuron_carry_pending();
    snn_tensor *out = snn_module_forward(model, x); /* (N, classes), this step's o[t] */
    snn_tensor *loss = out ? snn_cross_entropy_smooth(out, y, smoothing) : NULL;
    snn_status status = loss ? SNN_OK : snn_last_status();
    if (status == SNN_OK && backward) status = snn_backward(snn_scale(loss, scale));
    if (status == SNN_OK && snn_batchnorm_neuron_carry_pending() != pending)
        status = snn_error(SNN_ERR_STATE, "train_online_step: %d neuron layers' backward did not "
                           "run, so their state did not advance (no gradient reached their "
                           "spikes?)", snn_batchnorm_neuron_carry_pending() - pending);
    if (status == SNN_OK) {
        if (backward) snn_no_grad_begin();
        if (!snn_add_into(sum_logits, out) || !snn_add_into(sum_loss, loss))
            status = snn_last_status();
        if (backward) snn_no_grad_end();
    }
    if (!backward) snn_no_grad_end();
    return status;
}

/* OTTT's trace decay: the membrane's, lambda = 1 - 1/tau for the leaky kinds (PLIF: its
 * initial tau, not the learned one), 1 for IF. */
static float trace_decay(const snn_neuron_config *n)
{
    return n->kind == SNN_NEURON_IF || !(n->tau > 1.0f) ? 1.0f : 1.0f - 1.0f / n->tau;
}

snn_status train_online_step(snn_module *model, snn_tensor *x, snn_tensor *y, int64_t step,
                             const train_online_options *o, snn_tensor **logits,
                             snn_tensor **loss)
{
    const char *fn = "train_online_step";
    *logits = *loss = NULL;
    const snn_model_config *c = snn_model_config_of(model);
    if (!c || snn_check_tensor(fn, "x", x) || snn_check_tensor(fn, "y", y))
        return snn_last_status() != SNN_OK ? snn_last_status() : SNN_ERR_ARGUMENT;
    const int T = c->time_steps;
    const int64_t N = x->shape.dim[0];
    snn_tensor *sum_logits = step_zeros(fn, SNN_SHAPE(N, c->classes), x->device);
    snn_tensor *sum_loss = step_zeros(fn, SNN_SHAPE(1), x->device);
    if (!sum_logits || !sum_loss) return snn_last_status();
    bool chosen[1024];
    choose_steps(chosen, T, o->backward_steps, o->seed, step);
    const int K = o->backward_steps > 0 && o->backward_steps < T ? o->backward_steps : T;

    snn_status status = snn_model_set_time_steps(model, 1);
    if (status != SNN_OK) return status;
    snn_neuron_layers_set_carry(model, SNN_CARRY_CONSTANT);
    if (o->traces) snn_synapse_layers_set_trace(model, true, trace_decay(&c->neuron));
    snn_module_reset_state(model); /* the neurons' states and the traces: a new sequence */
    snn_module_zero_grad(model);
    for (int t = 0; t < T && status == SNN_OK; t++) {
        snn_step_begin(); /* step t's graph lives in here and is freed before step t + 1 */
        status = one_time_step(model, x, y, chosen[t], 1.0f / (float)K, o->label_smoothing,
                               sum_logits, sum_loss);
        snn_step_end();
    }
    snn_neuron_layers_set_carry(model, SNN_CARRY_NONE);
    if (o->traces) snn_synapse_layers_set_trace(model, false, 0.0f);
    snn_status restored = snn_model_set_time_steps(model, T);
    if (status == SNN_OK) status = restored;
    if (status != SNN_OK) return status;
    *logits = snn_scale(sum_logits, 1.0f / (float)T);
    *loss = snn_scale(sum_loss, 1.0f / (float)T);
    return *logits && *loss ? SNN_OK : snn_last_status();
}
