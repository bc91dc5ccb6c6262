/*
 * quadrants.c - a program that uses an INSTALLED snn.c, as a project of your own would: it
 * includes <snn/snn.h>, links snn::snn (CMake) or `pkg-config --libs snn`, and builds from this
 * folder alone (CMakeLists.txt, Makefile). It trains a small spiking CNN for a few dozen steps
 * on a made-up task that needs no data set, checks that it learned, and, given a path, saves a
 * checkpoint, loads it back into a new model and checks that both predict the same. When the
 * installed snn.c was built with HDF5 (then SNN_WITH_NIR is defined by snn::snn and by
 * `pkg-config --cflags snn`), it also exports the model to NIR (<path>.nir), reads the graph
 * back and checks that it predicts the same too.
 *
 * The task: 16 x 16 grey images of noise with one bright quadrant; the class (0..3) is which
 * quadrant (top-left, top-right, bottom-left, bottom-right). Chance is 25%.
 *
 *     cmake -S examples/downstream -B build-app -DCMAKE_PREFIX_PATH=<prefix>
 *     cmake --build build-app && build-app/quadrants /tmp/quadrants.safetensors
 *
 * Exit status: 0 when the test accuracy reaches 90% (and the reloaded model agrees), 1 otherwise.
 * Glossary: T time steps, N batch, C channels, H x W image.
 */
#include <stdio.h>
#include <string.h>

#include <snn/snn.h>
#ifdef SNN_WITH_NIR
#include <snn/nir/nir.h>   /* installed only by a build with HDF5, not included by snn.h */
#endif

enum { SIDE = 16, CLASSES = 4, BATCH = 32, STEPS = 60, TEST = 256 };

/* A batch of n images (n, 1, SIDE, SIDE) and labels (n), drawn from rng: noise in [0, 0.5),
 * plus 0.5 over the quadrant that names the class. */
static void make_batch(snn_rng *rng, int n, float *images, float *labels)
{
    for (int i = 0; i < n; i++) {
        int label = (int)snn_rng_below(rng, CLASSES);
        int top = label < 2, left = label % 2 == 0;
        labels[i] = (float)label;
        for (int y = 0; y < SIDE; y++) {
            for (int x = 0; x < SIDE; x++) {
                int inside = (y < SIDE / 2) == top && (x < SIDE / 2) == left;
                float noise = 0.5f * snn_rng_uniform(rng);
                images[(i * SIDE + y) * SIDE + x] = noise + (inside ? 0.5f : 0.0f);
            }
        }
    }
}

/* The predicted classes (n) of a model for host images (n, 1, SIDE, SIDE), without a tape. */
static int predict(snn_module *net, const float *images, int n, float *predicted)
{
    snn_module_train(net, false);
    snn_no_grad_begin();
    snn_step_begin();
    snn_tensor *x = snn_from_host(SNN_SHAPE(n, 1, SIDE, SIDE), images, SNN_CPU);
    snn_tensor *classes = snn_argmax(snn_module_forward(net, x));   /* NULL passes through */
    snn_status status = classes ? snn_tensor_copy_to_host(classes, predicted) : snn_last_status();
    snn_step_end();
    snn_no_grad_end();
    return status == SNN_OK ? 0 : -1;
}

static int fail(const char *what)
{
    fprintf(stderr, "quadrants: %s: %s\n", what, snn_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    printf("snn.c %s (headers %s)\n", snn_version(), SNN_VERSION_STRING);
    if (strcmp(snn_version(), SNN_VERSION_STRING) != 0) {
        fprintf(stderr, "quadrants: built against the headers of another snn.c version\n");
        return 1;
    }
    snn_rng rng;
    snn_rng_seed(&rng, 7);

    /* conv-BN-LIF-pool x2, fc-LIF, fc: the library's spiking CNN, made small */
    snn_model_config cfg = snn_model_config_default(SNN_MODEL_SPIKING_CNN);
    cfg.in_channels = 1;
    cfg.height = cfg.width = SIDE;
    cfg.classes = CLASSES;
    cfg.width_base = 4;
    cfg.hidden = 32;
    cfg.time_steps = 2;
    snn_module *net = snn_model_new(&cfg, &rng);
    if (!net) return fail("snn_model_new");
    snn_optimizer *opt = snn_adam_new(net, 5e-3f, 0.0f, false);
    if (!opt) return fail("snn_adam_new");

    static float images[TEST * SIDE * SIDE], labels[TEST], predicted[TEST], again[TEST];
    for (int step = 1; step <= STEPS; step++) {
        make_batch(&rng, BATCH, images, labels);
        snn_module_train(net, true);
        snn_step_begin();                  /* every tensor of the step lives until step_end */
        snn_tensor *x = snn_from_host(SNN_SHAPE(BATCH, 1, SIDE, SIDE), images, SNN_CPU);
        snn_tensor *y = snn_from_host(SNN_SHAPE(BATCH), labels, SNN_CPU);
        snn_module_zero_grad(net);
        snn_tensor *loss = snn_cross_entropy(snn_module_forward(net, x), y);
        snn_status status = loss ? snn_backward(loss) : snn_last_status();
        if (status == SNN_OK) status = snn_optimizer_step(opt);
        float value = status == SNN_OK ? snn_tensor_item(loss) : 0.0f;
        snn_step_end();
        if (status != SNN_OK) return fail("training step");
        if (step == 1 || step % 20 == 0) printf("step %2d  loss %.4f\n", step, (double)value);
    }

    make_batch(&rng, TEST, images, labels);
    if (predict(net, images, TEST, predicted)) return fail("predict");
    int correct = 0;
    for (int i = 0; i < TEST; i++) correct += predicted[i] == labels[i];
    double accuracy = (double)correct / TEST;
    printf("test accuracy %.1f%% on %d new images (chance 25%%)\n", 100.0 * accuracy, TEST);
    int verdict = accuracy >= 0.9 ? 0 : 1;

    /* a checkpoint holds the model's configuration too: snn_checkpoint_load_model rebuilds it */
    if (argc > 1 && verdict == 0) {
        if (snn_checkpoint_save(argv[1], net, opt, NULL) != SNN_OK)
            return fail("snn_checkpoint_save");
        snn_module *copy = snn_checkpoint_load_model(argv[1], SNN_CPU, NULL);
        if (!copy || predict(copy, images, TEST, again)) return fail("snn_checkpoint_load_model");
        verdict = memcmp(predicted, again, sizeof predicted) != 0;
        printf("checkpoint %s: the reloaded model predicts %s\n", argv[1],
               verdict ? "DIFFERENTLY" : "the same");
        snn_module_free(copy);
    }
#ifdef SNN_WITH_NIR
    /* the same model as a NIR graph (batch-norm folded into the convs), read back and run */
    if (argc > 1 && verdict == 0) {
        char nir_path[1024];
        snprintf(nir_path, sizeof nir_path, "%s.nir", argv[1]);
        if (snn_nir_write(nir_path, net) != SNN_OK) return fail("snn_nir_write");
        snn_module *graph = snn_nir_read(nir_path, 0, SNN_CPU);   /* T from the file */
        if (!graph || predict(graph, images, TEST, again)) return fail("snn_nir_read");
        verdict = memcmp(predicted, again, sizeof predicted) != 0;
        printf("NIR %s: the graph read back predicts %s\n", nir_path,
               verdict ? "DIFFERENTLY" : "the same");
        snn_module_free(graph);
        remove(nir_path);
    }
#endif

    snn_optimizer_free(opt);
    snn_module_free(net);
    snn_shutdown();
    return verdict;
}
