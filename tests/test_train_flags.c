#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_train_flags.c - what issue 32 found users trip on in snn-train and snn-eval, each of
 * which now ends in a clear message or the right behaviour:
 *   - --resume restores the training flags the checkpoint records: a run at --lr 2e-3 with a
 *     constant schedule resumes at them, with the checkpoint's model, in the checkpoint's
 *     folder; flags given that differ are refused, all of them listed (--model resnet18, --T 4,
 *     --lr 1), exit 2, leaving the checkpoint as it was; the learning rate may change with
 *     --allow-changes, --epochs always;
 *   - a checkpoint that records no flags (written before they were) resumes, with a note naming
 *     the values that come from the command line, and its batch-norm layers, which did not
 *     count their batches yet, count as long trained; its model's flags are still checked;
 *   - a new run in a folder that holds another run's checkpoint is refused (exit 2), naming the
 *     folder, --resume and --overwrite; with --overwrite it runs;
 *   - bad values: one message for each, naming the flag and the value; a name that is none of
 *     the choices exits 2 like any bad flag; an unknown flag gets the nearest one, in snn-eval
 *     too;
 *   - snn-eval given a run's folder reads the checkpoint in it;
 *   - --neuron alif trains with --tau-adapt and --beta, which a resume takes from the checkpoint.
 * Runs are tiny (width 8, 320 images): seconds each. Skipped (77) without Fashion-MNIST.
 * Run: ctest --test-dir build -R train_flags --output-on-failure
 */
#include <sys/stat.h>

#include "program_runner.h"
#include "snn.h"
#include "test.h"

#define COMMON "--T 2 --width 8 --hidden 32 --batch-size 32 --limit-train 320 --limit-test 64 " \
               "--threads 1"
/* snn-train without the tests' --lr 1e-3 of TRAIN: what a user types to resume */
#define PLAIN_TRAIN SNN_BIN_DIR "/snn-train"

static char run_dir[400]; /* a one-epoch run at --lr 2e-3, constant schedule */

/* The rows of <dir>/metrics.csv after its header. */
static int metrics_rows(const char *dir)
{
    char path[600], line[8192];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int rows = -1;
    while (fgets(line, sizeof line, f)) rows++;
    fclose(f);
    return rows;
}

static void test_flag_messages(void)
{
    CHECK(run(TRAIN " %s", "--batch-size 0 --T 0 --epochs -1") == 2);
    CHECK(output_contains("snn-train: --batch-size 0: expected an integer >= 1") &&
          output_contains("snn-train: --T 0: expected an integer >= 1") &&
          output_contains("snn-train: --epochs -1: expected an integer >= 1"));
    CHECK(run(TRAIN " %s", "--model resnet-18") == 2 &&
          output_contains("--model resnet-18: expected cnn, resnet18") &&
          output_contains("did you mean 'resnet18'?"));
    CHECK(run(TRAIN " %s", "--epoch 3") == 2 &&
          output_contains("unknown option '--epoch'; did you mean '--epochs'?"));
    CHECK(run(TRAIN " %s", "--epochs=3") == 2 &&
          output_contains("give the value as the next word: --epochs 3"));
    CHECK(run(TRAIN " %s", "--device gpu") == 2 &&
          output_contains("--device gpu: expected cpu or cuda"));
    CHECK(run(TRAIN " %s", "--lr 0 --tau 1") == 2 &&
          output_contains("--lr 0: expected a number > 0") &&
          output_contains("--tau 1: expected a number > 1"));
    CHECK(run(TRAIN " %s", "--neuron alif --tau-adapt 0 --beta -1") == 2 &&
          output_contains("--tau-adapt 0: expected a number > 0") &&
          output_contains("--beta -1: expected a number >= 0"));
    CHECK(run(TRAIN " %s", "--dataset fmnist") == 2 && output_contains("fmnist"));
    CHECK(run(TRAIN " %s", "--kernels slow") == 2 &&
          output_contains("--kernels slow: expected fast or ref"));
    CHECK(run(TRAIN " %s", "--keep-bf16") == 2 &&
          output_contains("--keep-bf16 keeps conv outputs in the precision of --precision bf16's "
                          "products; expected --precision bf16 with it (got fp32)"));
    CHECK(run(EVAL " %s", "--chekpoint x") == 2 &&
          output_contains("unknown option '--chekpoint'; did you mean '--checkpoint'?"));
    CHECK(run(EVAL " %s", "--checkpoint x --batch-size 0 --device gpu") == 2 &&
          output_contains("snn-eval: --batch-size 0: expected an integer >= 1") &&
          output_contains("snn-eval: --device gpu: expected cpu or cuda"));
}

