/*
 * train_options.c - snn-train's defaults, flag table, checks and configuration lines
 * (train_options.h).
 */
#include "app/train_options.h"

#include <math.h>
#include <string.h>

/*
 * The main job, in one place: `snn-train` with no flags, `make train` and the numbers of
 * README.md and docs/results.md ("Main job") are this run. The spiking CNN (width 32, hidden
 * 128) on Fashion-MNIST, LIF neurons (tau 2) with the ATan surrogate (alpha 2, as
 * SpikingJelly's tutorials) at T = 2, direct encoding, cross-entropy on the time-mean output,
 * Adam with a cosine schedule, 4 epochs of batch 128 on the CPU.
 *
 * lr is 3e-3, not Adam's usual 1e-3: in 4 epochs of a cosine schedule 1e-3 under-trains this
 * net; 3e-3 reached 91.10% test accuracy against 90.25% at 1e-3 on the 2-core CPU
 * (docs/results.md, "Main job"). Commands recorded before that change pass --lr 1e-3.
 *
 * The library's own defaults are not all these: snn_neuron_config_default follows
 * SpikingJelly's neurons (Sigmoid surrogate, alpha 4) and snn_model_config_default builds at
 * T = 4. snn-train starts from them and sets the neuron kind, tau, surrogate, T and hidden
 * units from the table below (the width too when --width is given; 0 keeps the model's 32);
 * the rest (V_th 1, hard reset to 0, detach_reset off, decay_input on) are the library's. A
 * run prints them all at start-up (app/run_config.h).
 */
train_options train_defaults(void)
{
    return (train_options){
        .dataset = "fashion-mnist", .model = "cnn", .neuron = "lif", .surrogate = "atan",
        .loss = "ce", .encoding = "direct", .optimizer = "adam", .schedule = "cosine",
        .device = "cpu", .precision = "fp32", .time_steps = 2, .width = 0,
        .hidden = 128, .epochs = 4, .batch_size = 128, .warmup = 0, .seed = 0, .threads = 0,
        .log_every = 0, .limit_train = 0, .limit_test = 0, .augment = -1, .tau = 2.0f,
        .tau_adapt = 20.0f, .beta = 1.8f,
        .lr = 3e-3f, .momentum = 0.9f, .weight_decay = 0.0f, .min_lr = 0.0f,
        .split_by = "number", .downsample = 1, .world_size = 1, .crop_padding = 4, .ema = 0.0f,
        .label_smoothing = 0.0f, .tet_lambda = SNN_TET_LAMBDA, .dropout = 0.0f,
        .random_erasing = 0.0f, .train_mode = "bptt", .sltt_k = 0,
        .time_checkpoint = 0, .clip_grad = 0.0f,
    };
}

