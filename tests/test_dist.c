#define _DEFAULT_SOURCE /* mkdtemp */
/*
 * test_dist.c - the pieces of data-parallel training that run without a GPU (distributed/, data/,
 * autograd/), with ranks as forked processes on the TCP backend:
 *   - rank, world and rendezvous from torchrun / Open MPI / Slurm environments, and the errors;
 *   - --init parsing; the gradient bucket plan; the sharding of an epoch (the ranks' batches
 *     side by side are the one-process batch of batch_size x ranks, augmentation included);
 *   - gradient views of one buffer, and autograd's gradient-ready hook (each parameter once,
 *     after its last use, with its final gradient);
 *   - rendezvous over tcp:// and file:, collectives, a world-size mismatch, a rank that never
 *     comes, a rank that dies;
 *   - the reducer: two ranks with unequal halves of a batch and sync-BN get the gradient the
 *     whole batch gives one process, with many small buckets.
 *
 *     ctest --test-dir build -R '^dist$' --output-on-failure
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distributed/dist_internal.h"
#include "snn.h"
#include "test.h"

/* ---- environments --------------------------------------------------------------------------- */

typedef struct fake_env {
    const char *pairs[24]; /* name, value, ..., NULL */
} fake_env;

static const char *fake_get(const char *name, void *ctx)
{
    const fake_env *e = ctx;
    for (int i = 0; e->pairs[i]; i += 2)
        if (strcmp(e->pairs[i], name) == 0) return e->pairs[i + 1];
    return NULL;
}

static void test_env(void)
{
    snn_dist_env env;
    fake_env none = {{NULL}};
    CHECK_OK(snn_dist_env_read(fake_get, &none, NULL, &env));
    CHECK(env.world_size == 0); /* not distributed */

    fake_env torchrun = {{"RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE",
                          "2", "MASTER_ADDR", "node7", "MASTER_PORT", "29500", NULL}};
    CHECK_OK(snn_dist_env_read(fake_get, &torchrun, NULL, &env));
    CHECK(env.rank == 3 && env.world_size == 8 && env.local_rank == 1 && env.local_world_size == 2);
    CHECK(strcmp(env.init, "tcp://node7:29500") == 0);
    CHECK_OK(snn_dist_env_read(fake_get, &torchrun, "file:/shared/rdv", &env)); /* --init wins */
    CHECK(strcmp(env.init, "file:/shared/rdv") == 0);

    /* Slurm alone is no distributed run (srun sets it for everything); with --init it is */
    fake_env slurm = {{"SLURM_PROCID", "5", "SLURM_NTASKS", "16", "SLURM_LOCALID", "5",
                       "SLURM_NTASKS_PER_NODE", "8(x2)", NULL}};
    CHECK_OK(snn_dist_env_read(fake_get, &slurm, NULL, &env));
    CHECK(env.world_size == 0);
    CHECK_OK(snn_dist_env_read(fake_get, &slurm, "tcp://node1:29500", &env));
    CHECK(env.rank == 5 && env.world_size == 16 && env.local_rank == 5);
    CHECK(env.local_world_size == 16); /* "8(x2)" is not a plain number: left at the world */
    CHECK(strcmp(env.source, "Slurm") == 0);

    fake_env ompi = {{"OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "4",
                      "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "4", NULL}};
    CHECK_OK(snn_dist_env_read(fake_get, &ompi, "file:/tmp/x", &env));
    CHECK(env.rank == 1 && env.world_size == 4 && strcmp(env.source, "Open MPI") == 0);

    fake_env one = {{"RANK", "0", "WORLD_SIZE", "1", NULL}}; /* one rank needs no address */
    CHECK_OK(snn_dist_env_read(fake_get, &one, NULL, &env));
    CHECK(env.world_size == 1);

    fake_env bad = {{"RANK", "x", "WORLD_SIZE", "2", NULL}};
    CHECK(snn_dist_env_read(fake_get, &bad, "tcp://h:1", &env) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "RANK='x'") != NULL);
    fake_env out_of_range = {{"RANK", "2", "WORLD_SIZE", "2", NULL}};
    CHECK(snn_dist_env_read(fake_get, &out_of_range, "tcp://h:1", &env) == SNN_ERR_ARGUMENT);
    fake_env no_rank = {{"WORLD_SIZE", "2", NULL}};
    CHECK(snn_dist_env_read(fake_get, &no_rank, NULL, &env) == SNN_ERR_ARGUMENT);
    fake_env no_rdv = {{"RANK", "1", "WORLD_SIZE", "2", NULL}};
    CHECK(snn_dist_env_read(fake_get, &no_rdv, NULL, &env) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "--init") != NULL);
    snn_clear_error();
}

