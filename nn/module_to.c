/*
 * module_to.c - moving a module tree to a device (snn_module_to): every parameter and buffer
 * not on it is replaced by a copy made there, with the same name and requires_grad; gradients
 * are not carried over. Optimizers hold the tensors themselves, so they are made afterwards.
 */
#include "nn.h"

snn_status snn_module_to(snn_module *m, snn_device device)
{
    if (!m) return SNN_OK;
    for (int i = 0; i < m->n_params; i++) {
        snn_tensor *old = m->params[i].tensor;
        if (old->device == device) continue;
        snn_tensor *moved = snn_tensor_new(old->shape, device);
        if (!moved) return snn_last_status();
        snn_status s = snn_tensor_copy(moved, old);
        if (s != SNN_OK) {
            snn_tensor_free(moved);
            return s;
        }
        moved->requires_grad = old->requires_grad;
        moved->name = old->name;
        m->params[i].tensor = moved;
        snn_tensor_free(old);
    }
    for (int i = 0; i < m->n_children; i++) {
        snn_status s = snn_module_to(m->children[i], device);
        if (s != SNN_OK) return s;
    }
    return SNN_OK;
}