int train_option_table(train_options *o, option *table)
{
    const option all[] = {
        {"--dataset", OPT_STRING, &o->dataset,
         "fashion-mnist, mnist, cifar10, cifar100, nmnist, dvs-gesture, cifar10-dvs, shd, ssc"},
        {"--data", OPT_STRING, &o->data,
         "folder or archive of the data set (else $SNN_DATA_DIR, then /usr/share/datasets)"},
        {"--model", OPT_STRING, &o->model,
         "cnn, resnet18, sew-resnet18, resnet34, sew-resnet34, resnet50, sew-resnet50, dvsnet, "
         "rsnn (recurrent, for sequences: --sequence, --layers)"},
        {"--neuron", OPT_STRING, &o->neuron,
         "if, lif, plif, alif (rsnn: if, lif or alif), stbif; relu or qclip: an ANN (T = 1)"},
        {"--levels", OPT_INT, &o->levels,
         "qclip / stbif: quantization levels L (0: the default, 8)"},
        {"--explain", OPT_FLAG, &o->explain, "print the execution plan after the first step: which kernel each layer runs, which layers are fused, on this device, precision and kernel set"},
        {"--symmetric", OPT_FLAG, &o->symmetric,
         "qclip / stbif: levels [-L/2, L/2-1] instead of [0, L-1]"},
        {"--surrogate", OPT_STRING, &o->surrogate, "sigmoid, atan, piecewise_quadratic"},
        {"--tau", OPT_FLOAT, &o->tau, "LIF time constant (PLIF: initial value)"},
        {"--tau-adapt", OPT_FLOAT, &o->tau_adapt,
         "alif: time constant of the threshold's adaptation, in steps (default 20)"},
        {"--beta", OPT_FLOAT, &o->beta,
         "alif: how far a spike raises the threshold (V_th + beta A; default 1.8, 0: LIF)"},
        {"--T", OPT_INT, &o->time_steps, "time steps"},
        {"--width", OPT_INT, &o->width,
         "channels of the first conv (0: the model's default, 32 / 64)"},
        {"--hidden", OPT_INT, &o->hidden,
         "hidden units of the CNN's first fc; rsnn: neurons of each recurrent layer (256 unless "
         "given)"},
        {"--layers", OPT_INT, &o->layers, "rsnn: recurrent layers (0: 1)"},
        {"--sequence", OPT_STRING, &o->sequence,
         "rsnn: read each image as a sequence of its rows (T = H steps of C*W inputs; the "
         "default) or pixels (T = H*W steps of C inputs, sequential MNIST); --T follows"},
        {"--encoding", OPT_STRING, &o->encoding, "direct, poisson (event data sets: their frames)"},
        {"--split-by", OPT_STRING, &o->split_by,
         "event data sets: cut each sample into T frames by event number or time"},
        {"--downsample", OPT_INT, &o->downsample,
         "event data sets: sum k x k sensor pixels into one frame pixel (shd / ssc: k channels)"},
        {"--max-time", OPT_FLOAT, &o->max_time,
         "shd / ssc: seconds the T frames cover; later spikes are dropped (0: 1 s)"},
        {"--binarize", OPT_FLAG, &o->binarize,
         "shd / ssc: a frame channel is 1 when it holds a spike, not the count"},
        {"--loss", OPT_STRING, &o->loss,
         "ce (cross-entropy on the time-mean output), tet (cross-entropy at every step, Deng et "
         "al. 2022) or mse (firing rate vs one-hot)"},
        {"--label-smoothing", OPT_FLOAT, &o->label_smoothing,
         "ce / tet: EPS of the smoothed targets, as PyTorch's label_smoothing (0: off)"},
        {"--tet-lambda", OPT_FLOAT, &o->tet_lambda,
         "--loss tet: weight of its MSE regulariser pulling each step's outputs to 1"},
        {"--dropout", OPT_FLOAT, &o->dropout,
         "dropout P, one mask per sample for all T steps: cnn / dvsnet before fc1 and fc2; the "
         "resnets before fc; rsnn on each recurrent layer's spikes (0: off)"},
        {"--train-mode", OPT_STRING, &o->train_mode,
         "bptt (backpropagation through all T steps; memory grows with T), sltt (online: each "
         "step's loss backpropagated at once, memory independent of T) or ottt (sltt with each "
         "layer's weight gradient against a trace of its inputs; docs/temporal.md)"},
        {"--time-checkpoint", OPT_INT, &o->time_checkpoint,
         "--train-mode bptt: keep the neurons' state every K steps and recompute each segment in "
         "backward (all but the last): memory of K steps plus T/K states, 1 - K/T forward more "
         "(0: off)"},
        {"--sltt-k", OPT_INT, &o->sltt_k,
         "--train-mode sltt or ottt: run backward on K of the T steps, drawn at random per "
         "batch (0: all)"},
        {"--epochs", OPT_INT, &o->epochs, "epochs to train (in all, counting resumed ones)"},
        {"--batch-size", OPT_INT, &o->batch_size, "batch size"},
        {"--optimizer", OPT_STRING, &o->optimizer, "sgd, adam, adamw"},
        {"--lr", OPT_FLOAT, &o->lr, "learning rate"},
        {"--momentum", OPT_FLOAT, &o->momentum, "SGD momentum"},
        {"--weight-decay", OPT_FLOAT, &o->weight_decay, "weight decay"},
        {"--clip-grad", OPT_FLOAT, &o->clip_grad,
         "NORM: before each optimizer step scale the gradients down so that their global L2 "
         "norm is at most NORM, as torch.nn.utils.clip_grad_norm_; a step whose gradient is not "
         "finite is left out and counted (one host sync a step; the progress line shows the "
         "mean norm before clipping; 0: off)"},
        {"--schedule", OPT_STRING, &o->schedule,
         "cosine, step (x0.1 every 1/3 of the run), constant"},
        {"--warmup", OPT_INT, &o->warmup, "linear warm-up steps"},
        {"--min-lr", OPT_FLOAT, &o->min_lr, "final learning rate of the cosine schedule"},
        {"--ema", OPT_FLOAT, &o->ema,
         "DECAY: evaluate (and save, and keep the best of) a moving average of the weights, e.g. "
         "0.999 (0: off)"},
        {"--augment", OPT_INT, &o->augment, "random crop + flip: 1 on, 0 off (-1: on for CIFAR)"},
        {"--crop-padding", OPT_INT, &o->crop_padding,
         "--augment's random crop: pad each side by N pixels, then crop (0..height/2; e.g. 2 for "
         "28x28)"},
        {"--random-erasing", OPT_FLOAT, &o->random_erasing,
         "P: erase a random rectangle (2-33% of the image) of a training image with probability "
         "P, to the mean (Zhong et al. 2020; 0: off)"},
        {"--device", OPT_STRING, &o->device, "cpu, cuda"},
        {"--precision", OPT_STRING, &o->precision,
         "cuda: fp32 (bit-reproducible), tf32 or bf16 tensor-core convs and GEMMs"},
        {"--tf32", OPT_FLAG, &o->tf32, "the same as --precision tf32"},
        {"--keep-bf16", OPT_FLAG, &o->keep_bf16,
         "--precision bf16: keep the conv outputs backward reads as bf16, rounded: about 16% less "
         "memory a step for about 7% more time (docs/benchmarks.md)"},
        {"--kernels", OPT_STRING, &o->kernels,
         "cpu: fast (blocked, vectorised, threaded) or ref (the plain-loop reference kernels, "
         "slower); none: $SNN_KERNELS, else fast"},
        {"--seed", OPT_INT, &o->seed, "random seed (weights, order, augmentation)"},
        {"--threads", OPT_INT, &o->threads, "CPU threads (0: all cores)"},
        {"--log-every", OPT_INT, &o->log_every,
         "read the loss every N steps (0: 1 on cpu, 20 on cuda)"},
        {"--limit-train", OPT_INT, &o->limit_train,
         "use only the first N training images (0: all)"},
        {"--limit-test", OPT_INT, &o->limit_test, "use only the first N test images (0: all)"},
        {"--out", OPT_STRING, &o->out,
         "output folder, made with its parents (default runs/<dataset>-<model>; with --resume "
         "the checkpoint's folder)"},
        {"--overwrite", OPT_FLAG, &o->overwrite,
         "start a new run in an --out that holds another run's checkpoint, replacing its files"},
        {"--resume", OPT_STRING, &o->resume,
         "checkpoint to continue from, with the training flags it records (docs/long-runs.md); "
         "a flag given that differs is refused"},
        {"--allow-changes", OPT_FLAG, &o->allow_changes,
         "--resume: let the learning rate, schedule, batch, augmentation, ... given here replace "
         "the checkpoint's (never the model, data set, optimizer, loss or --ema)"},
        {"--stop-after", OPT_INT, &o->stop_after,
         "stop after N epochs in this run, to split a long run (0: never)"},
        {"--checkpoint-every", OPT_INT, &o->checkpoint_every,
         "also write the checkpoint every N steps, mid-epoch (0: at epoch ends)"},
        {"--step-log", OPT_STRING, &o->step_log,
         "append 'step,loss,lr' to this file each time the loss is read"},
        {"--gpus", OPT_INT, &o->dist.gpus,
         "data-parallel on N GPUs of this host, one process each (with --device cpu: N CPU "
         "processes); --batch-size is per GPU"},
        {"--init", OPT_STRING, &o->dist.init,
         "rendezvous of one rank of a multi-host run (RANK, WORLD_SIZE set): tcp://HOST:PORT or "
         "file:PATH"},
        {"--sync-bn", OPT_FLAG, &o->dist.sync_bn,
         "several ranks: batch-norm statistics over the global batch (default: each rank's own)"},
        {"--activity-penalty", OPT_FLOAT, &o->activity_penalty,
         "LAMBDA: add LAMBDA x the per-plane group-lasso spike penalty (docs/sparse.md) to train "
         "for silent channels (0: off)"},
    };
    _Static_assert(sizeof all / sizeof all[0] <= TRAIN_MAX_OPTIONS, "raise TRAIN_MAX_OPTIONS");
    memcpy(table, all, sizeof all);
    return (int)(sizeof all / sizeof all[0]);
}

