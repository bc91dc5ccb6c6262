/*
 * train_resume.c - the recorded training flags of a checkpoint and --resume's checks against
 * them (train_resume.h).
 */
#include "app/train_resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum flag_kind {
    FLAG_RUN,     /* the run itself: never changes */
    FLAG_RECIPE,  /* may change with --allow-changes */
    FLAG_PLAN,    /* may change */
} flag_kind;

/* The flags a checkpoint records, in the order it records them (the model's flags come from
 * its configuration instead: model_conflicts). */
static const struct recorded_flag {
    const char *flag;
    flag_kind kind;
} recorded[] = {
    {"--dataset", FLAG_RUN},        {"--optimizer", FLAG_RUN},
    {"--loss", FLAG_RUN},           {"--ema", FLAG_RUN},
    {"--split-by", FLAG_RUN},       {"--downsample", FLAG_RUN},
    {"--max-time", FLAG_RUN},       {"--binarize", FLAG_RUN},
    {"--batch-size", FLAG_RECIPE},  {"--lr", FLAG_RECIPE},
    {"--momentum", FLAG_RECIPE},    {"--weight-decay", FLAG_RECIPE},
    {"--schedule", FLAG_RECIPE},    {"--warmup", FLAG_RECIPE},
    {"--min-lr", FLAG_RECIPE},      {"--label-smoothing", FLAG_RECIPE},
    {"--tet-lambda", FLAG_RECIPE},  {"--augment", FLAG_RECIPE},
    {"--crop-padding", FLAG_RECIPE}, {"--random-erasing", FLAG_RECIPE},
    {"--activity-penalty", FLAG_RECIPE}, {"--seed", FLAG_RECIPE},
    {"--limit-train", FLAG_RECIPE}, {"--epochs", FLAG_PLAN},
    {"--limit-test", FLAG_PLAN},    {"--precision", FLAG_PLAN},
    {"--train-mode", FLAG_RECIPE},  {"--sltt-k", FLAG_RECIPE},
    {"--time-checkpoint", FLAG_RECIPE}, {"--clip-grad", FLAG_RECIPE},
    {"--keep-bf16", FLAG_PLAN},
};
enum { N_RECORDED = (int)(sizeof recorded / sizeof recorded[0]), MAX_PARTS = 4 };

/* "snn.train.flags", then "snn.train.flags.2", ... */
static void part_key(char *key, size_t size, int part)
{
    if (part == 1) snprintf(key, size, "snn.train.flags");
    else snprintf(key, size, "snn.train.flags.%d", part);
}

snn_status train_flags_to_metadata(const train_options *o, snn_metadata *meta)
{
    train_options copy = *o;
    copy.batch_size = o->batch_size * o->world_size; /* the global batch */
    option table[TRAIN_MAX_OPTIONS];
    int n = train_option_table(&copy, table);
    char text[sizeof meta->values[0]] = "", key[48];
    int part = 1;
    for (int r = 0; r < N_RECORDED; r++) {
        const option *opt = option_find(table, n, recorded[r].flag);
        char value[160], pair[200];
        snprintf(pair, sizeof pair, "%s %s", recorded[r].flag,
                 option_text(opt, value, sizeof value));
        if (strlen(text) + 1 + strlen(pair) >= sizeof text) { /* this part is full */
            part_key(key, sizeof key, part++);
            if (snn_metadata_set(meta, key, "%s", text) != SNN_OK) return snn_last_status();
            text[0] = '\0';
        }
        if (text[0]) strcat(text, " ");
        strcat(text, pair);
    }
    part_key(key, sizeof key, part);
    return snn_metadata_set(meta, key, "%s", text);
}

/* ---- reading them back -------------------------------------------------------------------- */

/* One recorded flag and its value; the text lives in `storage` below, as long as the program
 * (the restored string options point into it). */
typedef struct pair {
    const char *flag, *value;
} pair;

static char storage[MAX_PARTS + 1][sizeof ((snn_metadata *)0)->values[0]];

/* Splits the recorded flags of meta into pairs; how many (0: the checkpoint records none), or
 * -1 for text that is not "--flag value" pairs. */
