/*
 * module.c - the module tree: parameters, children, modes, the forward of a list of modules,
 * and the named list of everything a model owns (module_to.c moves a tree to a device,
 * module_print.c prints it).
 *
 * A module is a small struct with an ops table (its kind), a few named OWNED tensors and an
 * array of children. Layers are leaves; Sequential, residual blocks and models are inner nodes.
 * Walking the tree depth first, in the order children were added, gives every parameter a
 * stable dotted name ("layer1.0.conv1.weight"): optimizers and checkpoints rely on that order.
 * Every module of a model points to the model's execution plan (nn/plan.h): a child takes its
 * parent's when it is added.
 */
#include <stdio.h>
#include <string.h>

#include "nn.h"
#include "nn_internal.h"
#include "tensor/error.h"

snn_module *snn_module_new(const snn_module_ops *ops, void *impl)
{
    snn_module *m = snn_alloc(sizeof *m, SNN_CPU);
    if (!m) return snn_error_null(SNN_ERR_MEMORY, "snn_module_new: out of host memory (%s)", ops->kind);
    *m = (snn_module){.ops = ops, .training = true, .impl = impl};
    return m;
}

snn_module *snn_module_new_copy(const snn_module_ops *ops, const void *impl, size_t bytes)
{
    void *copy = snn_alloc(bytes, SNN_CPU);
    snn_module *m = copy ? snn_module_new(ops, copy) : NULL;
    if (!m) {
        snn_free(copy, bytes, SNN_CPU);
        return snn_error_null(SNN_ERR_MEMORY, "snn_module_new: out of host memory (%s)", ops->kind);
    }
    memcpy(copy, impl, bytes);
    m->impl_bytes = bytes;
    return m;
}

void snn_module_free(snn_module *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_children; i++) snn_module_free(m->children[i]);
    snn_free(m->children, (size_t)m->cap_children * sizeof *m->children, SNN_CPU);
    for (int i = 0; i < m->n_params; i++) snn_tensor_free(m->params[i].tensor);
    if (m->ops->free_impl) m->ops->free_impl(m);
    if (m->impl_bytes) snn_free(m->impl, m->impl_bytes, SNN_CPU);
    snn_free(m, sizeof *m, SNN_CPU);
}

snn_status snn_module_add_param(snn_module *m, const char *name, snn_tensor *t, bool trainable)
{
    SNN_ASSERT(m && t && t->lifetime == SNN_OWNED);
    SNN_ASSERT(m->n_params < SNN_MODULE_MAX_PARAMS && strlen(name) < sizeof m->params[0].name);
    snn_param *p = &m->params[m->n_params++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->tensor = t;
    p->trainable = trainable;
    t->requires_grad = trainable;
    return SNN_OK;
}

snn_status snn_module_add_uniform(snn_module *m, const char *name, snn_shape shape, float bound,
                                  snn_rng *rng)
{
    snn_tensor *t = snn_tensor_new(shape, SNN_CPU);
    if (!t) return snn_last_status();
    snn_tensor_uniform_(t, rng, -bound, bound);
    return snn_module_add_param(m, name, t, true);
}

snn_status snn_module_add(snn_module *parent, const char *name, snn_module *child)
{
    if (!parent || !child) {
        snn_module_free(child);
        if (!snn_error_pending())
            snn_error(SNN_ERR_ARGUMENT, "snn_module_add: bad argument '%s' (got NULL)",
                      parent ? "child" : "parent");
        return snn_last_status();
    }
    if (strlen(name) >= sizeof child->name) {
        snn_module_free(child);
        return snn_error(SNN_ERR_ARGUMENT, "snn_module_add: bad argument 'name' ('%s' is longer "
                         "than %zu characters)", name, sizeof child->name - 1);
    }
    if (parent->n_children == parent->cap_children) {
        int cap = parent->cap_children ? 2 * parent->cap_children : 4;
        snn_module **grown = snn_alloc((size_t)cap * sizeof *grown, SNN_CPU);
        if (!grown) {
            snn_module_free(child);
            return snn_error(SNN_ERR_MEMORY, "snn_module_add: out of host memory");
        }
        if (parent->n_children)
            memcpy(grown, parent->children, (size_t)parent->n_children * sizeof *grown);
        snn_free(parent->children, (size_t)parent->cap_children * sizeof *grown, SNN_CPU);
        parent->children = grown;
        parent->cap_children = cap;
    }
    snprintf(child->name, sizeof child->name, "%s", name);
    child->training = parent->training;
    if (parent->plan) snn_module_set_plan(child, parent->plan);
    parent->children[parent->n_children++] = child;
    return SNN_OK;
}

snn_module *snn_module_child(snn_module *m, const char *name)
{
    for (int i = 0; m && i < m->n_children; i++)
        if (strcmp(m->children[i]->name, name) == 0) return m->children[i];
    return NULL;
}

snn_tensor *snn_module_forward(snn_module *m, snn_tensor *x)
{
    if (!m) return snn_error_null(SNN_ERR_ARGUMENT, "snn_module_forward: bad argument 'module' (got NULL)");
    if (!x) {
        if (!snn_error_pending())
            snn_error(SNN_ERR_ARGUMENT, "snn_module_forward(%s): bad argument 'x' (got NULL)", m->ops->kind);
        return NULL;
    }
    if (m->plan && m->plan->synops) snn_synops_observe(m->plan->synops, m, x); /* nn/synops.h */
    if (snn_plan_is_tracing(m)) return snn_plan_trace_forward(m, x); /* snn_model_explain */
    return m->ops->forward(m, x);
}

snn_tensor *snn_modules_forward(snn_module *const *ch, int n, snn_tensor *x)
{
    snn_tensor *const caller = x; /* not this list's to give up, even passed on unchanged */
    for (int i = 0; i < n && x; i++) {
        snn_tensor *in = x;
        snn_module *reader = ch[i]; /* the module that reads `in` (a fused op's first) */
        /* a conv output made in this list and read by a batch-norm, its only reader: rounded
         * to bf16 before, kept as bf16 after (autograd/bf16_keep.c); kept before where the
         * batch-norm is the first of a fused op, whose kernels read the bits as they are, so
         * its fp32 block is back in the pool before the op's spikes are made */
        const bool keep_bf16 = in != caller && snn_bf16_keep_applies(reader, in);
        if (keep_bf16 && snn_values_round_bf16(in) != SNN_OK) return NULL;
        /* a rule of the model's plan may run ch[i] and the modules after it as one op */
        const snn_fusion_rule *rule = snn_plan_fusion(ch + i, n - i, x, NULL);
        if (keep_bf16 && rule && rule->pattern[0] == &snn_batchnorm2d_ops &&
            snn_values_keep_bf16(in) != SNN_OK)
            return NULL;
        if (rule) {
            x = snn_fusion_run(rule, ch + i, x, NULL);
            i += rule->length - 1;
        } else {
            x = snn_module_forward(ch[i], x);
        }
        if (x && keep_bf16 && snn_values_keep_bf16(in) != SNN_OK) return NULL;
        if (x && in != caller) snn_values_forward_done(reader, in); /* without a tape */
        /* spikes made in this list and read by a conv: its forward was their last reader */
        if (x && !rule && in != caller && ch[i]->ops == &snn_conv2d_ops &&
            snn_spikes_forward_done(ch[i], in) != SNN_OK)
            return NULL;
    }
    return x;
}

void snn_module_train(snn_module *m, bool training)
{
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->n_children; i++) snn_module_train(m->children[i], training);
}

