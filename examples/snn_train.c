/*
 * snn_train.c - snn-train: trains a spiking network from C (the main job of snn.c).
 *
 *   build/bin/snn-train                       # spiking CNN on Fashion-MNIST, CPU defaults
 *
 * The defaults (LIF + ATan, T = 2, width 32, Adam 1e-3 with a cosine schedule, 4 epochs of
 * batch 128) are the main job: on the 2-core CI machine they reach ~90% test accuracy in under
 * 3 minutes (docs/benchmarks.md). The library's model default is T = 4.
 *   build/bin/snn-train --model resnet18 --dataset cifar10 --data runs/fmnist-cifar --device cuda
 *   build/bin/snn-train --resume runs/fashion-mnist-cnn/checkpoint.safetensors --epochs 6
 *
 * Each epoch: train with a progress line (loss, accuracy, img/s, ETA), evaluate on the test
 * split, append metrics (CSV and JSON, with the firing rate of every neuron layer), redraw the
 * curves (SVG) and write a checkpoint atomically. A NaN or infinite loss stops training with
 * a message and leaves the last good checkpoint as it was. --resume continues bit-exactly.
 */
#include <math.h>
#include <unistd.h>

#include "snn_common.h"
#ifdef SNN_WITH_CUDA
#include "tensor/cuda_options.h"
#endif

typedef struct train_options {
    const char *dataset, *data, *model, *neuron, *surrogate, *loss, *encoding;
    const char *optimizer, *schedule, *device, *out, *resume;
    int time_steps, width, hidden, epochs, batch_size, warmup, seed, threads, log_every;
    int limit_train, limit_test, augment, stop_after, levels;
    bool tf32, symmetric;
    float tau, lr, momentum, weight_decay, min_lr;
} train_options;

static train_options defaults(void)
{
    return (train_options){
        .dataset = "fashion-mnist", .model = "cnn", .neuron = "lif", .surrogate = "atan",
        .loss = "ce", .encoding = "direct", .optimizer = "adam", .schedule = "cosine",
        .device = "cpu", .time_steps = 2, .width = 0, .hidden = 128, .epochs = 4,
        .batch_size = 128, .warmup = 0, .seed = 0, .threads = 0, .log_every = 0,
        .limit_train = 0, .limit_test = 0, .augment = -1, .tau = 2.0f, .lr = 1e-3f,
        .momentum = 0.9f, .weight_decay = 0.0f, .min_lr = 0.0f,
    };
}

/* ---- one training epoch ------------------------------------------------------------------- */

typedef struct epoch_stats {
    double loss_sum;
    int64_t correct, seen;        /* over the batches whose loss was read */
    int64_t images;
    double seconds;
    bool diverged;
} epoch_stats;

static void progress(const char *phase, int64_t epoch, int epochs, int64_t done, int64_t total,
                     const epoch_stats *s, double elapsed, bool tty, bool final)
{
    double rate = elapsed > 0 ? (double)s->images / elapsed : 0.0;
    double eta = done > 0 ? elapsed * (double)(total - done) / (double)done : 0.0;
    double loss = s->seen ? s->loss_sum / (double)s->seen : (double)NAN;
    double acc = s->seen ? 100.0 * (double)s->correct / (double)s->seen : (double)NAN;
    if (tty) {
        int filled = total ? (int)(30 * done / total) : 30;
        fprintf(stderr, "\r%s %lld/%d [%.*s%*s] %3d%% loss %.4f acc %5.2f%% %6.0f img/s ETA %02d:%02d ",
                phase, (long long)epoch + 1, epochs, filled, "==============================",
                30 - filled, "", total ? (int)(100 * done / total) : 100, loss, acc, rate,
                (int)eta / 60, (int)eta % 60);
        if (final) fputc('\n', stderr);
    } else {
        fprintf(stderr, "%s %lld/%d batch %lld/%lld loss %.4f acc %.2f%% %.0f img/s ETA %ds\n", phase,
                (long long)epoch + 1, epochs, (long long)done, (long long)total, loss, acc, rate, (int)eta);
    }
}

