/*
 * snn_export_nir.c - snn-export-nir: writes a trained checkpoint as a NIR graph (HDF5), the
 * interchange format of snnTorch, Norse, Sinabs, Rockpool, Lava-dl, Spyx and neuromorphic
 * chips, then reads the file back and checks that it reproduces the model's logits on a few
 * random inputs (docs/nir.md has the mapping and what cannot be exported).
 *
 *   build/bin/snn-export-nir --checkpoint runs/fashion-mnist-cnn/checkpoint.safetensors
 *
 * writes runs/fashion-mnist-cnn/checkpoint.nir: without -o the graph goes next to its
 * checkpoint (in the run's folder, not the current one), named like it with .nir.
 */
#include <math.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/options.h"
#include "snn.h"
#include "nir/nir.h"

/* An rsnn reads its images as sequences (nn/model_rsnn.c), its NIR graph takes the sequence
 * itself: x (N, C, H, W) as (H, N, C*W) rows or (H*W, N, C) pixels, into seq. */
static void image_as_sequence(const float *x, float *seq, const snn_model_config *c, int N)
{
    const int C = c->in_channels, H = c->height, W = c->width;
    const bool rows = c->encoding == SNN_ENCODING_ROWS;
    for (int n = 0; n < N; n++)
        for (int ch = 0; ch < C; ch++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++) {
                    const float v = x[(((int64_t)n * C + ch) * H + h) * W + w];
                    if (rows) seq[((int64_t)h * N + n) * C * W + ch * W + w] = v;
                    else seq[(((int64_t)h * W + w) * N + n) * C + ch] = v;
                }
}

/* Largest |logit difference| between model and graph on a random batch; < 0 on an error. */
static double verify(snn_module *model, snn_module *graph, const snn_model_config *c)
{
    const int N = 4;
    bool events = c->encoding == SNN_ENCODING_EVENTS;
    snn_shape shape = events ? SNN_SHAPE(c->time_steps, N, c->in_channels, c->height, c->width)
                             : SNN_SHAPE(N, c->in_channels, c->height, c->width);
    int64_t numel = 1;
    for (int d = 0; d < shape.ndim; d++) numel *= shape.dim[d];
    float *x = malloc((size_t)numel * sizeof *x);
    if (!x) return -1.0;
    snn_rng rng;
    snn_rng_seed(&rng, 1);
    for (int64_t i = 0; i < numel; i++)
        x[i] = events ? (float)snn_rng_below(&rng, 3) : 2.0f * snn_rng_uniform(&rng) - 1.0f;
    double worst = -1.0;
    snn_module_train(model, false);
    snn_no_grad_begin();
    snn_step_begin();
    snn_tensor *in = snn_from_host(shape, x, SNN_CPU);
    /* the graph of an rsnn on images takes them as its sequence */
    const bool sequence = c->encoding == SNN_ENCODING_ROWS || c->encoding == SNN_ENCODING_PIXELS;
    float *seq = sequence ? malloc((size_t)numel * sizeof *seq) : NULL;
    if (seq) image_as_sequence(x, seq, c, N);
    const int64_t steps = c->encoding == SNN_ENCODING_ROWS ? c->height
                                                           : (int64_t)c->height * c->width;
    const int64_t features = numel / ((int64_t)N * steps);
    snn_tensor *graph_in = !sequence ? in
                           : seq ? snn_from_host(SNN_SHAPE(steps, N, features), seq, SNN_CPU)
                                 : NULL;
    snn_tensor *a = in ? snn_module_forward(model, in) : NULL;
    snn_tensor *b = graph_in ? snn_module_forward(graph, graph_in) : NULL;
    if (a && b && a->numel == b->numel) {
        float *ha = malloc((size_t)a->numel * 2 * sizeof *ha);
        if (ha) {
            snn_tensor_copy_to_host(a, ha);
            snn_tensor_copy_to_host(b, ha + a->numel);
            worst = 0.0;
            for (int64_t i = 0; i < a->numel; i++)
                worst = fmax(worst, fabs((double)ha[i] - (double)ha[a->numel + i]));
            free(ha);
        }
    }
    snn_step_end();
    snn_no_grad_end();
    free(seq);
    free(x);
    return worst;
}

int main(int argc, char **argv)
{
    const char *checkpoint = NULL, *output = NULL;
    bool no_verify = false;
    option table[] = {
        {"--checkpoint", OPT_STRING, &checkpoint, "checkpoint written by snn-train (required)"},
        {"-o", OPT_STRING, &output,
         "the NIR file to write (default: the checkpoint's path with .nir for .safetensors)"},
        {"--no-verify", OPT_FLAG, &no_verify, "skip reading the file back and comparing logits"},
    };
    int parsed = parse_options(argc, argv, "Exports a checkpoint as a NIR graph (HDF5).", table,
                               (int)(sizeof table / sizeof table[0]));
    if (parsed) return parsed == 2 ? 0 : 2;
    if (!checkpoint) {
        fprintf(stderr, "snn-export-nir: --checkpoint is required; see --help\n");
        return 2;
    }
    char next_to_checkpoint[4096];
    if (!output) { /* runs/x/checkpoint.safetensors -> runs/x/checkpoint.nir */
        const char *ext = ".safetensors";
        size_t stem = strlen(checkpoint), n = strlen(ext);
        if (stem > n && strcmp(checkpoint + stem - n, ext) == 0) stem -= n;
        if (stem + 5 > sizeof next_to_checkpoint) {
            fprintf(stderr, "snn-export-nir: --checkpoint: the path is too long to name the "
                    "graph after it; give -o\n");
            return 2;
        }
        snprintf(next_to_checkpoint, sizeof next_to_checkpoint, "%.*s.nir", (int)stem, checkpoint);
        output = next_to_checkpoint;
    }
    snn_metadata meta;
    snn_module *model = snn_checkpoint_load_model(checkpoint, SNN_CPU, &meta);
    if (!model) {
        fprintf(stderr, "snn-export-nir: %s\n", snn_last_error());
        return 1;
    }
    int rc = 0;
    if (snn_nir_write(output, model) != SNN_OK) {
        fprintf(stderr, "snn-export-nir: %s\n", snn_last_error());
        rc = 1;
    } else {
        const snn_model_config *c = snn_model_config_of(model);
        printf("wrote %s: %s, T=%d (run the graph T steps at dt = 1; logits = mean of the output)\n",
               output, snn_model_kind_name(c->kind), c->time_steps);
        if (!no_verify) {
            snn_module *graph = snn_nir_read(output, 0, SNN_CPU);
            double worst = graph ? verify(model, graph, c) : -1.0;
            if (worst < 0.0) {
                fprintf(stderr, "snn-export-nir: reading it back failed: %s\n", snn_last_error());
                rc = 1;
            } else {
                printf("read back: max |logit difference| on a random batch %.3g\n", worst);
                if (worst > 1e-3) rc = 1;
            }
            snn_module_free(graph);
        }
    }
    snn_module_free(model);
    snn_shutdown();
    return rc;
}