/* Each check prints its message and gives 2 when the value is bad, 0 when it is fine. */
static int need_int(const char *flag, int value, int min)
{
    if (value >= min) return 0;
    fprintf(stderr, "snn-train: %s %d: expected an integer >= %d\n", flag, value, min);
    return 2;
}

static int need_float(const char *flag, float value, bool ok, const char *expected)
{
    if (ok) return 0;
    char text[32];
    fprintf(stderr, "snn-train: %s %s: expected %s\n", flag,
            option_float_text(value, text, sizeof text), expected);
    return 2;
}

/* A name that must be one of choices[0..n): 0, or 2 with the choices and the nearest one. */
static int need_choice(const char *flag, const char *value, const char *const *choices, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(value, choices[i]) == 0) return 0;
    return option_bad_choice("snn-train", flag, value, choices, n);
}

/* The names of the library's models, neurons and surrogates, as their flags take them. */
static int need_library_names(const train_options *o)
{
    const char *names[32];
    int bad = 0, n = 0;
    for (int k = 0; k < SNN_MODEL_KIND_COUNT && n < 32; k++)
        names[n++] = snn_model_kind_name((snn_model_kind)k);
    bad |= need_choice("--model", o->model, names, n);
    n = 0;
    for (int k = 0; k < SNN_NEURON_COUNT && n < 32; k++)
        names[n++] = snn_neuron_kind_name((snn_neuron_kind)k);
    bad |= need_choice("--neuron", o->neuron, names, n);
    n = 0;
    for (int k = 0; k < SNN_SURROGATE_COUNT && n < 32; k++)
        names[n++] = snn_surrogate_name((snn_surrogate_kind)k);
    return bad | need_choice("--surrogate", o->surrogate, names, n);
}