static snn_status train_epoch(snn_module *model, snn_optimizer *opt, const snn_schedule *schedule,
                              snn_loader *loader, const train_options *o, snn_device device,
                              int64_t epoch, epoch_stats *st)
{
    bool tty = isatty(STDERR_FILENO);
    int64_t total = snn_loader_num_batches(loader), done = 0;
    int64_t next_plain = total / 10 > 0 ? total / 10 : 1;
    const snn_model_config *config = snn_model_config_of(model);
    bool mse = strcmp(o->loss, "mse") == 0;
    double start = now_seconds(), last_draw = 0.0;
    float *pred = malloc((size_t)o->batch_size * sizeof *pred);
    snn_status status = SNN_OK;
    snn_batch batch;
    snn_module_train(model, true);
    while (snn_loader_next(loader, &batch)) {
        snn_optimizer_set_lr(opt, snn_schedule_lr(schedule, snn_optimizer_steps(opt)));
        snn_step_begin();
        snn_module_zero_grad(model);
        snn_tensor *x, *y, *loss = NULL;
        status = snn_batch_to_device(&batch, device, &x, &y);
        snn_tensor *out = status == SNN_OK ? snn_module_forward(model, x) : NULL;
        if (out) loss = mse ? snn_mse_loss(out, snn_one_hot(y, config->classes)) : snn_cross_entropy(out, y);
        if (loss) status = snn_backward(loss);
        else status = snn_last_status();
        /* Reading the loss synchronises with the device: only every log_every steps. */
        bool read = status == SNN_OK && (done % o->log_every == 0 || done + 1 == total);
        if (read) {
            float value = snn_tensor_item(loss);
            if (!isfinite(value)) {
                st->diverged = true;
                snn_step_end();
                fprintf(stderr, "\nsnn-train: the loss became %g at epoch %lld, batch %lld; stopping. "
                        "The last checkpoint is kept as it was.\nhint: lower --lr (now %g) or use "
                        "--schedule cosine --warmup 200\n", (double)value, (long long)epoch + 1,
                        (long long)done, (double)snn_optimizer_lr(opt));
                break;
            }
            snn_tensor *am = snn_argmax(out);
            snn_tensor_copy_to_host(am, pred);
            for (int i = 0; i < batch.count; i++) st->correct += pred[i] == batch.labels[i];
            st->loss_sum += (double)value * batch.count;
            st->seen += batch.count;
        }
        if (status == SNN_OK) status = snn_optimizer_step(opt);
        snn_step_end();
        if (status != SNN_OK) break;
        st->images += batch.count;
        done++;
        double elapsed = now_seconds() - start;
        if (tty ? elapsed - last_draw > 0.25 : done >= next_plain) {
            progress("train", epoch, o->epochs, done, total, st, elapsed, tty, false);
            last_draw = elapsed;
            if (!tty) next_plain += total / 10 > 0 ? total / 10 : 1;
        }
    }
    snn_synchronize(device);
    st->seconds = now_seconds() - start;
    if (status == SNN_OK && !st->diverged)
        progress("train", epoch, o->epochs, done, total, st, st->seconds, tty, true);
    free(pred);
    return status;
}

/* ---- metrics files ------------------------------------------------------------------------ */

static void path_in(char *buf, size_t size, const char *dir, const char *file)
{
    snprintf(buf, size, "%s/%s", dir, file);
}

/* Appends one epoch's metrics to metrics.csv and rewrites metrics.json and the SVG curves from
 * the CSV, so a resumed run continues the same files. */
