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
 * parameter's first update. snn_optimizer_steps() counts calls to snn_optimizer_step();
 * snn_optimizer_set_steps(n) (after a checkpoint load) sets every parameter's count to n, which
 * is exact whenever every parameter received a gradient on every step (the normal case).
 *
 * Hyper-parameters not in the API take PyTorch's defaults: SGD dampening 0; Adam betas
 * (0.9, 0.999), eps 1e-8. Bias corrections are computed in double, as PyTorch does in Python,
 * then rounded to float for the kernel.
 *
 * Test: tests/test_optim.c (ctest -R '^optim$').
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"
#include "tensor/error.h"
#include "kernels/kernels.h"

struct snn_optimizer {
    snn_optimizer_kind kind;
    float lr, momentum, weight_decay;
    bool nesterov;
    float beta1, beta2, eps;
    int64_t steps;            /* calls to snn_optimizer_step */

    /* per trainable parameter, in snn_module_parameters order */
    int n;
    snn_named_param *params;  /* the parameter tensors (not owned) and names */
    snn_tensor **state0;      /* momentum_buffer (SGD with momentum) or exp_avg; NULL entries
                               * for SGD without momentum */
    snn_tensor **state1;      /* exp_avg_sq (Adam); NULL for SGD */
    int64_t *param_steps;     /* updates each parameter has received */
};

static bool finite_nonnegative(float x) { return isfinite(x) && x >= 0.0f; }

static void optimizer_release(snn_optimizer *opt)
{
    for (int i = 0; i < opt->n; i++) {
        if (opt->state0) snn_tensor_free(opt->state0[i]);
        if (opt->state1) snn_tensor_free(opt->state1[i]);
    }
    size_t n = (size_t)opt->n;
    snn_free(opt->params, n * sizeof *opt->params, SNN_CPU);
    snn_free(opt->state0, n * sizeof *opt->state0, SNN_CPU);
    snn_free(opt->state1, n * sizeof *opt->state1, SNN_CPU);
    snn_free(opt->param_steps, n * sizeof *opt->param_steps, SNN_CPU);
    snn_free(opt, sizeof *opt, SNN_CPU);
}

/* A zeroed pointer array of n entries (n may be 0); false when out of memory. */
static bool alloc_array(void **out, size_t n, size_t item)
{
    *out = NULL;
    if (n == 0) return true;
    *out = snn_alloc(n * item, SNN_CPU);
    if (!*out) return false;
    memset(*out, 0, n * item);
    return true;
}