static void test_init_parse(void)
{
    snn_dist_init in;
    CHECK_OK(snn_dist_init_parse("tcp://node-01.cluster:29500", &in));
    CHECK(in.kind == SNN_DIST_INIT_TCP && strcmp(in.host, "node-01.cluster") == 0 && in.port == 29500);
    CHECK_OK(snn_dist_init_parse("tcp://[fe80::1]:80", &in));
    CHECK(strcmp(in.host, "fe80::1") == 0 && in.port == 80);
    CHECK_OK(snn_dist_init_parse("file:/shared/job/rdv", &in));
    CHECK(in.kind == SNN_DIST_INIT_FILE && strcmp(in.path, "/shared/job/rdv") == 0);
    CHECK_OK(snn_dist_init_parse("file:///shared/rdv", &in));
    CHECK(strcmp(in.path, "/shared/rdv") == 0);
    const char *bad[] = {"tcp://host", "tcp://:80", "tcp://h:99999", "tcp://h:8x", "udp://h:1",
                         "file:", "", "tcp://[::1]80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(snn_dist_init_parse(bad[i], &in) == SNN_ERR_ARGUMENT);
    snn_clear_error();
}

/* ---- bucket plan ------------------------------------------------------------------------------ */

static void test_bucket_plan(void)
{
    const int64_t numel[6] = {10, 100, 5, 1000, 3, 64};
    snn_bucket_plan p;
    CHECK_OK(snn_bucket_plan_make(numel, 6, 128, 64, &p));
    /* reverse order: the last parameter first, each start aligned, no overlap */
    CHECK(p.offset[5] == 0);
    for (int i = 0; i < 6; i++) {
        CHECK(p.offset[i] % 64 == 0);
        CHECK(p.offset[i] + numel[i] <= p.total);
        if (i > 0) CHECK(p.offset[i - 1] >= p.offset[i] + numel[i]);
    }
    /* buckets: contiguous, cover the buffer, each holds whole gradients, all but the last
     * >= 128 floats, and the counts add up */
    CHECK(p.bucket_begin[0] == 0 && p.bucket_begin[p.n_buckets] == p.total);
    int count = 0;
    for (int b = 0; b < p.n_buckets; b++) {
        CHECK(p.bucket_begin[b] < p.bucket_begin[b + 1]);
        if (b + 1 < p.n_buckets) CHECK(p.bucket_begin[b + 1] - p.bucket_begin[b] >= 128);
        count += p.bucket_params[b];
    }
    CHECK(count == 6);
    for (int i = 0; i < 6; i++) {
        int b = p.bucket[i];
        CHECK(p.offset[i] >= p.bucket_begin[b] && p.offset[i] + numel[i] <= p.bucket_begin[b + 1]);
        if (i > 0) CHECK(p.bucket[i - 1] >= b); /* earlier parameters, later buckets */
    }
    CHECK(p.bucket[3] != p.bucket[1]); /* 1000 floats close a bucket of their own */
    snn_bucket_plan_free(&p);

    /* one large bucket when the cap exceeds the model */
    CHECK_OK(snn_bucket_plan_make(numel, 6, 1 << 20, 1, &p));
    CHECK(p.n_buckets == 1 && p.total == 1182 && p.bucket_params[0] == 6);
    snn_bucket_plan_free(&p);
    CHECK_OK(snn_bucket_plan_make(NULL, 0, 16, 1, &p)); /* no parameters: no bucket */
    CHECK(p.n_buckets == 0 && p.total == 0);
    snn_bucket_plan_free(&p);
    CHECK(snn_bucket_plan_make(numel, 6, 0, 1, &p) == SNN_ERR_ARGUMENT);
    snn_clear_error();
}

/* ---- sharding ---------------------------------------------------------------------------------- */

static void test_shard_slice(void)
{
    /* every (count, batch, shards): the ranks' slices of global batch b tile it in rank order
     * and equal the unsharded slice with batch * shards */
    for (int64_t count = 1; count <= 40; count++)
        for (int batch = 1; batch <= 5; batch++)
            for (int shards = 1; shards <= 4; shards++) {
                int64_t nb = snn_shard_batches(count, batch, shards, false);
                int64_t nb1 = snn_shard_batches(count, batch * shards, 1, false);
                CHECK(nb == nb1 || (nb == nb1 - 1 && count % (batch * shards) < shards));
                for (int64_t b = 0; b < nb; b++) {
                    int64_t f1, n1, g1;
                    snn_shard_slice(count, batch * shards, 0, 1, b, &f1, &n1, &g1);
                    int64_t at = f1;
                    for (int r = 0; r < shards; r++) {
                        int64_t f, n, g;
                        snn_shard_slice(count, batch, r, shards, b, &f, &n, &g);
                        if (f != at || g != n1 || n < 1 || n > batch) {
                            CHECK(!"shard slice");
                            return;
                        }
                        at += n;
                    }
                    CHECK(at == f1 + n1);
                }
            }
    /* a short last batch splits evenly: 34 samples, 4 per rank, 3 ranks: global batches of
     * 12, 12 and 10; the last gives ranks 3, 3 and 4 samples */
    int64_t f, n, g;
    snn_shard_slice(34, 4, 2, 3, 2, &f, &n, &g);
    CHECK(g == 10 && n == 4 && f == 30);
    snn_shard_slice(34, 4, 0, 3, 2, &f, &n, &g);
    CHECK(n == 3 && f == 24);
    CHECK(snn_shard_batches(13, 4, 3, false) == 1);  /* 1 left over < 3 ranks: dropped */
    CHECK(snn_shard_batches(15, 4, 3, false) == 2);  /* 3 left over: one each */
    CHECK(snn_shard_batches(15, 4, 3, true) == 1);
}

/* The sharded loaders' batches side by side equal the unsharded loader's with batch x shards,
 * shuffled and augmented, bit for bit. */
static void test_sharded_loader(void)
{
    const int count = 53, C = 1, H = 6, W = 5, B = 4, S = 3;
    snn_dataset ds = {0};
    ds.count = count, ds.channels = C, ds.height = H, ds.width = W, ds.classes = 10;
    uint8_t *images = snn_alloc((size_t)count * C * H * W, SNN_CPU);
    uint8_t *labels = snn_alloc((size_t)count, SNN_CPU);
    for (int i = 0; i < count * C * H * W; i++) images[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < count; i++) labels[i] = (uint8_t)(i % 10);
    ds.images = images, ds.labels = labels;
    snn_loader_config one = snn_loader_config_default();
    one.batch_size = B * S;
    one.seed = 7;
    one.random_crop = one.horizontal_flip = true;
    one.crop_padding = 2;
    snn_loader *whole = snn_loader_new(&ds, &one);
    snn_loader *part[S];
    for (int r = 0; r < S; r++) {
        snn_loader_config c = one;
        c.batch_size = B;
        c.shard = r;
        c.shards = S;
        c.prefetch = r != 1; /* with and without the thread */
        part[r] = snn_loader_new(&ds, &c);
    }
    CHECK(whole && part[0] && part[1] && part[2]);
    const int64_t per_image = (int64_t)C * H * W;
    for (int epoch = 0; epoch < 2 && whole; epoch++) {
        CHECK(snn_loader_num_batches(part[0]) == snn_loader_num_batches(whole));
        snn_batch wb;
        while (snn_loader_next(whole, &wb)) {
            int at = 0;
            for (int r = 0; r < S; r++) {
                snn_batch pb;
                CHECK(snn_loader_next(part[r], &pb));
                CHECK(pb.global_count == wb.count && pb.index == wb.index && pb.epoch == wb.epoch);
                CHECK(memcmp(pb.images, wb.images + at * per_image,
                             (size_t)(pb.count * per_image) * sizeof(float)) == 0);
                CHECK(memcmp(pb.labels, wb.labels + at, (size_t)pb.count * sizeof(float)) == 0);
                at += pb.count;
            }
            CHECK(at == wb.count);
        }
        snn_batch end;
        for (int r = 0; r < S; r++) CHECK(!snn_loader_next(part[r], &end));
    }
    snn_loader_free(whole);
    for (int r = 0; r < S; r++) snn_loader_free(part[r]);
    snn_loader_config badc = one;
    badc.shard = 3, badc.shards = 3;
    CHECK(snn_loader_new(&ds, &badc) == NULL);
    snn_clear_error();
    snn_free(images, (size_t)count * C * H * W, SNN_CPU);
    snn_free(labels, (size_t)count, SNN_CPU);
}

/* ---- gradient views and the gradient-ready hook ------------------------------------------------ */

static void test_grad_views(void)
{
    snn_tensor *a = snn_tensor_new(SNN_SHAPE(2, 3), SNN_CPU), *b = snn_tensor_new(SNN_SHAPE(4), SNN_CPU);
    snn_tensor *storage = snn_tensor_new(SNN_SHAPE(16), SNN_CPU);
    snn_tensor_grad(a); /* an old gradient is replaced (and freed) */
    CHECK_OK(snn_tensor_set_grad_view(a, storage, 8));
    CHECK_OK(snn_tensor_set_grad_view(b, storage, 0));
    CHECK(a->grad->data == storage->data + 8 && b->grad->data == storage->data);
    snn_tensor_fill(a->grad, 2.0f);
    CHECK(storage->data[8] == 2.0f && storage->data[13] == 2.0f && storage->data[7] == 0.0f);
    CHECK(snn_tensor_set_grad_view(a, storage, 11) == SNN_ERR_ARGUMENT); /* past the end */
    CHECK(snn_tensor_set_grad_view(a, a->grad, 0) == SNN_ERR_ARGUMENT);  /* a view as storage */
    snn_clear_error();
    snn_tensor_free(a); /* frees the views, not the storage */
    snn_tensor_free(b);
    snn_tensor_free(storage);
}

typedef struct hook_log {
    snn_tensor *seen[8];
    float value[8]; /* the gradient's first element when the hook ran */
    int n;
} hook_log;

static void log_hook(void *ctx, snn_tensor *p)
{
    hook_log *log = ctx;
    if (log->n < 8) {
        log->seen[log->n] = p;
        log->value[log->n++] = p->grad ? p->grad->data[0] : -1e30f;
    }
}

static void test_grad_ready_hook(void)
{
    /* h = x w1^T; y = relu(h) w2^T + h w2^T + h w3^T: w2 is taken by two nodes, h feeds three;
     * an unused parameter gets no call */
    snn_rng rng;
    snn_rng_seed(&rng, 3);
    snn_tensor *w1 = snn_tensor_new(SNN_SHAPE(4, 3), SNN_CPU), *w2 = snn_tensor_new(SNN_SHAPE(2, 4), SNN_CPU);
    snn_tensor *w3 = snn_tensor_new(SNN_SHAPE(2, 4), SNN_CPU), *unused = snn_tensor_new(SNN_SHAPE(2), SNN_CPU);
    snn_tensor *ws[4] = {w1, w2, w3, unused};
    for (int i = 0; i < 4; i++) {
        snn_tensor_normal_(ws[i], &rng, 0.0f, 1.0f);
        ws[i]->requires_grad = true;
    }
    hook_log log = {{0}, {0}, 0};
    snn_step_begin();
    snn_tensor *x = snn_empty(SNN_SHAPE(5, 3), SNN_CPU);
    snn_tensor_normal_(x, &rng, 0.0f, 1.0f);
    snn_tensor *h = snn_linear(x, w1, NULL);
    snn_tensor *a = snn_linear(snn_relu(h), w2, NULL); /* one statement each: C leaves the */
    snn_tensor *b = snn_linear(h, w2, NULL);            /* order of arguments open, and the  */
    snn_tensor *c = snn_linear(h, w3, NULL);            /* tape records in execution order   */
    snn_tensor *y = snn_add(snn_add(a, b), c);
    snn_backward_set_hook(log_hook, &log);
    CHECK_OK(snn_backward(snn_sum_all(y)));
    snn_backward_set_hook(NULL, NULL);
    CHECK(log.n == 3);
    int pos[3] = {-1, -1, -1};
    for (int i = 0; i < log.n; i++)
        for (int k = 0; k < 3; k++)
            if (log.seen[i] == ws[k]) pos[k] = i;
    CHECK(pos[0] >= 0 && pos[1] >= 0 && pos[2] >= 0);
    CHECK(pos[0] > pos[1] && pos[0] > pos[2]); /* w1 last: every branch of h must be done */
    CHECK(pos[2] < pos[1]);                    /* w3's one node runs before w2's older one */
    for (int k = 0; k < 3; k++) /* the gradient was final when the hook ran */
        if (pos[k] >= 0) CHECK(log.value[pos[k]] == ws[k]->grad->data[0]);
    snn_step_end();
    for (int i = 0; i < 4; i++) snn_tensor_free(ws[i]);
}

/* ---- forked ranks ----------------------------------------------------------------------------- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

typedef int (*rank_fn)(int rank, int world, const char *init, void *ctx);

/* Runs fn as `world` forked ranks; returns how many exited with a code other than `want`
 * (want[r], or 0 for all when want is NULL). */
static int run_ranks(int world, const char *init, rank_fn fn, void *ctx, const int *want)
{
    pid_t pids[8];
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(60); /* a hang fails the test instead of blocking ctest */
            snn_clear_error();
            int code = fn(r, world, init, ctx);
            if (code != (want ? want[r] : 0))
                fprintf(stderr, "  rank %d: exit %d; last error: %s\n", r, code, snn_last_error());
            _exit(code);
        }
    }
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
        if (code != (want ? want[r] : 0)) {
            fprintf(stderr, "  rank %d exited with %d, expected %d\n", r, code, want ? want[r] : 0);
            bad++;
        }
    }
    return bad;
}