void snn_module_zero_grad(snn_module *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].tensor->grad) snn_tensor_fill(m->params[i].tensor->grad, 0.0f);
    for (int i = 0; i < m->n_children; i++) snn_module_zero_grad(m->children[i]);
}

void snn_module_reset_state(snn_module *m)
{
    if (!m) return;
    if (m->ops->reset_state) m->ops->reset_state(m);
    for (int i = 0; i < m->n_children; i++) snn_module_reset_state(m->children[i]);
}

/* ---- the named list ----------------------------------------------------------------------- */

static int count_params(const snn_module *m)
{
    int n = m->n_params;
    for (int i = 0; i < m->n_children; i++) n += count_params(m->children[i]);
    return n;
}

static int collect(snn_module *m, const char *prefix, snn_named_param *items, int at)
{
    for (int i = 0; i < m->n_params; i++) {
        snn_named_param *p = &items[at++];
        snprintf(p->name, sizeof p->name, "%s%s", prefix, m->params[i].name);
        p->tensor = m->params[i].tensor;
        p->trainable = m->params[i].trainable;
    }
    for (int i = 0; i < m->n_children; i++) {
        char child_prefix[128];
        snprintf(child_prefix, sizeof child_prefix, "%s%s.", prefix, m->children[i]->name);
        at = collect(m->children[i], child_prefix, items, at);
    }
    return at;
}

snn_status snn_module_parameters(snn_module *m, snn_param_list *out)
{
    out->items = NULL;
    out->count = 0;
    if (!m) return snn_error(SNN_ERR_ARGUMENT, "snn_module_parameters: bad argument 'module' (got NULL)");
    int n = count_params(m);
    if (n == 0) return SNN_OK;
    out->items = snn_alloc((size_t)n * sizeof *out->items, SNN_CPU);
    if (!out->items) return snn_error(SNN_ERR_MEMORY, "snn_module_parameters: out of host memory");
    out->count = collect(m, "", out->items, 0);
    SNN_ASSERT(out->count == n);
    return SNN_OK;
}

void snn_param_list_free(snn_param_list *list)
{
    if (!list) return;
    snn_free(list->items, (size_t)list->count * sizeof *list->items, SNN_CPU);
    list->items = NULL;
    list->count = 0;
}