/* The flags of the recurrent SNN: --sequence and --layers are its alone, and it has no spiking
 * readout (--loss mse) or Poisson encoding (its input is the sequence). 0, or 2 with the
 * messages printed. */
static int rsnn_flags(const train_options *o)
{
    static const char *const sequences[] = {"rows", "pixels"};
    const bool rsnn = strcmp(o->model, "rsnn") == 0;
    int bad = o->sequence ? need_choice("--sequence", o->sequence, sequences, 2) : 0;
    const char *mine = o->sequence ? "--sequence" : o->layers ? "--layers" : NULL;
    if (!rsnn && mine && !o->resume) { /* --resume: the model is the checkpoint's */
        fprintf(stderr, "snn-train: %s: a flag of the recurrent network; expected --model rsnn "
                "with it (got --model %s)\n", mine, o->model);
        bad = 2;
    }
    if (!rsnn) return bad;
    const char *why = strcmp(o->loss, "mse") == 0          ? "--loss ce or tet (its readout is a "
                                                             "leaky integrator, not spikes)"
                      : strcmp(o->encoding, "poisson") == 0 ? "no --encoding poisson (its input is "
                                                              "the image read as --sequence)"
                                                            : NULL;
    if (why) {
        fprintf(stderr, "snn-train: --model rsnn: expected %s\n", why);
        bad = 2;
    }
    return bad;
}

/* rsnn: 256 neurons a layer, as the RLIF / ALIF sequential-MNIST baselines; no random crop or
 * flip unless asked (a sequence is read in a fixed order). Its learning rate is the main job's
 * 3e-3: on 6144 Fashion-MNIST images read as rows (one epoch, 1000 test images) it reached 58.0%
 * against 48.5% at 1e-3. */
void train_model_defaults(train_options *o, option *table, int n, const bool *given)
{
    if (strcmp(o->model, "rsnn") != 0) return;
    if (!given[option_find(table, n, "--hidden") - table]) o->hidden = 256;
    if (!given[option_find(table, n, "--augment") - table]) o->augment = 0;
}

int train_sequence_steps(const train_options *o, bool steps_given, bool event_data,
                         snn_model_config *c)
{
    if (c->kind != SNN_MODEL_RSNN) return 0;
    if (event_data) {
        if (!o->sequence) return 0;
        fprintf(stderr, "snn-train: --sequence %s: reads images as sequences; --dataset %s has a "
                "time axis already (its frames are the steps)\n", o->sequence, o->dataset);
        return 2;
    }
    const bool pixels = c->encoding == SNN_ENCODING_PIXELS;
    const int steps = pixels ? c->height * c->width : c->height;
    if (steps_given && o->time_steps != steps) {
        fprintf(stderr, "snn-train: --T %d: --sequence %s reads the %dx%d images of --dataset %s "
                "in T = %s = %d steps\nhint: leave --T out\n", o->time_steps,
                pixels ? "pixels" : "rows", c->height, c->width, o->dataset,
                pixels ? "H*W" : "H", steps);
        return 2;
    }
    c->time_steps = steps;
    return 0;
}