static snn_dist *join(int rank, int world, const char *init, double timeout)
{
    snn_dist_config c = snn_dist_config_default();
    c.rank = rank, c.world_size = world, c.local_rank = rank, c.init = init, c.device = SNN_CPU;
    c.timeout_s = timeout;
    return snn_dist_new(&c);
}

static int collectives_rank(int rank, int world, const char *init, void *ctx)
{
    (void)ctx;
    snn_dist *d = join(rank, world, init, 20.0);
    if (!d) return 2;
    int bad = 0;
    double v[2] = {rank + 1.0, 2.0 * rank};
    bad |= snn_dist_allreduce_host(d, v, 2) != SNN_OK;
    double s1 = world * (world + 1) / 2.0, s2 = world * (world - 1.0);
    bad |= v[0] != s1 || v[1] != s2;
    float buf[3] = {0.5f * (float)rank, 1.0f, -1.0f};
    bad |= snn_dist_allreduce(d, buf, 3) != SNN_OK;
    bad |= buf[1] != (float)world;
    bad |= snn_dist_rank(d) != rank || snn_dist_world_size(d) != world;
    bad |= strcmp(snn_dist_backend(d), "tcp") != 0;
    snn_dist_free(d);
    return bad ? 3 : 0;
}

static void test_rendezvous_and_collectives(void)
{
    char init[300];
    snprintf(init, sizeof init, "tcp://127.0.0.1:%d", free_port());
    CHECK(run_ranks(3, init, collectives_rank, NULL, NULL) == 0);
    char dir[] = "/tmp/snn_dist_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(init, sizeof init, "file:%s/rendezvous", dir);
    CHECK(run_ranks(2, init, collectives_rank, NULL, NULL) == 0);
    char path[300];
    snprintf(path, sizeof path, "%s/rendezvous", dir);
    CHECK(access(path, F_OK) != 0); /* rank 0 removed the file */
    /* a stale file is refused by rank 0, with a hint */
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("snn-rendezvous 1 2 nowhere 1\n", f);
        fclose(f);
    }
    snn_dist *d = join(0, 2, init, 1.0);
    CHECK(d == NULL && strstr(snn_last_error(), "already exists") != NULL);
    unlink(path);
    rmdir(dir);
    d = join(0, 1, "tcp://127.0.0.1:0", 1.0); /* world 1 meets nobody */
    CHECK(d != NULL);
    snn_dist_free(d);
    snn_clear_error();
}