static void test_resume_restores_flags(void)
{
    char args[1200], ckpt[600], copy[600], cmd[1400];
    snprintf(run_dir, sizeof run_dir, "%s/run", tmp);
    snprintf(args, sizeof args, COMMON " --lr 2e-3 --schedule constant --epochs 1 --out %s",
             run_dir);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", run_dir);
    snprintf(copy, sizeof copy, "%s/run_epoch1.safetensors", tmp);
    snprintf(cmd, sizeof cmd, "cp %s %s", ckpt, copy);
    CHECK(system(cmd) == 0);

    /* conflicts: every one listed, nothing written */
    snprintf(args, sizeof args, "--resume %s --model resnet18 --T 4 --lr 1 --epochs 2", ckpt);
    CHECK(run(PLAIN_TRAIN " %s", args) == 2);
    CHECK(output_contains("3 flags given here differ") &&
          output_contains("--model resnet18 (the checkpoint was trained with cnn)") &&
          output_contains("--T 4 (the checkpoint was trained with 2)") &&
          output_contains("--lr 1 (the checkpoint was trained with 0.002)") &&
          output_contains("--allow-changes"));
    CHECK(same_file(ckpt, copy));
    /* the same values as the checkpoint's are no conflict */
    snprintf(args, sizeof args, "--resume %s --model cnn --T 2 --width 8 --lr 0.002 --epochs 1",
             ckpt);
    CHECK(run(PLAIN_TRAIN " %s", args) == 0);

    /* the flags left out come from the checkpoint, the output folder too; --epochs may change */
    snprintf(args, sizeof args, "--resume %s --epochs 2 --threads 1", ckpt);
    CHECK(run(PLAIN_TRAIN " %s", args) == 0);
    CHECK(output_contains("lr 0.002 (constant)") && output_contains("width 8, hidden 32") &&
          output_contains("(320 train, 64 test images") &&
          output_contains("32 images a step, 2 epochs"));
    CHECK(metrics_rows(run_dir) == 2);

    /* --allow-changes: a new learning rate, said out loud */
    snprintf(args, sizeof args, "--resume %s --epochs 3 --lr 1e-3 --allow-changes --threads 1",
             ckpt);
    CHECK(run(PLAIN_TRAIN " %s", args) == 0);
    CHECK(output_contains("--lr 0.001 (the checkpoint was trained with 0.002)") &&
          output_contains("no longer continues that run exactly") &&
          output_contains("lr 0.001 (constant)"));
    CHECK(metrics_rows(run_dir) == 3);
}

/* `to`: the checkpoint `from` as snn-train wrote it before issue 32, without the recorded
 * flags and without the batch-norm layers' counts. */
static void write_old_checkpoint(const char *from, const char *to)
{
    snn_metadata meta, old = {0};
    CHECK_OK(snn_checkpoint_read_metadata(from, &meta));
    for (int i = 0; i < meta.count; i++)
        if (strncmp(meta.keys[i], "snn.train.flags", 15) != 0)
            CHECK_OK(snn_metadata_set(&old, meta.keys[i], "%s", meta.values[i]));
    snn_module *model = snn_checkpoint_load_model(from, SNN_CPU, NULL);
    CHECK(model != NULL);
    if (!model) return;
    snn_optimizer *opt = snn_adam_new(model, 1e-3f, 0.0f, false);
    CHECK_OK(snn_checkpoint_load(from, model, opt));
    snn_param_list params, state;
    CHECK_OK(snn_module_parameters(model, &params));
    CHECK_OK(snn_optimizer_state(opt, &state));
    snn_named_param *items = calloc((size_t)(params.count + state.count), sizeof *items);
    int n = 0;
    for (int i = 0; i < params.count; i++)
        if (!strstr(params.items[i].name, "num_batches_tracked")) items[n++] = params.items[i];
    CHECK(n == params.count - 2); /* bn1, bn2 */
    for (int i = 0; i < state.count; i++) items[n++] = state.items[i];
    snn_param_list list = {items, n};
    size_t len = 0;
    char *json = snn_metadata_to_json(&old, &len);
    CHECK_OK(snn_safetensors_save(to, &list, json));
    snn_free(json, len + 1, SNN_CPU);
    free(items);
    snn_param_list_free(&state);
    snn_param_list_free(&params);
    snn_optimizer_free(opt);
    snn_module_free(model);
}