static void write_metrics(const char *out_dir, int64_t epoch, const epoch_stats *st,
                          const eval_result *ev, float lr)
{
    char path[1024];
    path_in(path, sizeof path, out_dir, "metrics.csv");
    bool fresh = access(path, F_OK) != 0 || epoch == 0;
    FILE *f = fopen(path, fresh ? "w" : "a");
    if (!f) {
        fprintf(stderr, "snn-train: cannot write '%s': %s\n", path, strerror(errno));
        return;
    }
    if (fresh) {
        fprintf(f, "epoch,train_loss,train_accuracy,test_loss,test_accuracy,images_per_second,seconds,lr");
        for (int l = 0; l < ev->n_layers; l++) fprintf(f, ",firing_rate_%s", ev->layer_names[l]);
        fputc('\n', f);
    }
    fprintf(f, "%lld,%.6f,%.6f,%.6f,%.6f,%.1f,%.2f,%.6g", (long long)epoch + 1,
            st->seen ? st->loss_sum / (double)st->seen : (double)NAN,
            st->seen ? (double)st->correct / (double)st->seen : (double)NAN,
            ev->total ? ev->loss_sum / (double)ev->total : (double)NAN, eval_accuracy(ev),
            st->seconds > 0 ? (double)st->images / st->seconds : 0.0, st->seconds, (double)lr);
    for (int l = 0; l < ev->n_layers; l++)
        fprintf(f, ",%.6f", ev->elements[l] > 0 ? ev->spikes[l] / ev->elements[l] : 0.0);
    fputc('\n', f);
    fclose(f);

    /* read the CSV back: columns 0..7 then firing rates */
    enum { MAX_EPOCHS = 1000, COLS = 8 + MAX_LAYERS };
    static double table[MAX_EPOCHS][COLS];
    char header[8192];
    int rows = 0, cols = 0;
    f = fopen(path, "r");
    if (!f || !fgets(header, sizeof header, f)) {
        if (f) fclose(f);
        return;
    }
    for (char *c = header; *c; c++) cols += *c == ',';
    cols++;
    char line[8192];
    while (rows < MAX_EPOCHS && fgets(line, sizeof line, f)) {
        char *p = line;
        for (int c = 0; c < cols && c < COLS; c++) {
            table[rows][c] = strtod(p, &p);
            if (*p == ',') p++;
        }
        rows++;
    }
    fclose(f);

    path_in(path, sizeof path, out_dir, "metrics.json");
    f = fopen(path, "w");
    if (f) {
        fprintf(f, "[\n");
        for (int r = 0; r < rows; r++) {
            fprintf(f, "  {\"epoch\": %d, \"train_loss\": %.6f, \"train_accuracy\": %.6f, "
                       "\"test_loss\": %.6f, \"test_accuracy\": %.6f, \"images_per_second\": %.1f, "
                       "\"seconds\": %.2f, \"lr\": %.6g, \"firing_rate\": {",
                    (int)table[r][0], table[r][1], table[r][2], table[r][3], table[r][4], table[r][5],
                    table[r][6], table[r][7]);
            for (int l = 0; l < ev->n_layers && 8 + l < cols; l++)
                fprintf(f, "%s\"%s\": %.6f", l ? ", " : "", ev->layer_names[l], table[r][8 + l]);
            fprintf(f, "}}%s\n", r + 1 < rows ? "," : "");
        }
        fprintf(f, "]\n");
        fclose(f);
    }

    static double x[MAX_EPOCHS], c1[MAX_EPOCHS], c2[MAX_EPOCHS], c3[MAX_EPOCHS], c4[MAX_EPOCHS];
    for (int r = 0; r < rows; r++) {
        x[r] = table[r][0];
        c1[r] = table[r][1], c2[r] = table[r][3];
        c3[r] = 100 * table[r][2], c4[r] = 100 * table[r][4];
    }
    snn_svg_series loss[2] = {{"train", x, c1, rows}, {"test", x, c2, rows}};
    snn_svg_series acc[2] = {{"train", x, c3, rows}, {"test", x, c4, rows}};
    path_in(path, sizeof path, out_dir, "loss.svg");
    snn_svg_line_chart(path, "Loss", "epoch", "loss", loss, 2);
    path_in(path, sizeof path, out_dir, "accuracy.svg");
    snn_svg_line_chart(path, "Accuracy", "epoch", "accuracy (%)", acc, 2);
}

/* ---- main --------------------------------------------------------------------------------- */