static int mismatch_rank(int rank, int world, const char *init, void *ctx)
{
    (void)ctx;
    /* rank 1 believes in a world of 3 */
    snn_dist *d = join(rank, rank == 1 ? 3 : world, init, 10.0);
    if (d) {
        snn_dist_free(d);
        return 0;
    }
    return strstr(snn_last_error(), "world") ? 5 : 6;
}

static int lonely_rank(int rank, int world, const char *init, void *ctx)
{
    (void)ctx;
    if (rank == 1) return 0; /* never comes */
    snn_dist *d = join(rank, world, init, 1.0);
    if (d) {
        snn_dist_abort(d);
        return 0;
    }
    return strstr(snn_last_error(), "never came") ? 5 : 6;
}

static int dying_rank(int rank, int world, const char *init, void *ctx)
{
    (void)ctx;
    snn_dist *d = join(rank, world, init, 20.0);
    if (!d) return 2;
    if (rank == 1) raise(SIGKILL); /* dies right after joining */
    double v = 1.0;
    snn_status st = snn_dist_allreduce_host(d, &v, 1);
    snn_dist_abort(d);
    return st != SNN_OK && strstr(snn_last_error(), "rank 1") ? 5 : 6;
}

static void test_faults(void)
{
    char init[64];
    snprintf(init, sizeof init, "tcp://127.0.0.1:%d", free_port());
    const int mismatch[2] = {5, 5};
    CHECK(run_ranks(2, init, mismatch_rank, NULL, mismatch) == 0);
    snprintf(init, sizeof init, "tcp://127.0.0.1:%d", free_port());
    const int lonely[2] = {5, 0};
    CHECK(run_ranks(2, init, lonely_rank, NULL, lonely) == 0);
    snprintf(init, sizeof init, "tcp://127.0.0.1:%d", free_port());
    const int dying[2] = {5, 100 + SIGKILL};
    CHECK(run_ranks(2, init, dying_rank, NULL, dying) == 0);
}

