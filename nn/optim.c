/*
 * optim.c - the optimizers: SGD (momentum, Nesterov, weight decay) and Adam / AdamW, with the
 * semantics of torch.optim.SGD / Adam / AdamW (the update math lives in the kernels,
 * kernels/cpu/optim.c for the CPU; kernels.h documents it).
 *
 * An optimizer takes the module's trainable parameters once, at creation
 * (snn_module_parameters), and keeps per parameter:
 *     SGD with momentum   momentum_buffer            (same shape and device as the parameter)
 *     Adam / AdamW        exp_avg (m), exp_avg_sq (v)
 * as OWNED tensors, made zero-filled up front (PyTorch makes them lazily on the first step; made
 * up front, a fresh optimizer already has every tensor a checkpoint restores in place).
 * Create the optimizer after snn_module_to(): it holds pointers to the parameter tensors.
 *
 * A step updates each trainable parameter whose .grad is not NULL, and skips the others with
 * their state untouched, as PyTorch skips parameters whose .grad is None. Like PyTorch's
 * per-parameter state['step'], each parameter counts its own updates: Adam's bias corrections
 * 1 - beta^t use that count, and SGD initialises its momentum buffer to the gradient on a
 * parameter's first update. What a checkpoint saves and restores of an optimizer (its state
 * under PyTorch's names, its step counts) is nn/optim_state.c; the struct is optim_internal.h.
 *
 * Hyper-parameters not in the API take PyTorch's defaults: SGD dampening 0; Adam betas
 * (0.9, 0.999), eps 1e-8. Bias corrections are computed in double, as PyTorch does in Python,
 * then rounded to float for the kernel.
 *
 * Test: tests/test_optim.c (ctest -R '^optim$').
 */
#include <math.h>
#include "optim_internal.h"
#include "tensor/error.h"

static bool finite_nonnegative(float x) { return isfinite(x) && x >= 0.0f; }

static void optimizer_release(snn_optimizer *opt)
{
    for (int i = 0; i < opt->n; i++)
        for (int s = 0; s < opt->n_states; s++) snn_tensor_free(opt->slots[i].state[s]);
    snn_free(opt->slots, (size_t)opt->n * sizeof *opt->slots, SNN_CPU);
    snn_free(opt, sizeof *opt, SNN_CPU);
}

/* Collects the trainable parameters and makes `n_states` zeroed state tensors for each. */
static snn_optimizer *optimizer_new(const char *fn, snn_module *m, snn_optimizer_kind kind,
                                    int n_states)
{
    if (!m) return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'module' (got NULL)", fn);
    snn_param_list all;
    if (snn_module_parameters(m, &all) != SNN_OK) return NULL;
    int n = 0;
    for (int i = 0; i < all.count; i++) n += all.items[i].trainable;
    snn_optimizer *opt = snn_alloc(sizeof *opt, SNN_CPU);
    snn_optim_slot *slots = n && opt ? snn_alloc((size_t)n * sizeof *slots, SNN_CPU) : NULL;
    if (!opt || (n && !slots)) {
        snn_free(opt, sizeof *opt, SNN_CPU);
        snn_param_list_free(&all);
        return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    }
    *opt = (snn_optimizer){.kind = kind, .n_states = n_states, .n = n, .slots = slots};
    int j = 0;
    for (int i = 0; i < all.count; i++)
        if (all.items[i].trainable) slots[j++] = (snn_optim_slot){.param = all.items[i]};
    snn_param_list_free(&all);

    for (int i = 0; i < n; i++) {
        const snn_tensor *p = slots[i].param.tensor;
        for (int s = 0; s < n_states; s++) {
            slots[i].state[s] = snn_tensor_new(p->shape, p->device);
            if (slots[i].state[s]) continue;
            snn_error(SNN_ERR_MEMORY, "%s: out of %s memory for the state of '%s'", fn,
                      snn_device_name(p->device), slots[i].param.name);
            optimizer_release(opt);
            return NULL;
        }
    }
    return opt;
}

snn_optimizer *snn_sgd_new(snn_module *m, float lr, float momentum, float weight_decay,
                           bool nesterov)
{
    const char *fn = "snn_sgd_new";
    if (!finite_nonnegative(lr))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'lr' (expected a finite value "
                              ">= 0, got %g)", fn, (double)lr);
    if (!(isfinite(momentum) && momentum >= 0.0f && momentum < 1.0f))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'momentum' (expected 0 <= "
                              "momentum < 1, got %g)", fn, (double)momentum);
    if (!finite_nonnegative(weight_decay))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'weight_decay' (expected a "
                              "finite value >= 0, got %g)", fn, (double)weight_decay);
    if (nesterov && momentum == 0.0f)
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'nesterov' (Nesterov momentum "
                              "needs momentum > 0, got momentum 0)", fn);
    snn_optimizer *opt = optimizer_new(fn, m, SNN_OPT_SGD, momentum > 0.0f ? 1 : 0);
    if (opt)
        opt->sgd = (snn_sgd_params){.lr = lr, .momentum = momentum, .dampening = 0.0f,
                                    .weight_decay = weight_decay, .nesterov = nesterov};
    return opt;
}

