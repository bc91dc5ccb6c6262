/**
 * @file
 * optim.h - training a module's parameters: optimizers (SGD, Adam, AdamW), learning-rate
 * schedules, and a moving average of the weights (EMA). Included by nn/nn.h.
 *
 *     snn_optimizer *opt = snn_adam_new(net, 1e-3f, 0.0f, false);   // after snn_module_to
 *     snn_schedule lr = {.kind = SNN_SCHEDULE_COSINE, .base_lr = 1e-3f, .warmup_steps = 100,
 *                        .total_steps = 10000};
 *     for (int64_t step = 0; ...; step++) {
 *         snn_optimizer_set_lr(opt, snn_schedule_lr(&lr, step));
 *         ... forward, loss, snn_backward ...
 *         snn_optimizer_step(opt);
 *     }
 */
#ifndef SNN_NN_OPTIM_H
#define SNN_NN_OPTIM_H

#include "module.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Optimizers and schedules (nn/optim.c, nn/schedule.c)
 * ------------------------------------------------------------------------------------------- */

/** The update rule of an optimizer. */
typedef enum snn_optimizer_kind {
    SNN_OPT_SGD,    /**< torch.optim.SGD */
    SNN_OPT_ADAM,   /**< torch.optim.Adam (L2 weight decay added to the gradient) */
    SNN_OPT_ADAMW,  /**< torch.optim.AdamW (decoupled weight decay) */
} snn_optimizer_kind;

/** An optimizer: the trainable parameters of one module and their state (opaque). */
typedef struct snn_optimizer snn_optimizer;

/** SGD over the trainable parameters of `m` (with torch.optim.SGD's semantics): lr finite and
 * >= 0, momentum in [0, 1), weight_decay >= 0 (L2), nesterov only with momentum > 0. Make it after
 * snn_module_to(): moving a module replaces its parameter tensors. The caller owns it
 * (snn_optimizer_free; it must not outlive m). NULL with SNN_ERR_ARGUMENT or SNN_ERR_MEMORY. */
snn_optimizer *snn_sgd_new(snn_module *m, float lr, float momentum, float weight_decay,
                           bool nesterov);
/** Adam (decoupled false) or AdamW (true) over the trainable parameters of `m`, betas (0.9,
 * 0.999), eps 1e-8; lr finite and >= 0, weight_decay >= 0. As snn_sgd_new otherwise. */
snn_optimizer *snn_adam_new(snn_module *m, float lr, float weight_decay, bool decoupled);
/** One update of every trainable parameter of `opt` from its .grad (parameters whose .grad is
 * NULL are skipped, as PyTorch skips a None grad). SNN_ERR_ARGUMENT for a NULL opt,
 * SNN_ERR_STATE when a gradient or state is on another device or of another size than its
 * parameter. */
snn_status snn_optimizer_step(snn_optimizer *opt);
/** Sets the learning rate of `opt` (for schedules: snn_schedule_lr). */
void snn_optimizer_set_lr(snn_optimizer *opt, float lr);
/** The learning rate of `opt`; NaN for NULL. */
float snn_optimizer_lr(const snn_optimizer *opt);
/** The number of snn_optimizer_step calls so far (0 for NULL). */
int64_t snn_optimizer_steps(const snn_optimizer *opt);
/** Frees `opt` and its state tensors (not the module's parameters). NULL is a no-op. */
void snn_optimizer_free(snn_optimizer *opt);
/** Fills *out with the optimizer's state as named tensors ("momentum_buffer.<name>" for SGD with
 * momentum, "exp_avg.<name>" and "exp_avg_sq.<name>" for Adam), for checkpoints. The tensors
 * stay the optimizer's; free the list with snn_param_list_free. SNN_ERR_ARGUMENT (NULL, or a
 * name too long), SNN_ERR_MEMORY. */
snn_status snn_optimizer_state(snn_optimizer *opt, snn_param_list *out);
/** Sets the step count (and every parameter's update count, used by Adam's bias corrections) to
 * `steps`, after a checkpoint load restored the state tensors in place. */
void snn_optimizer_set_steps(snn_optimizer *opt, int64_t steps);

/** Clips the gradients of the trainable parameters of `m` by their global L2 norm, as
 * torch.nn.utils.clip_grad_norm_ (nn/clip_grad.c): norm = sqrt(sum of every g^2); when
 * coef = max_norm / (norm + 1e-6) < 1 every gradient is multiplied by coef. Call it between
 * backward and snn_optimizer_step. Parameters without a gradient are skipped. *norm_out (may be
 * NULL) receives the norm before clipping; a NaN or inf gradient makes it NaN or inf and leaves
 * the gradients as they are. One host synchronisation (the norm is read back). max_norm finite
 * and > 0. SNN_ERR_ARGUMENT (NULL module, bad max_norm), SNN_ERR_STATE (gradients on several
 * devices, or of another size than their parameter), SNN_ERR_MEMORY. */