/* ---- the reducer: two ranks = one process with the whole batch ---------------------------------- */

enum { RB = 6, RIN = 2, RHW = 5 }; /* whole batch, channels, image side */

static snn_module *small_model(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 42);
    snn_module *m = snn_sequential_new();
    snn_module_add(m, "conv", snn_conv2d_new(RIN, 4, 3, 1, 1, false, &rng));
    snn_module_add(m, "bn", snn_batchnorm2d_new(4));
    snn_module_add(m, "flat", snn_flatten_new(1, -1));
    snn_module_add(m, "fc", snn_linear_new(4 * RHW * RHW, 3, true, &rng));
    snn_module_train(m, true);
    return m;
}

/* the batch: images and labels of the whole batch, rows [first, first + n) */
static void batch_rows(float *images, float *labels, int first, int n)
{
    snn_rng rng;
    snn_rng_seed(&rng, 9);
    const int per = RIN * RHW * RHW;
    for (int i = 0; i < RB * per; i++) {
        float v = snn_rng_normal(&rng);
        if (i >= first * per && i < (first + n) * per) images[i - first * per] = v;
    }
    for (int i = 0; i < n; i++) labels[i] = (float)((first + i) % 3);
}

/* gradients (trainable, model order) after one step on rows [first, first + n) */
static snn_status model_grads(snn_module *m, snn_dist *d, int first, int n, float *out)
{
    float images[RB * RIN * RHW * RHW], labels[RB];
    batch_rows(images, labels, first, n);
    snn_step_begin();
    snn_module_zero_grad(m);
    snn_tensor *x = snn_from_host(SNN_SHAPE(n, RIN, RHW, RHW), images, SNN_CPU);
    snn_tensor *y = snn_from_host(SNN_SHAPE(n), labels, SNN_CPU);
    snn_tensor *loss = snn_cross_entropy(snn_module_forward(m, x), y);
    snn_status st = !loss ? snn_last_status() : d ? snn_dist_backward(d, loss, n, RB) : snn_backward(loss);
    snn_step_end();
    snn_param_list list;
    if (st == SNN_OK) st = snn_module_parameters(m, &list);
    if (st != SNN_OK) return st;
    int k = 0;
    for (int i = 0; i < list.count; i++)
        if (list.items[i].trainable)
            for (int64_t j = 0; j < list.items[i].tensor->numel; j++)
                out[k++] = list.items[i].tensor->grad->data[j];
    snn_param_list_free(&list);
    return SNN_OK;
}