int train_options_check(const train_options *o, snn_schedule *schedule)
{
    int bad = 0;
    bad |= need_int("--epochs", o->epochs, 1);
    bad |= need_int("--batch-size", o->batch_size, 1);
    bad |= need_int("--T", o->time_steps, 1);
    bad |= need_int("--hidden", o->hidden, 1);
    bad |= need_int("--layers", o->layers, 0);
    bad |= need_int("--width", o->width, 0);
    bad |= need_int("--levels", o->levels, 0);
    bad |= need_int("--warmup", o->warmup, 0);
    bad |= need_int("--log-every", o->log_every, 0);
    bad |= need_int("--limit-train", o->limit_train, 0);
    bad |= need_int("--limit-test", o->limit_test, 0);
    bad |= need_int("--stop-after", o->stop_after, 0);
    bad |= need_int("--checkpoint-every", o->checkpoint_every, 0);
    bad |= need_int("--gpus", o->dist.gpus, 0);
    bad |= need_int("--threads", o->threads, 0);
    bad |= need_int("--downsample", o->downsample, 1);
    /* the upper bound of --crop-padding depends on the images: checked with the data */
    bad |= need_int("--crop-padding", o->crop_padding, 0);
    bad |= need_int("--sltt-k", o->sltt_k, 0);
    bad |= need_int("--time-checkpoint", o->time_checkpoint, 0);
    if (o->augment < -1 || o->augment > 1) {
        fprintf(stderr, "snn-train: --augment %d: expected 1 (on), 0 (off) or -1 (on for "
                "CIFAR)\n", o->augment);
        bad = 2;
    }
    /* written so that NaN fails each of them */
    bad |= need_float("--lr", o->lr, o->lr > 0.0f, "a number > 0");
    bad |= need_float("--min-lr", o->min_lr, o->min_lr >= 0.0f, "a number >= 0");
    bad |= need_float("--momentum", o->momentum, o->momentum >= 0.0f, "a number >= 0");
    bad |= need_float("--weight-decay", o->weight_decay, o->weight_decay >= 0.0f,
                      "a number >= 0");
    bad |= need_float("--clip-grad", o->clip_grad, o->clip_grad >= 0.0f && isfinite(o->clip_grad),
                      "0 (off) or the largest global L2 norm of the gradients, e.g. 1");
    bad |= need_float("--tau", o->tau, o->tau > 1.0f, "a number > 1 (a time constant in steps)");
    bad |= need_float("--tau-adapt", o->tau_adapt, o->tau_adapt > 0.0f && isfinite(o->tau_adapt),
                      "a number > 0 (a time constant in steps)");
    bad |= need_float("--beta", o->beta, o->beta >= 0.0f && isfinite(o->beta), "a number >= 0");
    bad |= need_float("--max-time", o->max_time, o->max_time >= 0.0f && o->max_time < 1e6f,
                      "0 (1 s) or the seconds the frames of shd / ssc cover, e.g. 1.4");
    bad |= need_float("--activity-penalty", o->activity_penalty, o->activity_penalty >= 0.0f,
                      "a number >= 0");
    bad |= need_float("--ema", o->ema, o->ema == 0.0f || (o->ema > 0.0f && o->ema < 1.0f),
                      "0 (off) or a decay in (0, 1), e.g. 0.999: the average then spans about "
                      "the last 1 / (1 - DECAY) steps");
    bad |= need_float("--random-erasing", o->random_erasing,
                      o->random_erasing >= 0.0f && o->random_erasing <= 1.0f,
                      "a probability in [0, 1], e.g. 0.5");
    bad |= need_float("--label-smoothing", o->label_smoothing,
                      o->label_smoothing >= 0.0f && o->label_smoothing < 1.0f,
                      "0 <= EPS < 1, e.g. 0.1");
    bad |= need_float("--tet-lambda", o->tet_lambda, o->tet_lambda >= 0.0f && o->tet_lambda <= 1.0f,
                      "0..1: the loss is (1 - LAMBDA) x the per-step cross-entropy + LAMBDA x "
                      "the MSE term");
    bad |= need_float("--dropout", o->dropout, o->dropout >= 0.0f && o->dropout < 1.0f,
                      "0 <= P < 1");
    static const char *const losses[] = {"ce", "tet", "mse"};
    static const char *const optimizers[] = {"sgd", "adam", "adamw"};
    static const char *const schedules[] = {"cosine", "step", "constant"};
    static const char *const encodings[] = {"direct", "poisson"};
    static const char *const devices[] = {"cpu", "cuda"};
    static const char *const precisions[] = {"fp32", "tf32", "bf16"};
    static const char *const splits[] = {"number", "time"};
    static const char *const train_modes[] = {"bptt", "sltt", "ottt"};
    bad |= need_choice("--loss", o->loss, losses, 3);
    bad |= need_choice("--optimizer", o->optimizer, optimizers, 3);
    bad |= need_choice("--schedule", o->schedule, schedules, 3);
    bad |= need_choice("--encoding", o->encoding, encodings, 2);
    bad |= need_choice("--device", o->device, devices, 2);
    bad |= need_choice("--precision", o->precision, precisions, 3);
    bad |= need_choice("--split-by", o->split_by, splits, 2);
    bad |= need_choice("--train-mode", o->train_mode, train_modes, 3);
    bad |= need_library_names(o);
    bad |= rsnn_flags(o);
    if (o->label_smoothing > 0.0f && strcmp(o->loss, "mse") == 0) {
        char text[32];
        fprintf(stderr, "snn-train: --label-smoothing %s: expected 0 with --loss mse (it smooths "
                "the targets of --loss ce or tet)\n",
                option_float_text(o->label_smoothing, text, sizeof text));
        bad = 2;
    }
    if (train_options_online(o)) {
        /* what the online step does not take (app/train_online.c) */
        const char *why = strcmp(o->loss, "ce") != 0 ? "--loss ce (each step's cross-entropy)"
                          : o->activity_penalty > 0.0f ? "--activity-penalty 0"
                          : o->dist.gpus > 1 ? "one device (--gpus 1)"
                          : o->sltt_k > o->time_steps ? "--sltt-k between 0 and --T"
                                                        : NULL;
        if (why) {
            fprintf(stderr, "snn-train: --train-mode %s: expected %s\n", o->train_mode, why);
            bad = 2;
        }
    } else if (o->sltt_k > 0) {
        fprintf(stderr, "snn-train: --sltt-k %d: expected --train-mode sltt or ottt with it\n",
                o->sltt_k);
        bad = 2;
    }
    if (o->time_checkpoint > 0) {
        /* what the segmented step does not take (app/train_segments.c) */
        const char *why = strcmp(o->train_mode, "bptt") != 0 ? "--train-mode bptt"
                          : strcmp(o->loss, "ce") != 0 ? "--loss ce"
                          : o->activity_penalty > 0.0f ? "--activity-penalty 0"
                          : o->dist.gpus > 1 ? "one device (--gpus 1)"
                          /* the rsnn's T comes from its sequence, not --T, and its sequences
                           * are not taken (train_segments_check) */
                          : strcmp(o->model, "rsnn") == 0
                              ? "images with direct or Poisson encoding (the rsnn's sequences "
                                "train without it)"
                          : o->time_checkpoint > o->time_steps ? "K between 1 and --T"
                                                               : NULL;
        if (why) {
            fprintf(stderr, "snn-train: --time-checkpoint %d: expected %s\n", o->time_checkpoint,
                    why);
            bad = 2;
        }
    }
    if (bad) return 2;
    *schedule = (snn_schedule){.base_lr = o->lr, .min_lr = o->min_lr, .warmup_steps = o->warmup,
                               .gamma = 0.1f};
    schedule->kind = strcmp(o->schedule, "cosine") == 0 ? SNN_SCHEDULE_COSINE
                     : strcmp(o->schedule, "step") == 0 ? SNN_SCHEDULE_STEP
                                                        : SNN_SCHEDULE_CONSTANT;
    return 0;
}