snn_status snn_clip_grad_norm(snn_module *m, float max_norm, float *norm_out);

/** The shape of a learning-rate schedule (nn/schedule.c has the formulas). */
typedef enum snn_schedule_kind {
    SNN_SCHEDULE_CONSTANT,  /**< base_lr throughout */
    SNN_SCHEDULE_COSINE,    /**< linear warm-up from 0, then half a cosine down to min_lr */
    SNN_SCHEDULE_STEP,      /**< base_lr * gamma^floor(step / step_size) */
} snn_schedule_kind;

/** A learning-rate schedule: the rate as a pure function of the step number. */
typedef struct snn_schedule {
    snn_schedule_kind kind;   /**< which formula */
    float base_lr;            /**< the rate after warm-up */
    int64_t warmup_steps;     /**< linear warm-up from 0 (cosine) */
    int64_t total_steps;      /**< cosine: decays to min_lr at total_steps */
    float min_lr;             /**< cosine: the rate from total_steps on */
    int64_t step_size;        /**< step: multiply by gamma every step_size steps */
    float gamma;              /**< step: the factor */
} snn_schedule;

/** The learning rate of schedule `s` at `step` (optimizer updates done so far, from 0), so a
 * resumed run recomputes it. Edge cases are defined, never errors: a negative step counts as 0,
 * warmup <= 0 means none, step_size <= 0 means base_lr throughout. */
float snn_schedule_lr(const snn_schedule *s, int64_t step);

/* ---------------------------------------------------------------------------------------------
 * Weight averaging (nn/ema.c): an exponential moving average of a model's parameters and
 * buffers, kept in a second model that evaluation runs instead of the trained one.
 *
 *     snn_ema *ema = snn_ema_new(net, 0.999f);              // after snn_module_to(net, ...)
 *     for (...) {
 *         ...; snn_optimizer_step(opt);
 *         snn_ema_update(ema, net, snn_optimizer_steps(opt));
 *     }
 *     evaluate(snn_ema_model(ema));                          // the averaged weights
 *     snn_ema_free(ema);
 * ------------------------------------------------------------------------------------------- */

/** The name prefix of the averaged tensors in a checkpoint: "ema.conv1.weight". */
#define SNN_EMA_PREFIX "ema."

/** A moving average of a model's weights (opaque; nn/ema.c). */
typedef struct snn_ema snn_ema;

/** Starts an average of every parameter and buffer (batch-norm running statistics included) of
 * `model`, a model made by snn_model_new, on its device: a second model built from
 * snn_model_config_of(model), holding a copy of model's tensors. decay in (0, 1), e.g. 0.999.
 * Make it after snn_module_to(). The caller owns it (snn_ema_free). NULL with SNN_ERR_ARGUMENT
 * (a decay outside (0, 1), a module that is not a model), SNN_ERR_MEMORY. */
snn_ema *snn_ema_new(snn_module *model, float decay);
/** After an optimizer step: every shadow s of `ema` moves toward its tensor w of `model` (the
 * model it was made from), s = d s + (1 - d) w, with d = min(decay, (1 + step) / (10 + step)),
 * TensorFlow's warm-up (step: the optimizer steps taken, this one included, >= 1; early
 * averages are otherwise dominated by the random initialisation). On the model's device, no
 * host synchronisation. SNN_ERR_ARGUMENT (NULL, step < 1), SNN_ERR_STATE (a model whose tensors
 * do not match the average's); on error no shadow moves. */
snn_status snn_ema_update(snn_ema *ema, snn_module *model, int64_t step);
/** The decay update `step` uses: min(decay, (1 + step) / (10 + step)); NaN for NULL. */
float snn_ema_decay_at(const snn_ema *ema, int64_t step);
/** The decay `ema` was made with; NaN for NULL. */
float snn_ema_decay(const snn_ema *ema);
/** The averaged model (owned by `ema`, in eval mode): evaluate it as any model. NULL for NULL. */
snn_module *snn_ema_model(snn_ema *ema);
/** Fills *out with the averaged tensors named SNN_EMA_PREFIX + their name in the model, for
 * checkpoints (snn_checkpoint_save_extra). The tensors stay the average's; free the list with
 * snn_param_list_free. SNN_ERR_ARGUMENT (NULL, or a name too long), SNN_ERR_MEMORY. */
snn_status snn_ema_state(snn_ema *ema, snn_param_list *out);
/** Frees `ema` and its averaged model. NULL is a no-op. */
void snn_ema_free(snn_ema *ema);

#ifdef __cplusplus
}
#endif

#endif /* SNN_NN_OPTIM_H */
