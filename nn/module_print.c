/*
 * module_print.c - a module tree as text: each module's name, kind and parameter shapes,
 * indented by depth, with the trainable parameters it holds itself, then the total
 * (snn_module_print, snn_module_num_parameters).
 */
#include <stdio.h>

#include "nn.h"

int64_t snn_module_num_parameters(snn_module *m)
{
    snn_param_list list;
    if (snn_module_parameters(m, &list) != SNN_OK) return 0;
    int64_t total = 0;
    for (int i = 0; i < list.count; i++)
        if (list.items[i].trainable) total += list.items[i].tensor->numel;
    snn_param_list_free(&list);
    return total;
}

static void print_tree(snn_module *m, FILE *out, int depth)
{
    int64_t own = 0;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].trainable) own += m->params[i].tensor->numel;
    fprintf(out, "%*s%s%s%s", 2 * depth, "", m->name[0] ? m->name : "", m->name[0] ? ": " : "",
            m->ops->kind);
    for (int i = 0; i < m->n_params; i++) {
        char buf[64];
        fprintf(out, " %s%s", m->params[i].name,
                snn_shape_str(m->params[i].tensor->shape, buf, sizeof buf));
    }
    if (own) fprintf(out, "  (%lld params)", (long long)own);
    fputc('\n', out);
    for (int i = 0; i < m->n_children; i++) print_tree(m->children[i], out, depth + 1);
}

void snn_module_print(snn_module *m, FILE *out)
{
    if (!m) return;
    print_tree(m, out, 0);
    fprintf(out, "total trainable parameters: %lld\n", (long long)snn_module_num_parameters(m));
}