/* Collects the trainable parameters and allocates `n_states` state tensors per parameter. */
static snn_optimizer *optimizer_new(const char *fn, snn_module *m, snn_optimizer_kind kind,
                                    int n_states)
{
    if (!m) return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'module' (got NULL)", fn);
    snn_optimizer *opt = snn_alloc(sizeof *opt, SNN_CPU);
    if (!opt) return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    memset(opt, 0, sizeof *opt);
    opt->kind = kind;

    snn_param_list all;
    if (snn_module_parameters(m, &all) != SNN_OK) {
        snn_free(opt, sizeof *opt, SNN_CPU);
        return NULL;
    }
    int n = 0;
    for (int i = 0; i < all.count; i++) n += all.items[i].trainable;
    size_t count = (size_t)n;
    bool ok = alloc_array((void **)&opt->params, count, sizeof *opt->params) &&
              alloc_array((void **)&opt->state0, count, sizeof *opt->state0) &&
              alloc_array((void **)&opt->state1, count, sizeof *opt->state1) &&
              alloc_array((void **)&opt->param_steps, count, sizeof *opt->param_steps);
    if (!ok) {
        /* release frees the arrays that were made (n entries each) and skips the NULL ones */
        opt->n = n;
        snn_param_list_free(&all);
        optimizer_release(opt);
        return snn_error_null(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    }
    opt->n = n;
    int j = 0;
    for (int i = 0; i < all.count; i++)
        if (all.items[i].trainable) opt->params[j++] = all.items[i];
    snn_param_list_free(&all);

    for (int i = 0; i < n; i++) {
        const snn_tensor *p = opt->params[i].tensor;
        if (n_states >= 1) opt->state0[i] = snn_tensor_new(p->shape, p->device);
        if (n_states >= 2) opt->state1[i] = snn_tensor_new(p->shape, p->device);
        if ((n_states >= 1 && !opt->state0[i]) || (n_states >= 2 && !opt->state1[i])) {
            snn_error(SNN_ERR_MEMORY, "%s: out of %s memory for the state of '%s'", fn,
                      snn_device_name(p->device), opt->params[i].name);
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
    if (!opt) return NULL;
    opt->lr = lr;
    opt->momentum = momentum;
    opt->weight_decay = weight_decay;
    opt->nesterov = nesterov;
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
    if (!opt) return NULL;
    opt->lr = lr;
    opt->weight_decay = weight_decay;
    opt->beta1 = 0.9f;
    opt->beta2 = 0.999f;
    opt->eps = 1e-8f;
    return opt;
}

void snn_optimizer_free(snn_optimizer *opt)
{
    if (opt) optimizer_release(opt);
}

/* Checks that parameter i can be updated now: its gradient and state still match it. */
static snn_status check_param(const snn_optimizer *opt, int i)
{
    const char *fn = "snn_optimizer_step";
    const snn_tensor *p = opt->params[i].tensor, *g = p->grad;
    const char *name = opt->params[i].name;
    if (g->numel != p->numel || g->device != p->device)
        return snn_error(SNN_ERR_STATE, "%s: the gradient of '%s' (%lld elements on %s) does not "
                         "match the parameter (%lld elements on %s)", fn, name,
                         (long long)g->numel, snn_device_name(g->device), (long long)p->numel,
                         snn_device_name(p->device));
    const snn_tensor *s = opt->state0[i];
    if (s && s->device != p->device)
        return snn_error(SNN_ERR_STATE, "%s: parameter '%s' is on %s but its optimizer state is "
                         "on %s; hint: create the optimizer after snn_module_to()", fn, name,
                         snn_device_name(p->device), snn_device_name(s->device));
    return SNN_OK;
}

snn_status snn_optimizer_step(snn_optimizer *opt)
{
    const char *fn = "snn_optimizer_step";
    if (!opt) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'opt' (got NULL)", fn);
    /* check every parameter first, so that a bad one does not leave a half-applied step */
    for (int i = 0; i < opt->n; i++) {
        if (!opt->params[i].tensor->grad) continue;
        if (check_param(opt, i) != SNN_OK) return snn_last_status();
        const snn_kernels *k = snn_kernels_or_error(fn, opt->params[i].tensor->device);
        if (!k) return snn_last_status();
        if ((opt->kind == SNN_OPT_SGD && !k->sgd_update) ||
            (opt->kind != SNN_OPT_SGD && !k->adam_update_many))
            return snn_error(SNN_ERR_UNSUPPORTED, "%s: the %s backend has no kernel '%s'", fn,
                             k->name, opt->kind == SNN_OPT_SGD ? "sgd_update" : "adam_update_many");
    }
    /* Adam goes in batches of tensors on one device (adam_update_many: one launch for many) */
    snn_adam_tensor batch[64];
    int batched = 0;
    const snn_kernels *batch_kernels = NULL;
    snn_adam_params adam = {
        .lr = opt->lr,
        .beta1 = opt->beta1,
        .beta2 = opt->beta2,
        .eps = opt->eps,
        .weight_decay = opt->weight_decay,
        .decoupled = opt->kind == SNN_OPT_ADAMW,
    };
    for (int i = 0; i < opt->n; i++) {
        snn_tensor *p = opt->params[i].tensor;
        if (!p->grad) continue; /* no gradient reached it: PyTorch skips it too */
        const snn_kernels *k = snn_kernels_for(p->device);
        const int64_t t = ++opt->param_steps[i];
        if (opt->kind != SNN_OPT_SGD) {
            if (batched == 64 || (batched > 0 && batch_kernels != k)) {
                batch_kernels->adam_update_many(batch, batched, &adam);
                batched = 0;
            }
            batch_kernels = k;
            batch[batched++] = (snn_adam_tensor){
                .p = p->data,
                .m = opt->state0[i]->data,
                .v = opt->state1[i]->data,
                .grad = p->grad->data,
                .n = p->numel,
                .bias_correction1 = (float)(1.0 - pow((double)opt->beta1, (double)t)),
                .bias_correction2 = (float)(1.0 - pow((double)opt->beta2, (double)t)),
            };
            continue;
        }
        snn_sgd_params hp = {
            .lr = opt->lr,
            .momentum = opt->momentum,
            .dampening = 0.0f,
            .weight_decay = opt->weight_decay,
            .nesterov = opt->nesterov,
            .first_step = t == 1,
        };
        k->sgd_update(p->data, opt->state0[i] ? opt->state0[i]->data : NULL, p->grad->data,
                      p->numel, &hp);
    }
    if (batched > 0) batch_kernels->adam_update_many(batch, batched, &adam);
    opt->steps++;
    return SNN_OK;
}

void snn_optimizer_set_lr(snn_optimizer *opt, float lr)
{
    if (opt) opt->lr = lr;
}

float snn_optimizer_lr(const snn_optimizer *opt) { return opt ? opt->lr : NAN; }

int64_t snn_optimizer_steps(const snn_optimizer *opt) { return opt ? opt->steps : 0; }

void snn_optimizer_set_steps(snn_optimizer *opt, int64_t steps)
{
    if (!opt) return;
    if (steps < 0) steps = 0;
    opt->steps = steps;
    for (int i = 0; i < opt->n; i++) opt->param_steps[i] = steps;
}

/* Appends "<prefix>.<param name>" -> t to the list; false when the name does not fit. */
static bool add_state(snn_param_list *out, const char *prefix, const snn_named_param *p,
                      snn_tensor *t)
{
    snn_named_param *item = &out->items[out->count++];
    int n = snprintf(item->name, sizeof item->name, "%s.%s", prefix, p->name);
    item->tensor = t;
    item->trainable = false;
    return n >= 0 && (size_t)n < sizeof item->name;
}

snn_status snn_optimizer_state(snn_optimizer *opt, snn_param_list *out)
{
    const char *fn = "snn_optimizer_state";
    if (!out) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'out' (got NULL)", fn);
    out->items = NULL;
    out->count = 0;
    if (!opt) return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'opt' (got NULL)", fn);
    int per_param = opt->kind == SNN_OPT_SGD ? (opt->momentum > 0.0f ? 1 : 0) : 2;
    int total = per_param * opt->n;
    if (total == 0) return SNN_OK; /* plain SGD keeps no state */
    /* exactly `total` items, as snn_param_list_free() frees count * sizeof(item) bytes */
    out->items = snn_alloc((size_t)total * sizeof *out->items, SNN_CPU);
    if (!out->items) return snn_error(SNN_ERR_MEMORY, "%s: out of host memory", fn);
    bool fits = true;
    for (int i = 0; i < opt->n; i++) {
        const snn_named_param *p = &opt->params[i];
        if (opt->kind == SNN_OPT_SGD) {
            fits &= add_state(out, "momentum_buffer", p, opt->state0[i]);
        } else {
            fits &= add_state(out, "exp_avg", p, opt->state0[i]);
            fits &= add_state(out, "exp_avg_sq", p, opt->state1[i]);
        }
        if (!fits) {
            out->count = total; /* the size that was allocated */
            snn_param_list_free(out);
            return snn_error(SNN_ERR_ARGUMENT, "%s: the state name of parameter '%s' is longer "
                             "than %zu characters", fn, p->name, sizeof p->name - 1);
        }
    }
    SNN_ASSERT(out->count == total);
    return SNN_OK;
}