static int fail(const char *what)
{
    fprintf(stderr, "snn-train: %s: %s\n", what, snn_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    train_options o = defaults();
    option table[] = {
        {"--dataset", OPT_STRING, &o.dataset, "fashion-mnist, mnist, cifar10, cifar100"},
        {"--data", OPT_STRING, &o.data, "folder or archive of the data set (else $SNN_DATA_DIR, then /usr/share/datasets)"},
        {"--model", OPT_STRING, &o.model, "cnn, resnet18, sew-resnet18"},
        {"--neuron", OPT_STRING, &o.neuron, "if, lif, plif, stbif; relu or qclip: an ANN (T = 1)"},
        {"--levels", OPT_INT, &o.levels, "qclip / stbif: quantization levels L (0: the default, 8)"},
        {"--symmetric", OPT_FLAG, &o.symmetric, "qclip / stbif: levels [-L/2, L/2-1] instead of [0, L-1]"},
        {"--surrogate", OPT_STRING, &o.surrogate, "sigmoid, atan, piecewise_quadratic"},
        {"--tau", OPT_FLOAT, &o.tau, "LIF time constant (PLIF: initial value)"},
        {"--T", OPT_INT, &o.time_steps, "time steps"},
        {"--width", OPT_INT, &o.width, "channels of the first conv (0: the model's default, 32 / 64)"},
        {"--hidden", OPT_INT, &o.hidden, "hidden units of the CNN's first fc"},
        {"--encoding", OPT_STRING, &o.encoding, "direct, poisson"},
        {"--loss", OPT_STRING, &o.loss, "ce (cross-entropy on the time-mean output) or mse (firing rate vs one-hot)"},
        {"--epochs", OPT_INT, &o.epochs, "epochs to train (in all, counting resumed ones)"},
        {"--batch-size", OPT_INT, &o.batch_size, "batch size"},
        {"--optimizer", OPT_STRING, &o.optimizer, "sgd, adam, adamw"},
        {"--lr", OPT_FLOAT, &o.lr, "learning rate"},
        {"--momentum", OPT_FLOAT, &o.momentum, "SGD momentum"},
        {"--weight-decay", OPT_FLOAT, &o.weight_decay, "weight decay"},
        {"--schedule", OPT_STRING, &o.schedule, "cosine, step (x0.1 every 1/3 of the run), constant"},
        {"--warmup", OPT_INT, &o.warmup, "linear warm-up steps"},
        {"--min-lr", OPT_FLOAT, &o.min_lr, "final learning rate of the cosine schedule"},
        {"--augment", OPT_INT, &o.augment, "random crop + flip: 1 on, 0 off (-1: on for CIFAR)"},
        {"--device", OPT_STRING, &o.device, "cpu, cuda"},
        {"--tf32", OPT_FLAG, &o.tf32, "cuda: GEMMs and convs on TF32 tensor cores (fp32 when off)"},
        {"--seed", OPT_INT, &o.seed, "random seed (weights, order, augmentation)"},
        {"--threads", OPT_INT, &o.threads, "CPU threads (0: all cores)"},
        {"--log-every", OPT_INT, &o.log_every, "read the loss every N steps (0: 1 on cpu, 20 on cuda)"},
        {"--limit-train", OPT_INT, &o.limit_train, "use only the first N training images (0: all)"},
        {"--limit-test", OPT_INT, &o.limit_test, "use only the first N test images (0: all)"},
        {"--out", OPT_STRING, &o.out, "output folder (default runs/<dataset>-<model>)"},
        {"--resume", OPT_STRING, &o.resume, "checkpoint to continue from (same --optimizer)"},
        {"--stop-after", OPT_INT, &o.stop_after, "stop after N epochs in this run, to split a long run (0: never)"},
    };
    int n_opts = (int)(sizeof table / sizeof table[0]);
    int parsed = parse_options(argc, argv, "Trains a spiking neural network; writes metrics, curves, "
                               "a spike raster and checkpoints to the output folder.", table, n_opts);
    if (parsed) return parsed == 2 ? 0 : 2;

    /* validate the simple values first, naming the flag */
    snn_device device;
    if (snn_device_parse(o.device, &device) != SNN_OK) return fail("--device");
    if (o.epochs < 1 || o.batch_size < 1 || o.time_steps < 1 || o.hidden < 1 || o.width < 0 ||
        o.warmup < 0 || o.log_every < 0 || o.limit_train < 0 || o.limit_test < 0 || o.stop_after < 0) {
        fprintf(stderr, "snn-train: --epochs, --batch-size, --T and --hidden must be >= 1; --width, "
                "--warmup, --log-every, --limit-* and --stop-after >= 0\n");
        return 2;
    }
    if (!(o.lr > 0.0f) || !(o.weight_decay >= 0.0f) || !(o.tau > 1.0f)) {
        fprintf(stderr, "snn-train: --lr must be > 0, --weight-decay >= 0 and --tau > 1\n");
        return 2;
    }
    if (strcmp(o.loss, "ce") && strcmp(o.loss, "mse")) {
        fprintf(stderr, "snn-train: bad --loss '%s' (expected ce or mse)\n", o.loss);
        return 2;
    }
    if (strcmp(o.optimizer, "sgd") && strcmp(o.optimizer, "adam") && strcmp(o.optimizer, "adamw")) {
        fprintf(stderr, "snn-train: bad --optimizer '%s' (expected sgd, adam or adamw)\n", o.optimizer);
        return 2;
    }
    snn_schedule schedule = {.base_lr = o.lr, .min_lr = o.min_lr, .warmup_steps = o.warmup, .gamma = 0.1f};
    if (strcmp(o.schedule, "cosine") == 0) schedule.kind = SNN_SCHEDULE_COSINE;
    else if (strcmp(o.schedule, "step") == 0) schedule.kind = SNN_SCHEDULE_STEP;
    else if (strcmp(o.schedule, "constant") == 0) schedule.kind = SNN_SCHEDULE_CONSTANT;
    else {
        fprintf(stderr, "snn-train: bad --schedule '%s' (expected cosine, step or constant)\n", o.schedule);
        return 2;
    }
    if (device == SNN_CUDA && !snn_cuda_available()) {
        fprintf(stderr, "snn-train: --device cuda: %s\n", snn_cuda_compiled() ?
                "no CUDA device is visible" : "this build has no CUDA backend (configure with nvcc present)");
        return 2;
    }
    if (o.log_every == 0) o.log_every = device == SNN_CUDA ? 20 : 1;
    if (o.tf32) {
#ifdef SNN_WITH_CUDA
        snn_cuda_set_tf32(true);
#endif
        if (device != SNN_CUDA) fprintf(stderr, "snn-train: --tf32 only changes CUDA runs; ignored on the cpu\n");
    }
    snn_set_num_threads(o.threads);

    /* the model's configuration: from the flags, or from the checkpoint when resuming */
    snn_model_config config;
    snn_metadata resume_meta = {0};
    int64_t start_epoch = 0;
    if (o.resume) {
        if (snn_checkpoint_read_metadata(o.resume, &resume_meta) != SNN_OK) return fail("--resume");
        if (snn_model_config_from_metadata(&resume_meta, &config) != SNN_OK) return fail("--resume");
        const char *e = snn_metadata_get(&resume_meta, "snn.train.epochs_done");
        if (!e) {
            fprintf(stderr, "snn-train: --resume %s: not a training checkpoint (no snn.train.epochs_done)\n", o.resume);
            return 2;
        }
        start_epoch = strtoll(e, NULL, 10);
        o.model = snn_model_kind_name(config.kind);
        const char *trained_with = snn_metadata_get(&resume_meta, "snn.train.optimizer");
        if (trained_with && strcmp(trained_with, o.optimizer) != 0) {
            fprintf(stderr, "snn-train: --resume %s was trained with --optimizer %s, not %s; the "
                    "optimizer state must match\n", o.resume, trained_with, o.optimizer);
            return 2;
        }
    } else {
        snn_model_kind kind;
        if (snn_model_kind_parse(o.model, &kind) != SNN_OK) return fail("--model");
        config = snn_model_config_default(kind);
        snn_neuron_kind nk;
        if (snn_neuron_kind_parse(o.neuron, &nk) != SNN_OK) return fail("--neuron");
        config.neuron = snn_neuron_config_default(nk);
        config.neuron.tau = o.tau;
        if (o.levels) config.neuron.levels = o.levels;
        config.neuron.symmetric = o.symmetric;
        if (snn_surrogate_parse(o.surrogate, &config.neuron.surrogate) != SNN_OK) return fail("--surrogate");
        config.time_steps = snn_neuron_is_ann(nk) ? 1 : o.time_steps; /* an ANN has no time */
        config.hidden = o.hidden;
        if (o.width) config.width_base = o.width;
        config.spiking_readout = strcmp(o.loss, "mse") == 0;
        config.seed = (uint64_t)o.seed;
        if (strcmp(o.encoding, "poisson") == 0) config.encoding = SNN_ENCODING_POISSON;
        else if (strcmp(o.encoding, "direct") != 0) {
            fprintf(stderr, "snn-train: bad --encoding '%s' (expected direct or poisson)\n", o.encoding);
            return 2;
        }
    }

    /* data */
    snn_dataset train_full, test_full;
    if (snn_dataset_load(o.dataset, o.data, SNN_SPLIT_TRAIN, &train_full) != SNN_OK) return fail("--dataset");
    if (snn_dataset_load(o.dataset, o.data, SNN_SPLIT_TEST, &test_full) != SNN_OK) {
        snn_dataset_free(&train_full);
        return fail("--dataset");
    }
    snn_dataset train = train_full, test = test_full; /* views, possibly shortened */
    if (o.limit_train && o.limit_train < train.count) train.count = o.limit_train;
    if (o.limit_test && o.limit_test < test.count) test.count = o.limit_test;
    if (!o.resume) {
        config.in_channels = train.channels, config.height = train.height, config.width = train.width;
        config.classes = train.classes;
    } else if (config.in_channels != train.channels || config.height != train.height ||
               config.width != train.width || config.classes != train.classes) {
        fprintf(stderr, "snn-train: --resume: the checkpoint's model takes %dx%dx%d images and %d "
                "classes; --dataset %s has %dx%dx%d and %d\n", config.in_channels, config.height,
                config.width, config.classes, o.dataset, train.channels, train.height, train.width,
                train.classes);
        return 2;
    }
    bool augment = o.augment < 0 ? train.height == 32 : o.augment != 0;
    snn_loader_config lc = snn_loader_config_default();
    lc.batch_size = o.batch_size;
    lc.seed = (uint64_t)o.seed;
    lc.random_crop = lc.horizontal_flip = augment;
    snn_dataset_default_norm(&train, lc.mean, lc.std);
    if (config.encoding == SNN_ENCODING_POISSON) /* spikes need pixel intensities in [0, 1] */
        for (int c = 0; c < SNN_DATA_MAX_CHANNELS; c++) lc.mean[c] = 0.0f, lc.std[c] = 1.0f;
    snn_loader_config tc = lc;
    tc.shuffle = false;
    tc.random_crop = tc.horizontal_flip = false;
    snn_loader *train_loader = snn_loader_new(&train, &lc);
    snn_loader *test_loader = train_loader ? snn_loader_new(&test, &tc) : NULL;
    if (!test_loader) return fail("loader");

    /* model and optimizer */
    snn_rng rng;
    snn_rng_seed(&rng, (uint64_t)o.seed);
    snn_module *model = snn_model_new(&config, &rng);
    if (!model || snn_module_to(model, device) != SNN_OK) return fail("model");
    snn_optimizer *opt = strcmp(o.optimizer, "sgd") == 0
        ? snn_sgd_new(model, o.lr, o.momentum, o.weight_decay, false)
        : snn_adam_new(model, o.lr, o.weight_decay, strcmp(o.optimizer, "adamw") == 0);
    if (!opt) return fail("optimizer");
    int64_t steps_per_epoch = snn_loader_num_batches(train_loader);
    schedule.total_steps = steps_per_epoch * o.epochs;
    schedule.step_size = schedule.total_steps / 3 > 0 ? schedule.total_steps / 3 : 1;
    if (o.resume) {
        if (snn_checkpoint_load(o.resume, model, opt) != SNN_OK) return fail("--resume");
        const char *r = snn_metadata_get(&resume_meta, "snn.model.rng");
        if (r) snn_model_set_rng_state(model, strtoull(r, NULL, 10));
        if (snn_loader_seek(train_loader, start_epoch, 0) != SNN_OK) return fail("--resume");
        fprintf(stderr, "snn-train: resumed from %s after epoch %lld (step %lld)\n", o.resume,
                (long long)start_epoch, (long long)snn_optimizer_steps(opt));
    }

    char out_dir[512], path[1024];
    if (o.out) snprintf(out_dir, sizeof out_dir, "%s", o.out);
    else snprintf(out_dir, sizeof out_dir, "runs/%s-%s", o.dataset, o.model);
    if (!o.out && make_dir("runs")) return 1;
    if (make_dir(out_dir)) return 1;

    fprintf(stderr, "snn-train: %s on %s (%lld train, %lld test images %dx%dx%d), %s, T=%d, "
            "%s neurons, %lld parameters, %s, batch %d, %lld steps/epoch\n", o.model, o.dataset,
            (long long)train.count, (long long)test.count, config.in_channels, config.height,
            config.width, snn_device_name(device), config.time_steps,
            snn_neuron_kind_name(config.neuron.kind), (long long)snn_module_num_parameters(model),
            o.optimizer, o.batch_size, (long long)steps_per_epoch);

    int exit_code = 0;
    double run_start = now_seconds();
    for (int64_t epoch = start_epoch; epoch < o.epochs; epoch++) {
        epoch_stats st = {0};
        if (train_epoch(model, opt, &schedule, train_loader, &o, device, epoch, &st) != SNN_OK) {
            exit_code = fail("training");
            break;
        }
        if (st.diverged) {
            exit_code = 3;
            break;
        }
        eval_result ev = {0};
        if (evaluate(model, test_loader, device, &ev) != SNN_OK) {
            exit_code = fail("evaluation");
            break;
        }
        fprintf(stderr, "epoch %lld: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | "
                "%.0f img/s, %.1f s (%.1f s in all)\n", (long long)epoch + 1,
                st.seen ? st.loss_sum / (double)st.seen : (double)NAN,
                st.seen ? 100.0 * (double)st.correct / (double)st.seen : (double)NAN,
                ev.total ? ev.loss_sum / (double)ev.total : (double)NAN, 100.0 * eval_accuracy(&ev),
                (double)st.images / st.seconds, st.seconds, now_seconds() - run_start);
        if (!snn_neuron_is_ann(config.neuron.kind)) { /* an ANN's activations are not spikes */
            fprintf(stderr, "  firing rates:");
            for (int l = 0; l < ev.n_layers; l++)
                fprintf(stderr, " %s %.3f", ev.layer_names[l],
                        ev.elements[l] > 0 ? ev.spikes[l] / ev.elements[l] : 0.0);
            fputc('\n', stderr);
        }
        write_metrics(out_dir, epoch, &st, &ev, snn_optimizer_lr(opt));

        snn_metadata meta = {0};
        snn_metadata_set(&meta, "snn.train.epochs_done", "%lld", (long long)epoch + 1);
        snn_metadata_set(&meta, "snn.train.dataset", "%s", o.dataset);
        snn_metadata_set(&meta, "snn.train.optimizer", "%s", o.optimizer);
        snn_metadata_set(&meta, "snn.train.test_accuracy", "%.6f", eval_accuracy(&ev));
        snn_metadata_set(&meta, "snn.model.rng", "%llu", (unsigned long long)snn_model_rng_state(model));
        path_in(path, sizeof path, out_dir, "checkpoint.safetensors");
        if (snn_checkpoint_save(path, model, opt, &meta) != SNN_OK) {
            exit_code = fail("checkpoint");
            break;
        }
        if (o.stop_after && epoch + 1 - start_epoch >= o.stop_after && epoch + 1 < o.epochs) {
            fprintf(stderr, "snn-train: stopping after %d epoch(s) as asked; continue with --resume %s\n",
                    o.stop_after, path);
            break;
        }
    }
    if (exit_code == 0) {
        path_in(path, sizeof path, out_dir, "raster.svg");
        if (write_raster(path, model, &test, &tc, device, 24) != SNN_OK)
            fprintf(stderr, "snn-train: raster: %s\n", snn_last_error());
        fprintf(stderr, "snn-train: done in %.1f s; metrics, curves, raster and checkpoint in %s/\n",
                now_seconds() - run_start, out_dir);
    }

    snn_optimizer_free(opt);
    snn_module_free(model);
    snn_loader_free(test_loader);
    snn_loader_free(train_loader);
    snn_dataset_free(&test_full);
    snn_dataset_free(&train_full);
    snn_shutdown();
    return exit_code;
}