snn_optimizer *snn_adam_new(snn_module *m, float lr, float weight_decay, bool decoupled)
{
    const char *fn = decoupled ? "snn_adam_new (AdamW)" : "snn_adam_new";
    if (!finite_nonnegative(lr))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'lr' (expected a finite value "
                              ">= 0, got %g)", fn, (double)lr);
    if (!finite_nonnegative(weight_decay))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'weight_decay' (expected a "
                              "finite value >= 0, got %g)", fn, (double)weight_decay);
    snn_optimizer *opt = optimizer_new(fn, m, decoupled ? SNN_OPT_ADAMW : SNN_OPT_ADAM, 2);
    if (opt)
        opt->adam = (snn_adam_params){.lr = lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                                      .weight_decay = weight_decay, .decoupled = decoupled};
    return opt;
}

void snn_optimizer_free(snn_optimizer *opt)
{
    if (opt) optimizer_release(opt);
}

/* Checks that slot i can be updated now: its gradient and state still match the parameter, and
 * the parameter's backend has the update kernel. */
static snn_status check_slot(const snn_optimizer *opt, int i)
{
    const char *fn = "snn_optimizer_step";
    const snn_tensor *p = opt->slots[i].param.tensor, *g = p->grad, *s = opt->slots[i].state[0];
    const char *name = opt->slots[i].param.name;
    if (g->numel != p->numel || g->device != p->device)
        return snn_error(SNN_ERR_STATE, "%s: the gradient of '%s' (%lld elements on %s) does not "
                         "match the parameter (%lld elements on %s)", fn, name,
                         (long long)g->numel, snn_device_name(g->device), (long long)p->numel,
                         snn_device_name(p->device));
    if (s && s->device != p->device)
        return snn_error(SNN_ERR_STATE, "%s: parameter '%s' is on %s but its optimizer state is "
                         "on %s; hint: create the optimizer after snn_module_to()", fn, name,
                         snn_device_name(p->device), snn_device_name(s->device));
    const snn_kernels *k = snn_kernels_for(p->device); /* a table: snn_tensor_new checks */
    const bool sgd = opt->kind == SNN_OPT_SGD;
    if (sgd ? !k->sgd_update : !k->adam_update_many)
        return snn_error(SNN_ERR_UNSUPPORTED, "%s: the %s backend has no kernel '%s'", fn,
                         k->name, sgd ? "sgd_update" : "adam_update_many");
    return SNN_OK;
}

/* SGD: one kernel call per parameter. */
static void sgd_step(snn_optimizer *opt)
{
    for (int i = 0; i < opt->n; i++) {
        snn_optim_slot *slot = &opt->slots[i];
        snn_tensor *p = slot->param.tensor, *momentum = slot->state[0];
        if (!p->grad) continue; /* no gradient reached it: PyTorch skips it too */
        snn_sgd_params hp = opt->sgd;
        hp.first_step = ++slot->steps == 1;
        snn_kernels_for(p->device)->sgd_update(p->data, momentum ? momentum->data : NULL,
                                               p->grad->data, p->numel, &hp);
    }
}

/* Adam: in batches of tensors on one device (adam_update_many: one launch for many), each
 * tensor with the bias corrections 1 - beta^t of its own count t. */
static void adam_step(snn_optimizer *opt)
{
    snn_adam_tensor batch[64];
    int batched = 0;
    const snn_kernels *batch_kernels = NULL;
    for (int i = 0; i < opt->n; i++) {
        snn_optim_slot *slot = &opt->slots[i];
        snn_tensor *p = slot->param.tensor;
        if (!p->grad) continue; /* no gradient reached it: PyTorch skips it too */
        const snn_kernels *k = snn_kernels_for(p->device);
        if (batched == 64 || (batched > 0 && batch_kernels != k)) {
            batch_kernels->adam_update_many(batch, batched, &opt->adam);
            batched = 0;
        }
        batch_kernels = k;
        const double t = (double)++slot->steps;
        batch[batched++] = (snn_adam_tensor){
            .p = p->data,
            .m = slot->state[0]->data,
            .v = slot->state[1]->data,
            .grad = p->grad->data,
            .n = p->numel,
            .bias_correction1 = (float)(1.0 - pow((double)opt->adam.beta1, t)),
            .bias_correction2 = (float)(1.0 - pow((double)opt->adam.beta2, t)),
        };
    }
    if (batched > 0) batch_kernels->adam_update_many(batch, batched, &opt->adam);
}

snn_status snn_optimizer_step(snn_optimizer *opt)
{
    const char *fn = "snn_optimizer_step";
    if (!opt) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'opt' (got NULL)", fn);
    /* check every parameter first, so that a bad one does not leave a half-applied step */
    for (int i = 0; i < opt->n; i++)
        if (opt->slots[i].param.tensor->grad && check_slot(opt, i) != SNN_OK)
            return snn_last_status();
    if (opt->kind == SNN_OPT_SGD) sgd_step(opt);
    else adam_step(opt);
    opt->steps++;
    return SNN_OK;
}

void snn_optimizer_set_lr(snn_optimizer *opt, float lr)
{
    if (opt) opt->sgd.lr = opt->adam.lr = lr;
}

float snn_optimizer_lr(const snn_optimizer *opt)
{
    if (!opt) return NAN;
    return opt->kind == SNN_OPT_SGD ? opt->sgd.lr : opt->adam.lr;
}