static int read_recorded(const snn_metadata *meta, pair *pairs, int max)
{
    int count = 0;
    for (int part = 1; part <= MAX_PARTS; part++) {
        char key[48];
        part_key(key, sizeof key, part);
        const char *v = snn_metadata_get(meta, key);
        if (!v) break;
        char *text = storage[part - 1];
        snprintf(text, sizeof storage[0], "%s", v);
        for (char *word = strtok(text, " "); word; word = strtok(NULL, " ")) {
            char *value = strtok(NULL, " ");
            if (strncmp(word, "--", 2) != 0 || !value || count == max) return -1;
            pairs[count++] = (pair){word, value};
        }
    }
    return count;
}

/* A checkpoint written before the flags were recorded: the few it always held. */
static int read_legacy(const snn_metadata *meta, pair *pairs)
{
    int count = 0;
    const char *v;
    if ((v = snn_metadata_get(meta, "snn.train.dataset"))) pairs[count++] = (pair){"--dataset", v};
    if ((v = snn_metadata_get(meta, "snn.train.optimizer")))
        pairs[count++] = (pair){"--optimizer", v};
    v = snn_metadata_get(meta, "snn.train.ema");
    pairs[count++] = (pair){"--ema", v ? v : "0"};
    if ((v = snn_metadata_get(meta, "snn.train.activity_penalty")))
        pairs[count++] = (pair){"--activity-penalty", v};
    if ((v = snn_metadata_get(meta, "snn.train.frames"))) { /* "number,1" */
        char *text = storage[MAX_PARTS];
        snprintf(text, sizeof storage[0], "%s", v);
        char *comma = strchr(text, ',');
        if (comma) {
            *comma = '\0';
            pairs[count++] = (pair){"--split-by", text};
            pairs[count++] = (pair){"--downsample", comma + 1};
        }
    }
    return count;
}

static flag_kind kind_of(const char *flag)
{
    for (int r = 0; r < N_RECORDED; r++)
        if (strcmp(recorded[r].flag, flag) == 0) return recorded[r].kind;
    return FLAG_RUN;
}

/* The lines of one message: a flag given, what it is, and what the checkpoint has. */
typedef struct report {
    char lines[40][200];
    int count;
    bool recipe, run;          /* conflicts of each kind */
} report;

static void report_add(report *r, flag_kind kind, const char *fmt, const char *a, const char *b,
                       const char *c)
{
    if (r->count == 40) return;
    snprintf(r->lines[r->count++], sizeof r->lines[0], fmt, a, b, c);
    if (kind == FLAG_RUN) r->run = true;
    else r->recipe = true;
}

/* The model's flags: those left out take the checkpoint's model; a given one whose value
 * builds another model than the checkpoint's is a conflict. */