snn_model_config train_model_config(const train_options *o)
{
    snn_model_kind kind = SNN_MODEL_SPIKING_CNN;
    snn_neuron_kind neuron = SNN_NEURON_LIF;
    snn_model_kind_parse(o->model, &kind); /* names checked by train_options_check */
    snn_neuron_kind_parse(o->neuron, &neuron);
    snn_model_config config = snn_model_config_default(kind);
    config.neuron = snn_neuron_config_default(neuron);
    config.neuron.tau = o->tau;
    config.neuron.tau_adapt = o->tau_adapt;
    config.neuron.beta = o->beta;
    if (o->levels) config.neuron.levels = o->levels;
    config.neuron.symmetric = o->symmetric;
    snn_surrogate_parse(o->surrogate, &config.neuron.surrogate);
    config.time_steps = snn_neuron_is_ann(neuron) ? 1 : o->time_steps; /* an ANN has no time */
    config.hidden = o->hidden;
    if (o->width) config.width_base = o->width;
    config.spiking_readout = strcmp(o->loss, "mse") == 0;
    config.dropout = o->dropout;
    if (o->layers) config.layers = o->layers;
    if (kind == SNN_MODEL_RSNN) /* images read as rows unless --sequence pixels; T from the data */
        config.encoding = o->sequence && strcmp(o->sequence, "pixels") == 0 ? SNN_ENCODING_PIXELS
                                                                             : SNN_ENCODING_ROWS;
    config.seed = (uint64_t)o->seed;
    if (strcmp(o->encoding, "poisson") == 0) config.encoding = SNN_ENCODING_POISSON;
    return config;
}