static void test_old_checkpoint_resumes(void)
{
    char old_dir[400], old[600], from[600], args[1200];
    snprintf(from, sizeof from, "%s/run_epoch1.safetensors", tmp); /* test_resume_restores_flags */
    snprintf(old_dir, sizeof old_dir, "%s/old", tmp);
    snprintf(old, sizeof old, "%s/checkpoint.safetensors", old_dir);
    CHECK(mkdir(old_dir, 0755) == 0);
    write_old_checkpoint(from, old);
    /* the model's flags are checked all the same */
    snprintf(args, sizeof args, "--resume %s --width 16 --epochs 2", old);
    CHECK(run(PLAIN_TRAIN " %s", args) == 2 &&
          output_contains("--width 16 (the checkpoint was trained with 8)"));
    /* --limit-train, --limit-test and --batch-size are not recorded: the note says so */
    snprintf(args, sizeof args, "--resume %s --epochs 2 --batch-size 32 --limit-train 320 "
             "--limit-test 64 --threads 1", old);
    CHECK(run(PLAIN_TRAIN " %s", args) == 0);
    CHECK(output_contains("records no training flags") && output_contains("--lr 0.003") &&
          output_contains("--batch-size 32"));
    /* its batch-norm layers had no count: long trained, and counting on from there */
    snn_tensor *count = snn_tensor_new(SNN_SHAPE(1), SNN_CPU);
    snn_named_param item = {.tensor = count};
    snprintf(item.name, sizeof item.name, "bn1.num_batches_tracked");
    snn_param_list one = {&item, 1};
    CHECK_OK(snn_safetensors_load(old, &one, true, NULL, NULL));
    CHECK(count->data[0] >= SNN_BN_LONG_TRAINED);
    snn_tensor_free(count);
}

static void test_no_silent_overwrite(void)
{
    char dir[400], args[1200], ckpt[600], copy[600], cmd[1400];
    snprintf(dir, sizeof dir, "%s/first", tmp);
    snprintf(args, sizeof args, COMMON " --epochs 1 --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 0);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", dir);
    snprintf(copy, sizeof copy, "%s/first_copy.safetensors", tmp);
    snprintf(cmd, sizeof cmd, "cp %s %s", ckpt, copy);
    CHECK(system(cmd) == 0);
    snprintf(args, sizeof args, COMMON " --epochs 1 --seed 1 --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 2);
    char expect[700];
    snprintf(expect, sizeof expect, "--out %s holds the checkpoint of another run", dir);
    CHECK(output_contains(expect) && output_contains("--resume") &&
          output_contains("--overwrite"));
    CHECK(same_file(ckpt, copy));
    snprintf(args, sizeof args, COMMON " --epochs 1 --seed 1 --overwrite --out %s", dir);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(!same_file(ckpt, copy));
}

/* --neuron alif trains the CNN with its --tau-adapt and --beta, which the checkpoint keeps: a
 * resume takes them, and a different --beta is a conflict naming the checkpoint's. */
static void test_alif_run(void)
{
    char dir[400], args[1200], ckpt[600];
    snprintf(dir, sizeof dir, "%s/alif", tmp);
    snprintf(args, sizeof args, COMMON " --neuron alif --tau-adapt 10 --beta 0.5 --epochs 1 "
             "--out %s", dir);
    CHECK(run(TRAIN " %s", args) == 0);
    CHECK(output_contains("alif: tau 2, v_th 1 + beta 0.5 A (tau_adapt 10)"));
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", dir);
    snprintf(args, sizeof args, "--resume %s --epochs 2 --threads 1", ckpt);
    CHECK(run(PLAIN_TRAIN " %s", args) == 0);
    CHECK(output_contains("alif: tau 2, v_th 1 + beta 0.5 A (tau_adapt 10)"));
    snprintf(args, sizeof args, "--resume %s --epochs 3 --beta 1 --threads 1", ckpt);
    CHECK(run(PLAIN_TRAIN " %s", args) == 2);
    CHECK(output_contains("--beta 1 (the checkpoint was trained with 0.5)"));
}

static void test_eval_reads_a_folder(void)
{
    char args[1200];
    snprintf(args, sizeof args, "%s --limit-test 64 --threads 1", run_dir);
    CHECK(run(EVAL " %s", args) == 0 && output_contains("reading its checkpoint.safetensors") &&
          output_contains("accuracy    "));
    snprintf(args, sizeof args, "--checkpoint %s --threads 1", tmp);
    CHECK(run(EVAL " %s", args) == 1 && output_contains("without a checkpoint.safetensors"));
}

int main(void)
{
    if (!fashion_mnist_available()) {
        fprintf(stderr, "skipped: no Fashion-MNIST where the programs look (apt-get install "
                        "dataset-fashion-mnist, or point SNN_DATA_DIR at it)\n");
        return 77;
    }
    if (runner_begin("test_train_flags")) return 1;
    RUN(test_flag_messages);
    RUN(test_resume_restores_flags);
    RUN(test_old_checkpoint_resumes);
    RUN(test_no_silent_overwrite);
    RUN(test_alif_run);
    RUN(test_eval_reads_a_folder);
    runner_end(test_failures);
    return test_finish();
}
