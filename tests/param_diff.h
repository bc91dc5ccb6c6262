/*
 * param_diff.h - how far apart two models of the same architecture are: the largest
 * |a - b| / (1 + |b|) over every parameter and buffer (values), or over every trainable
 * parameter's gradient; INFINITY when the lists differ or a gradient is missing. For the tests
 * that hold two ways of training to the same numbers (test_online.c, test_time_checkpoint.c).
 */
#ifndef SNN_TEST_PARAM_DIFF_H
#define SNN_TEST_PARAM_DIFF_H

#include <math.h>

#include "snn.h"
#include "test.h"

static inline double param_max_diff(snn_module *a, snn_module *b, bool grads)
{
    snn_param_list pa = {0}, pb = {0};
    CHECK_OK(snn_module_parameters(a, &pa));
    CHECK_OK(snn_module_parameters(b, &pb));
    double worst = pa.count == pb.count ? 0.0 : (double)INFINITY;
    for (int i = 0; i < pa.count && i < pb.count; i++) {
        if (grads && !pa.items[i].trainable) continue;
        const snn_tensor *ta = grads ? pa.items[i].tensor->grad : pa.items[i].tensor;
        const snn_tensor *tb = grads ? pb.items[i].tensor->grad : pb.items[i].tensor;
        if (!ta || !tb) {
            worst = (double)INFINITY;
            continue;
        }
        for (int64_t k = 0; k < ta->numel; k++)
            worst = fmax(worst, fabs((double)ta->data[k] - (double)tb->data[k]) /
                                    (1.0 + fabs((double)tb->data[k])));
    }
    snn_param_list_free(&pa);
    snn_param_list_free(&pb);
    return worst;
}

#endif /* SNN_TEST_PARAM_DIFF_H */