void train_options_print(FILE *out, const char *indent, const train_options *o,
                         const snn_schedule *schedule, int global_batch)
{
    char extra[160] = "";
    if (strcmp(o->loss, "tet") == 0)
        snprintf(extra, sizeof extra, ", lambda %g", (double)o->tet_lambda);
    if (o->label_smoothing > 0.0f)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", label smoothing %g",
                 (double)o->label_smoothing);
    if (o->activity_penalty > 0.0f)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra),
                 ", activity penalty x %g", (double)o->activity_penalty);
    fprintf(out, "%s%-12s%s%s\n", indent, "loss", o->loss, extra);
    const char *traced = strcmp(o->train_mode, "ottt") == 0
                             ? ", weight gradients against the inputs' traces" : "";
    if (train_options_online(o) && o->sltt_k > 0 && o->sltt_k < o->time_steps)
        fprintf(out, "%s%-12s%s: online, each step's cross-entropy%s; backward on %d of the %d "
                "steps, drawn per batch\n", indent, "train mode", o->train_mode, traced,
                o->sltt_k, o->time_steps);
    else if (train_options_online(o))
        fprintf(out, "%s%-12s%s: online, each step's cross-entropy backpropagated at once%s "
                "(memory independent of T)\n", indent, "train mode", o->train_mode, traced);
    else if (o->time_checkpoint > 0)
        fprintf(out, "%s%-12sbptt in segments of %d steps, each recomputed in backward from "
                "its saved state\n", indent, "train mode", o->time_checkpoint);

    char rule[160];
    switch (schedule->kind) {
    case SNN_SCHEDULE_COSINE:
        snprintf(rule, sizeof rule, "cosine to %g over %lld steps, warm-up %lld steps",
                 (double)schedule->min_lr, (long long)schedule->total_steps,
                 (long long)schedule->warmup_steps);
        break;
    case SNN_SCHEDULE_STEP:
        snprintf(rule, sizeof rule, "step: x %g every %lld steps", (double)schedule->gamma,
                 (long long)schedule->step_size);
        break;
    case SNN_SCHEDULE_CONSTANT: snprintf(rule, sizeof rule, "constant"); break;
    }
    char momentum[48] = "";
    if (strcmp(o->optimizer, "sgd") == 0)
        snprintf(momentum, sizeof momentum, ", momentum %g", (double)o->momentum);
    char ema[48] = "";
    if (o->ema > 0.0f) snprintf(ema, sizeof ema, ", weights averaged (--ema %g)", (double)o->ema);
    char clip[64] = "";
    if (o->clip_grad > 0.0f)
        snprintf(clip, sizeof clip, ", gradients clipped to norm %g", (double)o->clip_grad);
    fprintf(out, "%s%-12s%s, lr %g (%s)%s, weight decay %g%s%s\n", indent, "optimizer",
            o->optimizer, (double)schedule->base_lr, rule, momentum, (double)o->weight_decay, clip,
            ema);
    fprintf(out, "%s%-12s%d images a step, %d epoch%s\n", indent, "batch", global_batch,
            o->epochs, o->epochs == 1 ? "" : "s");
}

bool train_options_online(const train_options *o)
{
    return strcmp(o->train_mode, "sltt") == 0 || strcmp(o->train_mode, "ottt") == 0;
}
