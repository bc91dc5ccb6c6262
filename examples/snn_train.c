/*
 * snn_train.c - snn-train: trains a spiking network from C (the main job of snn.c).
 *
 *   build/bin/snn-train                       # spiking CNN on Fashion-MNIST, CPU defaults
 *
 * The defaults (LIF + ATan, T = 2, width 32, Adam 3e-3 with a cosine schedule, 4 epochs of
 * batch 128; app/train_options.c) are the main job (`make train`): on the 2-core CI machine
 * they reach ~91% test accuracy in about 3 minutes (docs/results.md, "Main job"). The run
 * prints the configuration it trains at start-up; --kernels ref trains on the reference
 * kernels (kernels/ref/), slower.
 *   build/bin/snn-train --model resnet18 --dataset cifar10 --data runs/fmnist-cifar --device cuda
 *   build/bin/snn-train --resume runs/fashion-mnist-cnn/checkpoint.safetensors --epochs 6
 *   build/bin/snn-train --gpus 2 --batch-size 64      # data-parallel, docs/distributed.md
 *
 * Each epoch: train with a progress line (loss, accuracy, img/s, ETA), evaluate on the test
 * split (with --ema DECAY: a moving average of the weights, nn/ema.c, updated after every
 * step), append metrics (CSV and JSON, with the firing rate of every neuron layer), redraw the
 * curves (SVG), write best.safetensors when the evaluation beats every earlier one, and write a
 * checkpoint atomically. A NaN or infinite loss stops training with a message and leaves the
 * last good checkpoint as it was. --resume continues bit-exactly.
 *
 * Long runs (README "Long runs"): SIGINT / SIGTERM finish the current step, write a checkpoint
 * that resumes exactly there (mid-epoch) and exit 75 (app/run_signals.h); --checkpoint-every N
 * writes one every N steps; sizes that cannot fit are refused before anything is allocated
 * (app/run_memory.h); the output folder is locked against a second run (app/run_lock.h).
 *
 * The pieces around the loop are the programs' library, app/: the flags, their defaults and
 * checks (app/train_options.h), what the checkpoint records and how --resume reads it back
 * (app/train_checkpoint.h), one epoch's loop over the batches (app/train_epoch.h), the
 * metrics files and curves (app/run_metrics.h), the data-parallel side (app/train_dist.h), the
 * printed configuration (app/run_config.h).
 */
#define _DEFAULT_SOURCE /* stat */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/evaluate.h"
#include "app/options.h"
#include "app/program.h"
#include "app/raster.h"
#include "app/run_config.h"
#include "app/run_lock.h"
#include "app/run_memory.h"
#include "app/run_metrics.h"
#include "app/run_signals.h"
#include "app/train_checkpoint.h"
#include "app/train_dist.h"
#include "app/train_epoch.h"
#include "app/train_online.h"
#include "app/train_segments.h"
#include "app/train_options.h"
#include "app/train_resume.h"
#include "snn.h"

/* ---- main --------------------------------------------------------------------------------- */

static int fail(const char *what)
{
    fprintf(stderr, "snn-train: %s: %s\n", what, snn_last_error());
    return 1;
}

/* fail() for a flag: 2 when its value was the cause (a bad name: SNN_ERR_ARGUMENT), else 1 */
static int fail_flag(const char *flag)
{
    bool bad_value = snn_last_status() == SNN_ERR_ARGUMENT;
    fail(flag);
    return bad_value ? 2 : 1;
}

/* One split of --dataset as the run trains on it: event sets in T frames (`frames`); SHD and
 * SSC (spike trains, data/hdf5/shd_hdf5.c) in T frames over --max-time of the channels pooled
 * by --downsample, saying how many spikes fell after --max-time. */
static snn_status load_split(const train_options *o, const snn_event_frames *frames,
                             snn_split split, bool rank0, snn_dataset *out)
{
    if (!snn_dataset_is_spike_audio(o->dataset))
        return snn_dataset_load_frames(o->dataset, o->data, split, frames, out);
    snn_spike_frames spikes = snn_spike_frames_default();
    spikes.frames = frames->frames;
    spikes.pool = frames->downsample;
    spikes.binarize = o->binarize;
    if (o->max_time > 0.0f) spikes.max_time = o->max_time;
    int64_t dropped = 0;
    snn_status st = snn_spike_dataset_load(o->dataset, o->data, split, &spikes, out, &dropped);
    if (st == SNN_OK && dropped > 0 && rank0)
        printf("%s %s: %lld spikes at or after --max-time %g s left out\n", o->dataset,
               split == SNN_SPLIT_TRAIN ? "train" : "test", (long long)dropped,
               spikes.max_time);
    return st;
}