static void model_conflicts(train_options *o, option *table, int n, const bool *given,
                            const snn_model_config *c, report *conflicts)
{
    const snn_neuron_config *cn = &c->neuron;
#define GIVEN(flag) given[option_find(table, n, flag) - table]
    if (!GIVEN("--model")) o->model = snn_model_kind_name(c->kind);
    if (!GIVEN("--neuron")) o->neuron = snn_neuron_kind_name(cn->kind);
    if (!GIVEN("--surrogate")) o->surrogate = snn_surrogate_name(cn->surrogate.kind);
    if (!GIVEN("--tau")) o->tau = cn->tau;
    if (!GIVEN("--tau-adapt")) o->tau_adapt = cn->tau_adapt;
    if (!GIVEN("--beta")) o->beta = cn->beta;
    if (!GIVEN("--T")) o->time_steps = c->time_steps;
    if (!GIVEN("--width")) o->width = c->width_base;
    if (!GIVEN("--hidden")) o->hidden = c->hidden;
    if (!GIVEN("--levels")) o->levels = cn->levels;
    if (!GIVEN("--symmetric")) o->symmetric = cn->symmetric;
    if (!GIVEN("--dropout")) o->dropout = c->dropout;
    if (!GIVEN("--layers")) o->layers = c->layers;
    const char *sequence = c->encoding == SNN_ENCODING_ROWS     ? "rows"
                           : c->encoding == SNN_ENCODING_PIXELS ? "pixels"
                                                                : NULL;
    if (!GIVEN("--sequence")) o->sequence = sequence;
    bool events = c->encoding == SNN_ENCODING_EVENTS; /* event frames: --encoding has no say */
    if (!GIVEN("--encoding") && !events)
        o->encoding = c->encoding == SNN_ENCODING_POISSON ? "poisson" : "direct";
    const snn_model_config asked = train_model_config(o);
    const snn_neuron_config *an = &asked.neuron;
    char tau[32], steps[16], width[16], hidden[16], levels[16], dropout[32], layers[16];
    snprintf(layers, sizeof layers, "%d", c->layers);
    option_float_text(cn->tau, tau, sizeof tau);
    char tau_adapt[32], beta[32];
    option_float_text(cn->tau_adapt, tau_adapt, sizeof tau_adapt);
    option_float_text(cn->beta, beta, sizeof beta);
    snprintf(steps, sizeof steps, "%d", c->time_steps);
    snprintf(width, sizeof width, "%d", c->width_base);
    snprintf(hidden, sizeof hidden, "%d", c->hidden);
    snprintf(levels, sizeof levels, "%d", cn->levels);
    option_float_text(c->dropout, dropout, sizeof dropout);
    const struct {
        const char *flag;
        bool differs;
        const char *had;          /* the checkpoint's value, as the flag would give it */
    } fields[] = {
        {"--model", asked.kind != c->kind, snn_model_kind_name(c->kind)},
        {"--neuron", an->kind != cn->kind, snn_neuron_kind_name(cn->kind)},
        {"--surrogate", an->surrogate.kind != cn->surrogate.kind,
         snn_surrogate_name(cn->surrogate.kind)},
        {"--tau", an->tau != cn->tau, tau},
        {"--tau-adapt", an->tau_adapt != cn->tau_adapt, tau_adapt},
        {"--beta", an->beta != cn->beta, beta},
        {"--T", asked.time_steps != c->time_steps, steps},
        {"--width", asked.width_base != c->width_base, width},
        {"--hidden", asked.hidden != c->hidden, hidden},
        {"--encoding", !events && asked.encoding != c->encoding,
         c->encoding == SNN_ENCODING_POISSON ? "poisson" : "direct"},
        {"--levels", an->levels != cn->levels, levels},
        {"--symmetric", an->symmetric != cn->symmetric, cn->symmetric ? "on" : "off"},
        {"--dropout", asked.dropout != c->dropout, dropout},
        {"--layers", asked.layers != c->layers, layers},
        {"--sequence", asked.encoding != c->encoding || c->kind != SNN_MODEL_RSNN,
         sequence ? sequence : "no --sequence (the data set's frames)"},
    };
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        if (!fields[f].differs || !GIVEN(fields[f].flag)) continue; /* a consequence elsewhere */
        char value[160];
        option_text(option_find(table, n, fields[f].flag), value, sizeof value);
        report_add(conflicts, FLAG_RUN, "  %s %s (the checkpoint was trained with %s)",
                   fields[f].flag, value, fields[f].had);
    }
#undef GIVEN
}

/* The recorded global batch against this run's --batch-size and ranks. 0, or 2 with the
 * message printed (a batch that does not split over the ranks). */
static int batch_flag(train_options *o, bool is_given, int ranks, const char *value,
                      report *conflicts, report *changes)
{
    int global = atoi(value);
    if (!is_given) {
        if (global < 1 || global % ranks != 0) {
            fprintf(stderr, "snn-train: --resume %s was trained with %s images a step, which do "
                    "not split over %d ranks\nhint: give --batch-size\n", o->resume, value, ranks);
            return 2;
        }
        o->batch_size = global / ranks;
        return 0;
    }
    if (o->batch_size * ranks == global) return 0;
    char text[96];
    if (ranks == 1) snprintf(text, sizeof text, "%d", o->batch_size);
    else snprintf(text, sizeof text, "%d on %d ranks, %d images a step,", o->batch_size, ranks,
                  o->batch_size * ranks);
    report_add(o->allow_changes ? changes : conflicts, FLAG_RECIPE,
               "  %s %s (the checkpoint was trained with %s images a step)", "--batch-size", text,
               value);
    return 0;
}