#define MAX_GRADS 2048

static int reducer_rank(int rank, int world, const char *init, void *ctx)
{
    const float *want = ctx;
    snn_dist_config c = snn_dist_config_default();
    c.rank = rank, c.world_size = world, c.init = init, c.device = SNN_CPU, c.timeout_s = 20.0;
    c.bucket_bytes = 64; /* a bucket per parameter or two: many hooks, many sends */
    c.sync_batchnorm = true;
    snn_dist *d = snn_dist_new(&c);
    if (!d) return 2;
    snn_module *m = small_model();
    if (snn_dist_attach(d, m) != SNN_OK) return 3;
    static float got[MAX_GRADS];
    /* rank 0 has rows 0..1, rank 1 rows 2..5: an uneven split of one global batch */
    int first = rank == 0 ? 0 : 2, n = rank == 0 ? 2 : 4;
    if (model_grads(m, d, first, n, got) != SNN_OK) return 4;
    int64_t total = snn_module_num_parameters(m);
    long where = 0;
    double worst = test_worst_ratio(got, want, (long)total, 1e-6, 1e-5, &where);
    if (!(worst <= 1.0))
        fprintf(stderr, "  rank %d: gradient %ld: %.9g, one process %.9g\n", rank, where,
                (double)got[where], (double)want[where]);
    bool replicas = snn_dist_check_replicas(d, m) == SNN_OK;
    snn_module_free(m);
    snn_dist_free(d);
    return worst <= 1.0 && replicas ? 0 : 5;
}

static void test_reducer_matches_one_process(void)
{
    static float want[MAX_GRADS];
    snn_module *m = small_model();
    CHECK(snn_module_num_parameters(m) <= MAX_GRADS);
    CHECK_OK(model_grads(m, NULL, 0, RB, want));
    snn_module_free(m);
    char init[64];
    snprintf(init, sizeof init, "tcp://127.0.0.1:%d", free_port());
    CHECK(run_ranks(2, init, reducer_rank, want, NULL) == 0);
}

int main(void)
{
    snn_set_num_threads(1); /* no OpenMP pool to carry into forked ranks */
    RUN(test_env);
    RUN(test_init_parse);
    RUN(test_bucket_plan);
    RUN(test_shard_slice);
    RUN(test_sharded_loader);
    RUN(test_grad_views);
    RUN(test_grad_ready_hook);
    RUN(test_rendezvous_and_collectives);
    RUN(test_faults);
    RUN(test_reducer_matches_one_process);
    return test_finish();
}