/* The convolutional models, whose maps pool a 1-row spike train down to nothing. */
static bool model_takes_images(snn_model_kind kind)
{
    switch (kind) {
    case SNN_MODEL_SPIKING_CNN: case SNN_MODEL_DVS_NET: case SNN_MODEL_RESNET18:
    case SNN_MODEL_SEW_RESNET18: case SNN_MODEL_RESNET34: case SNN_MODEL_SEW_RESNET34:
    case SNN_MODEL_RESNET50: case SNN_MODEL_SEW_RESNET50: return true;
    default: return false;
    }
}

/* Frees the data sets on a way out before the model exists; returns `code`. */
static int drop_data(snn_dataset *train, snn_dataset *test, int code)
{
    snn_dataset_free(test);
    snn_dataset_free(train);
    snn_shutdown();
    return code;
}

int main(int argc, char **argv)
{
    train_options o = train_defaults();
    option table[TRAIN_MAX_OPTIONS];
    bool given[TRAIN_MAX_OPTIONS];
    int n_opts = train_option_table(&o, table);
    int parsed = parse_options_given(argc, argv, TRAIN_SUMMARY, table, n_opts, given);
    if (parsed) return parsed == 2 ? 0 : 2;
    if (o.tf32) { /* --tf32 is --precision tf32 */
        o.precision = "tf32";
        given[option_find(table, n_opts, "--precision") - table] = true;
    }
    run_signals_install();
    evaluate_stop_flag = &run_stop_signal;
    train_dist_default_device(&o.dist, argc, argv, &o.device);

    /* SHD / SSC are spike trains of 700 channels, (T, N, 700): the recurrent network's input
     * (the convolutional models cannot take them: checked with the data, below) */
    if (snn_dataset_is_spike_audio(o.dataset) && !o.resume &&
        !given[option_find(table, n_opts, "--model") - table])
        o.model = "rsnn";

    /* the model's own defaults (rsnn: width, learning rate, no augmentation) for flags not given */
    train_model_defaults(&o, table, n_opts, given);

    /* validate the simple values first, naming the flag */
    snn_schedule schedule;
    if (train_options_check(&o, &schedule)) return 2;

    /* --resume: the model's configuration and the training flags come from the checkpoint;
     * those given here must agree with them (app/train_resume.h) */
    snn_model_config config;
    snn_metadata resume_meta = {0};
    train_start start = {.accuracy = -1.0, .best_accuracy = -1.0};
    int rank_here = 0, ranks = train_dist_planned_ranks(&o.dist, &rank_here);
    if (o.resume) {
        int code = train_resume_read(&o, &resume_meta, &config, &start);
        if (!code)
            code = train_resume_flags(&o, table, n_opts, given, ranks, &resume_meta, &config,
                                      rank_here != 0);
        if (!code && train_options_check(&o, &schedule)) code = 2; /* the restored values */
        if (code) return code;
    }
    snn_device device;
    if (snn_device_parse(o.device, &device) != SNN_OK) return fail_flag("--device");
    if (run_kernels_select("snn-train", o.kernels, o.device)) return 2; /* ref: cpu only */
    if (device == SNN_CUDA && !snn_cuda_available()) {
        fprintf(stderr, "snn-train: --device cuda: %s\n", snn_cuda_compiled() ?
                "no CUDA device is visible" : "this build has no CUDA backend (configure with nvcc present)");
        return 2;
    }
    if (o.log_every == 0) o.log_every = device == SNN_CUDA ? 20 : 1;
    snn_precision precision;
    if (snn_precision_parse(o.precision, &precision) != SNN_OK) return fail_flag("--precision");
    if (precision != SNN_PRECISION_FP32 && device != SNN_CUDA) {
        fprintf(stderr, "snn-train: --precision %s runs on the GPU's tensor cores; the cpu kernels "
                "are fp32 (hint: add --device cuda, or drop --precision)\n", snn_precision_name(precision));
        return 2;
    }
    if (o.keep_bf16 && precision != SNN_PRECISION_BF16) {
        fprintf(stderr, "snn-train: --keep-bf16 keeps conv outputs in the precision of --precision "
                "bf16's products; expected --precision bf16 with it (got %s)\n",
                snn_precision_name(precision));
        return 2;
    }
    if (snn_set_precision(precision) != SNN_OK) return fail("--precision");
    snn_set_num_threads(o.threads);
    snn_dist *dist = NULL; /* one rank of a data-parallel run, or NULL */
    int launched = train_dist_start(&o.dist, argc, argv, device, &dist);
    if (launched >= 0) return launched; /* the --gpus launcher is done, or a rank did not start */
    bool rank0 = train_dist_rank0(dist);
    o.world_size = snn_dist_world_size(dist);

    if (!o.resume) config = train_model_config(&o); /* the rest comes with the data */

    /* data (event sets: T frames per sample, T = the model's time steps) */
    snn_event_frames frames = {config.time_steps, SNN_SPLIT_BY_NUMBER, o.downsample};
    if (snn_event_split_parse(o.split_by, &frames.split_by) != SNN_OK) return fail_flag("--split-by");
    snn_dataset train_full, test_full;
    if (load_split(&o, &frames, SNN_SPLIT_TRAIN, rank0, &train_full) != SNN_OK)
        return fail_flag("--dataset");
    if (load_split(&o, &frames, SNN_SPLIT_TEST, rank0, &test_full) != SNN_OK) {
        snn_dataset_free(&train_full);
        return fail_flag("--dataset");
    }
    snn_dataset train = train_full, test = test_full; /* views, possibly shortened */
    if (o.limit_train && o.limit_train < train.count) train.count = o.limit_train;
    if (o.limit_test && o.limit_test < test.count) test.count = o.limit_test;
    if (!o.resume) {
        config.in_channels = train.channels, config.height = train.height, config.width = train.width;
        config.classes = train.classes;
        if (train.time_steps > 0) config.encoding = SNN_ENCODING_EVENTS;
        /* rsnn reading images as rows or pixels: T is H or H*W */
        if (train_sequence_steps(&o, given[option_find(table, n_opts, "--T") - table],
                                 train.time_steps > 0, &config))
            return drop_data(&train_full, &test_full, 2);
    } else if (config.in_channels != train.channels || config.height != train.height ||
               config.width != train.width || config.classes != train.classes) {
        fprintf(stderr, "snn-train: --resume: the checkpoint's model takes %dx%dx%d images and %d "
                "classes; --dataset %s has %dx%dx%d and %d\n", config.in_channels, config.height,
                config.width, config.classes, o.dataset, train.channels, train.height, train.width,
                train.classes);
        return drop_data(&train_full, &test_full, 2);
    }
    if (train.height == 1 && o.augment == 1) { /* spike trains (1 x channels): nothing to crop */
        fprintf(stderr, "snn-train: --augment 1: --dataset %s holds spike trains, not images "
                "to crop or flip\n", o.dataset);
        return drop_data(&train_full, &test_full, 2);
    }
    if (train.height == 1 && !o.resume && model_takes_images(config.kind)) {
        fprintf(stderr, "snn-train: --model %s takes images; --dataset %s holds spike trains of "
                "%d channels (hint: the recurrent network, --model rsnn)\n", o.model, o.dataset,
                train.width);
        return drop_data(&train_full, &test_full, 2);
    }
    if (train.height > 1 && o.crop_padding > train.height / 2) {
        fprintf(stderr, "snn-train: --crop-padding %d: expected 0..%d, half the height of the "
                "%dx%d images (hint: 4 for 32x32, 2 for 28x28)\n", o.crop_padding,
                train.height / 2, train.height, train.width);
        return drop_data(&train_full, &test_full, 2);
    }
    if (start.batch) { /* a mid-epoch position means something only with the same batches */
        char here[128];
        snprintf(here, sizeof here, "batch size %d, %lld images, seed %d",
                 o.batch_size * o.world_size, (long long)train.count, o.seed);
        const char *there = snn_metadata_get(&resume_meta, "snn.train.position");
        if (!there || strcmp(here, there) != 0) {
            fprintf(stderr, "snn-train: --resume %s stopped mid-epoch with %s; this run has %s\n"
                    "hint: resume with the same --batch-size, --limit-train, --seed and number "
                    "of ranks\n",
                    o.resume, there ? there : "(unknown)", here);
            return drop_data(&train_full, &test_full, 2);
        }
    }

    /* the output folder, locked for this run before anything is built or trained */
    char out_dir[512], path[1024];
    train_out_dir(&o, out_dir, sizeof out_dir);
    if (rank0 && (make_dirs("snn-train", o.out ? "--out" : "the output folder", out_dir) ||
                  run_lock_folder("snn-train", out_dir, argc, argv))) /* rank 0 writes the files */
        return drop_data(&train_full, &test_full, 1);
    if (rank0 && train_out_check(out_dir, &o)) /* another run's checkpoint is there */
        return drop_data(&train_full, &test_full, 2);

    /* memory: the model, one step and the batches must fit before any of it is allocated */
    int optimizer_states = strcmp(o.optimizer, "sgd") ? 2 : o.momentum > 0.0f ? 1 : 0;
    optimizer_states += o.ema > 0.0f; /* the average: one more copy of the weights and buffers */
    double image_bytes = 4.0 * ((double)train.channels * train.height * train.width *
                                (train.time_steps > 0 ? train.time_steps : 1) + 1.0);
    double per_image = 2.0 * 2.0 * image_bytes; /* two loaders, two batch slots each */
    struct stat resume_file;
    char flags[160];
    int n = snprintf(flags, sizeof flags, "--T (%d), --width (%d)", config.time_steps, config.width_base);
    if (config.kind == SNN_MODEL_SPIKING_CNN)
        snprintf(flags + n, sizeof flags - (size_t)n, " or --hidden (%d)", config.hidden);
    run_memory_request request = {
        "snn-train", "training", o.resume ? "--T or --width (they come from the checkpoint)" : flags,
        config, o.batch_size, train.count, device, true, optimizer_states,
        per_image * o.batch_size + 8.0 * (double)(train.count + test.count) +
            (o.resume && stat(o.resume, &resume_file) == 0 ? (double)resume_file.st_size : 0.0),
        0.0, o.dist.sync_bn, o.keep_bf16, SNN_CARRY_NONE, 0, false};
    /* online and segmented steps hold the graph of 1 or K time steps, the state the neuron
     * layers carry, and (segments) the states saved at the segments' starts. They take images
     * (direct or Poisson encoding); other inputs are refused below, by train_online_check and
     * train_segments_check, which name the flag */
    const bool images = config.encoding == SNN_ENCODING_DIRECT ||
                        config.encoding == SNN_ENCODING_POISSON;
    if (images && o.time_checkpoint > 0 && o.time_checkpoint <= config.time_steps)
        request.carry = SNN_CARRY_DIFFERENTIABLE, request.steps = o.time_checkpoint;
    else if (images && train_options_online(&o))
        request.carry = SNN_CARRY_CONSTANT, request.steps = 1,
        request.traces = strcmp(o.train_mode, "ottt") == 0;
    snn_memory_estimate memory;
    if (run_memory_check(&request, per_image, &memory)) return drop_data(&train_full, &test_full, 2);
    bool augment = o.augment < 0 ? train.height == 32 : o.augment != 0;
    o.augment = augment; /* as the checkpoint records it */
    snn_loader_config lc = snn_loader_config_default();
    lc.batch_size = o.batch_size;
    lc.seed = (uint64_t)o.seed;
    lc.random_crop = lc.horizontal_flip = augment;
    lc.crop_padding = o.crop_padding;
    lc.erase_probability = o.random_erasing;
    snn_dataset_default_norm(&train, lc.mean, lc.std);
    if (config.encoding == SNN_ENCODING_POISSON) /* spikes need pixel intensities in [0, 1] */
        for (int c = 0; c < SNN_DATA_MAX_CHANNELS; c++) lc.mean[c] = 0.0f, lc.std[c] = 1.0f;
    snn_loader_config tc = lc;
    tc.shuffle = false;
    tc.random_crop = tc.horizontal_flip = false;
    tc.erase_probability = 0.0f;
    train_dist_shard(dist, &lc);   /* each rank its slice of every global batch */
    snn_dataset test_part = test;  /* and its part of the test set */
    train_dist_slice(dist, &test_part);
    snn_loader *train_loader = snn_loader_new(&train, &lc);
    snn_loader *test_loader = train_loader ? snn_loader_new(&test_part, &tc) : NULL;
    if (!test_loader) return fail("loader");

    /* model and optimizer */
    snn_rng rng;
    snn_rng_seed(&rng, (uint64_t)o.seed);
    snn_module *model = snn_model_new(&config, &rng);
    if (!model || snn_module_to(model, device) != SNN_OK) return fail("model");
    if (o.keep_bf16) { /* the plan's option (nn/plan.h); the rest keeps its defaults */
        snn_model_options plan = snn_model_options_of(model);
        plan.keep_bf16 = true;
        if (snn_model_set_options(model, &plan) != SNN_OK) return fail("--keep-bf16");
    }
    if ((train_options_online(&o) &&
         train_online_check("snn-train", o.train_mode, model) != SNN_OK) ||
        (o.time_checkpoint > 0 &&
         train_segments_check("snn-train", model, o.time_checkpoint) != SNN_OK)) {
        fprintf(stderr, "%s\n", snn_last_error());
        return 2;
    }
    snn_optimizer *opt = strcmp(o.optimizer, "sgd") == 0
        ? snn_sgd_new(model, o.lr, o.momentum, o.weight_decay, false)
        : snn_adam_new(model, o.lr, o.weight_decay, strcmp(o.optimizer, "adamw") == 0);
    if (!opt) return fail("optimizer");
    /* the first step's arena in one block: it needs no growth, and on CUDA no doubling (the
     * gradients of activations come from the step pool, not from the arena) */
    if (snn_step_reserve(device, (size_t)(memory.step - memory.gradient_pool)) != SNN_OK)
        return fail("memory");
    int64_t steps_per_epoch = snn_loader_num_batches(train_loader);
    schedule.total_steps = steps_per_epoch * o.epochs;
    schedule.step_size = schedule.total_steps / 3 > 0 ? schedule.total_steps / 3 : 1;
    train_state run = {model, opt, NULL, start.accuracy, start.best_epoch, start.best_accuracy};
    /* --ema: an average the checkpoint holds is made before the load (which fills it); a new
     * one after it, so that it starts from the weights the run starts from */
    if (o.ema > 0.0f && (!o.resume || start.has_ema) && !(run.ema = snn_ema_new(model, o.ema)))
        return fail("--ema");
    if (o.resume) {
        snn_param_list average = {0};
        if (run.ema && snn_ema_state(run.ema, &average) != SNN_OK) return fail("--resume");
        snn_status loaded = snn_checkpoint_load_extra(o.resume, model, opt, &average);
        snn_param_list_free(&average);
        if (loaded != SNN_OK) return fail("--resume");
        const char *r = snn_metadata_get(&resume_meta, "snn.model.rng");
        if (r) snn_model_set_rng_state(model, strtoull(r, NULL, 10));
        if (run.ema && (r = snn_metadata_get(&resume_meta, "snn.ema.rng")))
            snn_model_set_rng_state(snn_ema_model(run.ema), strtoull(r, NULL, 10));
        if (snn_loader_seek(train_loader, start.epoch, start.batch) != SNN_OK) return fail("--resume");
        if (start.batch && rank0)
            fprintf(stderr, "snn-train: resumed from %s in epoch %lld after batch %lld (step %lld)\n",
                    o.resume, (long long)start.epoch + 1, (long long)start.batch,
                    (long long)snn_optimizer_steps(opt));
        else if (rank0)
            fprintf(stderr, "snn-train: resumed from %s after epoch %lld (step %lld)\n", o.resume,
                    (long long)start.epoch, (long long)snn_optimizer_steps(opt));
    }
    if (o.ema > 0.0f && !run.ema) {
        if (!(run.ema = snn_ema_new(model, o.ema))) return fail("--ema");
        if (rank0)
            fprintf(stderr, "snn-train: --ema %g: %s holds no moving average; it starts from the "
                    "resumed weights\n", (double)o.ema, o.resume);
    }
    if (dist && snn_dist_attach(dist, model) != SNN_OK) return fail("data-parallel setup");

    if (rank0) { /* what this run trains, every default spelled out (app/run_config.h) */
        fprintf(stderr, "snn-train: %s on %s (%lld train, %lld test images %dx%dx%d), %s, T=%d, "
                "%s neurons, %lld parameters, %s, batch %d, %lld steps/epoch\n", o.model, o.dataset,
                (long long)train.count, (long long)test.count, config.in_channels, config.height,
                config.width, snn_device_name(device), config.time_steps,
                snn_neuron_kind_name(config.neuron.kind), (long long)snn_module_num_parameters(model),
                o.optimizer, o.batch_size * o.world_size, (long long)steps_per_epoch);
        run_config_print_model(stderr, "  ", model);
        train_options_print(stderr, "  ", &o, &schedule, o.batch_size * o.world_size);
        run_config_print_device(stderr, "  ", device, precision);
        /* the plan's options now; --explain traces the first step's forward and prints, after
         * it, which kernel each layer ran and which layers ran fused (nn/plan.h) */
        const snn_model_options plan = snn_model_options_of(model);
        fprintf(stderr, "  plan: fusion %s, spikes kept for backward as %s, conv outputs as %s%s\n",
                plan.fuse ? "on" : "off", plan.pack_spikes ? "bits" : "floats",
                plan.keep_bf16 ? "bf16" : "fp32",
                o.explain ? "" : " (--explain: the kernel each layer runs)");
    }
    if (o.explain && snn_model_trace_plan(model) != SNN_OK) return fail("--explain");

    int exit_code = 0;
    snn_module *eval_model = train_eval_model(&run); /* what is evaluated and kept as the best */
    const int64_t steps_at_start = snn_optimizer_steps(opt);
    double run_start = now_seconds();
    for (int64_t epoch = start.epoch; epoch < o.epochs; epoch++) {
        epoch_stats st = epoch == start.epoch ? start.resumed : (epoch_stats){0};
        if (train_epoch(&run, &schedule, train_loader, &o, device, dist, epoch, &st, out_dir,
                        train.count) != SNN_OK) {
            exit_code = fail("training");
            break;
        }
        if (st.diverged || st.save_failed) {
            exit_code = st.diverged ? 3 : 1;
            break;
        }
        eval_result ev = {0};
        /* a signal: in a data-parallel run the ranks agree first (the evaluation's collectives
         * need all of them), and again after it (evaluate stops between batches on a signal) */
        bool stop = false;
        if (train_dist_stop(dist, run_stop_requested(), &stop) != SNN_OK) {
            exit_code = fail("training");
            break;
        }
        if (!stop && (train_dist_epoch_end(dist, model, run.ema ? eval_model : NULL) != SNN_OK ||
                      evaluate(eval_model, test_loader, device, &ev) != SNN_OK ||
                      train_dist_eval(dist, &ev) != SNN_OK)) {
            exit_code = fail("evaluation");
            break;
        }
        if (!stop && train_dist_stop(dist, run_stop_requested(), &stop) != SNN_OK) {
            exit_code = fail("evaluation");
            break;
        }
        if (stop) { /* mid-epoch, or before this epoch's evaluation; rank 0 writes the checkpoint */
            exit_code = !rank0 ? RUN_EXIT_STOPPED
                               : stop_on_signal(out_dir, &run, &o, epoch, &st, train.count,
                                                steps_per_epoch, steps_at_start);
            break;
        }
        run.last_accuracy = eval_accuracy(&ev);
        if (!rank0) { /* rank 0 alone reports and writes files; the others only agree on stopping */
            bool stop_now = false;
            if (train_dist_stop(dist, run_stop_requested(), &stop_now) != SNN_OK) {
                exit_code = fail("training");
                break;
            }
            if (stop_now && epoch + 1 < o.epochs) {
                exit_code = RUN_EXIT_STOPPED;
                break;
            }
            if (o.stop_after && epoch + 1 - start.epoch >= o.stop_after) break;
            continue;
        }
        fprintf(stderr, "epoch %lld: train loss %.4f acc %.2f%% | test%s loss %.4f acc %.2f%% | "
                "%.0f img/s, %.1f s (%.1f s in all)\n", (long long)epoch + 1,
                st.seen ? st.loss_sum / (double)st.seen : (double)NAN,
                st.seen ? 100.0 * (double)st.correct / (double)st.seen : (double)NAN,
                run.ema ? " (EMA weights)" : "",
                ev.total ? ev.loss_sum / (double)ev.total : (double)NAN, 100.0 * eval_accuracy(&ev),
                (double)st.images / st.seconds, st.seconds, now_seconds() - run_start);
        if (o.activity_penalty > 0.0f && st.seen)
            fprintf(stderr, "  activity penalty %.4f (x LAMBDA %g)\n", st.penalty_sum / (double)st.seen,
                    (double)o.activity_penalty);
        if (!snn_neuron_is_ann(config.neuron.kind)) { /* an ANN's activations are not spikes */
            fprintf(stderr, "  firing rates:");
            for (int l = 0; l < ev.n_layers; l++)
                fprintf(stderr, " %s %.3f", ev.layer_names[l],
                        ev.elements[l] > 0 ? ev.spikes[l] / ev.elements[l] : 0.0);
            fputc('\n', stderr);
        }
        const metrics_train row = {
            st.seen ? st.loss_sum / (double)st.seen : (double)NAN,
            st.seen ? (double)st.correct / (double)st.seen : (double)NAN,
            st.seconds > 0 ? (double)st.images / st.seconds : 0.0, st.seconds};
        /* the best evaluation so far: written before the checkpoint that records it */
        bool best = run.last_accuracy > run.best_accuracy;
        if (run_lock_verify() || write_metrics(out_dir, epoch, &row, &ev, snn_optimizer_lr(opt)) ||
            (best && save_best(out_dir, &run, &o, epoch, run.last_accuracy)) ||
            save_checkpoint(out_dir, &run, &o, epoch, -1, &st, train.count)) {
            fprintf(stderr, "snn-train: stopping; the checkpoint of the last epoch written is kept "
                    "as it was\n");
            exit_code = 1;
            break;
        }
        path_in(path, sizeof path, out_dir, "checkpoint.safetensors");
        bool stop_now = false; /* came while the files were written */
        if (train_dist_stop(dist, run_stop_requested(), &stop_now) != SNN_OK) {
            exit_code = fail("training");
            break;
        }
        if (stop_now && epoch + 1 < o.epochs) {
            fprintf(stderr, "snn-train: %s: stopped after epoch %lld; continue with --resume %s\n",
                    run_signal_name(run_stop_signal), (long long)epoch + 1, path);
            exit_code = RUN_EXIT_STOPPED;
            break;
        }
        if (o.stop_after && epoch + 1 - start.epoch >= o.stop_after && epoch + 1 < o.epochs) {
            fprintf(stderr, "snn-train: stopping after %d epoch(s) as asked; continue with --resume %s\n",
                    o.stop_after, path);
            break;
        }
    }
    if (exit_code == 0 && rank0) {
        path_in(path, sizeof path, out_dir, "raster.svg");
        if (write_raster(path, eval_model, &test, &tc, device, 24) != SNN_OK)
            fprintf(stderr, "snn-train: raster: %s\n", snn_last_error());
        if (run.best_epoch > 0)
            fprintf(stderr, "snn-train: best: epoch %lld, %.2f%% test accuracy; its weights are in "
                    "%s/best.safetensors\n", (long long)run.best_epoch, 100.0 * run.best_accuracy,
                    out_dir);
        fprintf(stderr, "snn-train: done in %.1f s; metrics, curves, raster and checkpoint in %s/\n",
                now_seconds() - run_start, out_dir);
    }

    snn_ema_free(run.ema);
    snn_optimizer_free(opt);
    snn_module_free(model);
    snn_loader_free(test_loader);
    snn_loader_free(train_loader);
    snn_dataset_free(&test_full);
    snn_dataset_free(&train_full);
    train_dist_end(dist, exit_code);
    snn_shutdown();
    return exit_code;
}
