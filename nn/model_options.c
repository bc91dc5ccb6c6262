/*
 * model_options.c - the options a model runs with (nn/plan.h): their defaults for where it
 * runs, setting and reading them, and the questions a forward asks of them: may a fusion rule
 * run these modules as one op (then the rule table decides, nn/fusion_rules.c), are these
 * spikes to be kept as bits now that their last forward reader has run, and is this conv
 * output to be kept as bf16 (autograd/bf16_keep.c) around the batch-norm that reads it.
 *
 * The options sit in the model's plan, which every module of its tree points to
 * (snn_module.plan), so a layer deep in a ResNet block reads its model's options without a
 * process-wide flag. A module outside any model runs with the defaults.
 *
 * Test: tests/test_model_plan.c.
 */
#include "model_internal.h"
#include "tensor/arena.h"
#include "tensor/error.h"

snn_model_options snn_model_options_default(snn_device device)
{
    /* the reference kernels are what a student reads: every op of a step on its own */
    const bool fast = device != SNN_CPU || snn_get_kernels() == SNN_KERNELS_FAST;
    /* keep_bf16 trades step time for memory (nn/plan.h): the program asks for it */
    return (snn_model_options){.fuse = fast, .pack_spikes = fast, .keep_bf16 = false};
}

snn_model_options snn_plan_options(const snn_plan *plan, snn_device device)
{
    return plan && plan->options_set ? plan->options : snn_model_options_default(device);
}

void snn_module_set_plan(snn_module *m, snn_plan *plan)
{
    m->plan = plan;
    for (int i = 0; i < m->n_children; i++) snn_module_set_plan(m->children[i], plan);
}

bool snn_plan_is_tracing(const snn_module *m) { return m->plan && m->plan->tracing; }

/* The device of m's first parameter, depth first; false for a tree without parameters. */
static bool first_param_device(const snn_module *m, snn_device *out)
{
    if (m->n_params > 0) {
        *out = m->params[0].tensor->device;
        return true;
    }
    for (int i = 0; i < m->n_children; i++)
        if (first_param_device(m->children[i], out)) return true;
    return false;
}

snn_status snn_model_set_options(snn_module *model, const snn_model_options *options)
{
    if (!snn_model_config_of(model))
        return snn_error(SNN_ERR_ARGUMENT, "snn_model_set_options: bad argument 'model' (expected "
                         "a model made by snn_model_new, got %s)",
                         model ? model->ops->kind : "NULL");
    snn_plan *plan = &((snn_model_impl *)model->impl)->plan;
    plan->options_set = options != NULL;
    if (options) plan->options = *options;
    snn_module_set_plan(model, plan); /* modules swapped in since (sparse, ann2snn) too */
    return SNN_OK;
}

snn_model_options snn_model_options_of(const snn_module *model)
{
    snn_device device = SNN_CPU;
    if (model) first_param_device(model, &device);
    return snn_plan_options(model ? model->plan : NULL, device);
}

const snn_fusion_rule *snn_plan_fusion(snn_module *const *items, int n, const snn_tensor *x,
                                       const snn_tensor *residual)
{
    /* every rule covers two items or more; items[0] is NULL only where a sum comes first */
    if (n < 2 || !x) return NULL;
    const snn_module *first = items[0] ? items[0] : items[1];
    if (!snn_plan_options(first->plan, x->device).fuse) return NULL;
    return snn_fusion_find(items, n, x, residual);
}

bool snn_conv_output_to_pool(const snn_module *conv, const snn_tensor *x)
{
    if (!conv->training) return false;
    if (!snn_grad_enabled()) return conv->plan && conv->plan->one_step;
    return snn_plan_options(conv->plan, x->device).keep_bf16;
}

void snn_values_forward_done(const snn_module *reader, snn_tensor *t)
{
    if (snn_grad_enabled() || !t || !t->pooled || t->spikes || t->base || !t->data ||
        reader->ops != &snn_batchnorm2d_ops || !reader->training)
        return;
    snn_step_pooled_tensor_give_back(t);
}

bool snn_options_keep_bf16(const snn_model_options *o)
{
    /* the synced batch-norm reads its input itself, as floats */
    return o->keep_bf16 && !snn_batchnorm_sync_enabled();
}

bool snn_bf16_keep_applies(const snn_module *reader, const snn_tensor *t)
{
    /* a conv output from the pool (snn_conv2d_to_pool; a forward makes no other pooled tensor
     * that is not spikes), read by a batch-norm whose backward reads its saved input */
    if (!snn_grad_enabled() || !t || !t->pooled || t->spikes || t->base || !t->data || t->bf16 ||
        reader->ops != &snn_batchnorm2d_ops || !reader->training)
        return false;
    const snn_model_options o = snn_plan_options(reader->plan, t->device);
    return snn_options_keep_bf16(&o);
}

bool snn_spikes_pack_before_conv(const snn_module *conv, const snn_tensor *t)
{
    if (!t || !t->spikes || !t->pooled || t->base || !t->data || conv->ops != &snn_conv2d_ops)
        return false;
    if (!snn_plan_options(conv->plan, t->device).pack_spikes) return false;
    /* what reads the conv's input besides the conv: OTTT's trace, a SynOps count, a trace of
     * the plan (snn_model_explain) */
    const snn_conv_impl *c = conv->impl;
    if (c->trace.on || (conv->plan && conv->plan->synops) || snn_plan_is_tracing(conv))
        return false;
    return snn_conv2d_reads_bits(t, conv->params[0].tensor, c->stride, c->pad);
}

snn_status snn_spikes_forward_done(const snn_module *reader, snn_tensor *t)
{
    /* only spikes from the step pool (made with a tape, or by the fused batch-norm op), and
     * not a view of them */
    if (!t || !t->spikes || !t->pooled || t->base) return SNN_OK;
    if (!snn_plan_options(reader->plan, t->device).pack_spikes) return SNN_OK;
    return snn_spikes_pack(t);
}
