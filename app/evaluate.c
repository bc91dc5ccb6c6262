/*
 * evaluate.c - evaluate() and eval_accuracy() of evaluate.h: one pass over a test loader with
 * no tape, counting correct predictions, the loss and each neuron layer's spikes.
 */
#include "app/evaluate.h"

volatile sig_atomic_t *evaluate_stop_flag;

double eval_accuracy(const eval_result *r)
{
    return r->total ? (double)r->correct / (double)r->total : 0.0;
}

snn_status evaluate(snn_module *model, snn_loader *loader, snn_device device, eval_result *r)
{
    snn_module *layers[MAX_LAYERS];
    r->n_layers = snn_model_neuron_layers(model, layers, r->layer_names, MAX_LAYERS);
    const snn_model_config *config = snn_model_config_of(model);
    r->classes = config ? config->classes : 0;
    snn_module_train(model, false);
    snn_no_grad_begin();
    snn_batch batch;
    snn_status status = SNN_OK;
    float *pred = NULL, *lab = NULL;
    int cap = 0;
    while (status == SNN_OK && !(evaluate_stop_flag && *evaluate_stop_flag) &&
           snn_loader_next(loader, &batch)) {
        snn_step_begin();
        snn_tensor *x, *y;
        status = snn_batch_to_device(&batch, device, &x, &y);
        snn_tensor *logits = status == SNN_OK ? snn_module_forward(model, x) : NULL;
        snn_tensor *loss = logits ? snn_cross_entropy(logits, y) : NULL;
        snn_tensor *am = logits ? snn_argmax(logits) : NULL;
        if (!am || !loss) {
            status = snn_last_status();
            snn_step_end();
            break;
        }
        if (batch.count > cap) {
            snn_free(pred, (size_t)cap * sizeof *pred, SNN_CPU);
            cap = batch.count;
            pred = snn_alloc((size_t)cap * sizeof *pred, SNN_CPU);
            if (!pred) {
                cap = 0;
                status = SNN_ERR_MEMORY;
                fprintf(stderr, "evaluate: out of host memory for %d predictions\n", batch.count);
                snn_step_end();
                break;
            }
        }
        lab = (float *)batch.labels;
        snn_tensor_copy_to_host(am, pred);
        r->loss_sum += (double)snn_tensor_item(loss) * batch.count;
        for (int i = 0; i < batch.count; i++) {
            if (r->predictions) fprintf(r->predictions, "%d\n", (int)pred[i]);
            r->correct += pred[i] == lab[i];
            if (r->confusion) r->confusion[(int)lab[i] * r->classes + (int)pred[i]]++;
        }
        r->total += batch.count;
        for (int l = 0; l < r->n_layers; l++) {
            snn_tensor *s = snn_neuron_layer_last_spikes(layers[l]);
            float rate = snn_neuron_layer_firing_rate(layers[l]);
            if (s && rate >= 0.0f) {
                r->spikes[l] += (double)rate * (double)s->numel;
                r->elements[l] += (double)s->numel;
            }
        }
        snn_step_end();
    }
    snn_free(pred, (size_t)cap * sizeof *pred, SNN_CPU);
    snn_no_grad_end();
    return status;
}