/* Prints the lines of a report, each on its own line. */
static void report_print(const report *r)
{
    for (int i = 0; i < r->count; i++) fprintf(stderr, "%s\n", r->lines[i]);
}

int train_resume_flags(train_options *o, option *table, int n, const bool *given, int ranks,
                       const snn_metadata *meta, const snn_model_config *config, bool quiet)
{
    pair pairs[64];
    int count = read_recorded(meta, pairs, 64);
    if (count < 0) {
        fprintf(stderr, "snn-train: --resume %s: bad snn.train.flags in its metadata (expected "
                "\"--flag value\" pairs)\n", o->resume);
        return 2;
    }
    const bool legacy = count == 0;
    if (legacy) count = read_legacy(meta, pairs);
    report conflicts = {0}, changes = {0};
    model_conflicts(o, table, n, given, config, &conflicts);
    bool restored[TRAIN_MAX_OPTIONS] = {0};
    for (int p = 0; p < count; p++) {
        option *opt = option_find(table, n, pairs[p].flag);
        if (!opt) continue; /* a flag of another version of snn-train */
        const int i = (int)(opt - table);
        const flag_kind kind = kind_of(pairs[p].flag);
        restored[i] = true;
        if (strcmp(opt->name, "--batch-size") == 0) {
            if (batch_flag(o, given[i], ranks, pairs[p].value, &conflicts, &changes)) return 2;
            continue;
        }
        if (!given[i]) {
            if (option_set_text(opt, pairs[p].value)) {
                fprintf(stderr, "snn-train: --resume %s: bad value '%s' of %s in its metadata\n",
                        o->resume, pairs[p].value, opt->name);
                return 2;
            }
            continue;
        }
        if (strcmp(opt->name, "--augment") == 0 && o->augment < 0) /* -1: on for 32x32 */
            o->augment = config->height == 32;
        if (strcmp(opt->name, "--ema") == 0 && strtof(pairs[p].value, NULL) == 0.0f)
            continue; /* a run without an average may start one */
        if (kind == FLAG_PLAN || option_equals_text(opt, pairs[p].value)) continue;
        char value[160];
        option_text(opt, value, sizeof value);
        report_add(kind == FLAG_RECIPE && o->allow_changes ? &changes : &conflicts, kind,
                   "  %s %s (the checkpoint was trained with %s)", opt->name, value,
                   pairs[p].value);
    }
    if (conflicts.count) {
        fprintf(stderr, "snn-train: --resume %s continues a run; %d flag%s given here differ%s "
                "from it:\n", o->resume, conflicts.count, conflicts.count == 1 ? "" : "s",
                conflicts.count == 1 ? "s" : "");
        report_print(&conflicts);
        fprintf(stderr, "hint: leave %s out to continue with the checkpoint's value%s",
                conflicts.count == 1 ? "it" : "them", conflicts.count == 1 ? "" : "s");
        if (conflicts.recipe)
            fprintf(stderr, "; add --allow-changes to train on with a new learning rate, "
                    "schedule, batch or augmentation");
        if (conflicts.run)
            fprintf(stderr, "; another model, data set, optimizer, loss or --ema is a new run "
                    "(in another --out)");
        fputc('\n', stderr);
        return 2;
    }
    if (changes.count && !quiet) {
        fprintf(stderr, "snn-train: --allow-changes: this run trains on from %s with:\n",
                o->resume);
        report_print(&changes);
        fprintf(stderr, "  so it no longer continues that run exactly\n");
    }
    if (legacy && !quiet) { /* what the checkpoint could not say */
        fprintf(stderr, "snn-train: note: %s records no training flags (written before snn-train "
                "recorded them); these come from this command line or the defaults:", o->resume);
        for (int r = 0, first = 1; r < N_RECORDED; r++) {
            option *opt = option_find(table, n, recorded[r].flag);
            if (recorded[r].kind == FLAG_RUN || restored[opt - table]) continue;
            char value[160];
            fprintf(stderr, "%s %s %s", first ? "" : ",", opt->name,
                    option_text(opt, value, sizeof value));
            first = 0;
        }
        fputc('\n', stderr);
    }
    return 0;
}
