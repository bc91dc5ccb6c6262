/*
 * test_tensor.c - the tensor type, both lifetimes, steps, the allocator and error messages.
 * Run: ctest --test-dir build -R '^tensor$'   (or build/bin/test_tensor)
 */
#include <string.h>

#include "snn.h"
#include "tensor/arena.h"
#include "test.h"

static void test_shapes(void)
{
    snn_shape s = SNN_SHAPE(2, 3, 4);
    CHECK(s.ndim == 3);
    CHECK(snn_shape_numel(s) == 24);
    CHECK(snn_shape_equal(s, SNN_SHAPE(2, 3, 4)));
    CHECK(!snn_shape_equal(s, SNN_SHAPE(2, 3)));
    CHECK(!snn_shape_equal(s, SNN_SHAPE(2, 3, 5)));
    char buf[32];
    CHECK(strcmp(snn_shape_str(s, buf, sizeof buf), "[2, 3, 4]") == 0);
    CHECK(strcmp(snn_shape_str(SNN_SHAPE(7), buf, sizeof buf), "[7]") == 0);
    /* a too-small buffer is truncated, never overrun */
    char tiny[5];
    snn_shape_str(SNN_SHAPE(1000, 1000), tiny, sizeof tiny);
    CHECK(strlen(tiny) == 4);
}

static void test_owned(void)
{
    size_t before = snn_live_bytes(SNN_CPU);
    snn_tensor *t = snn_tensor_new(SNN_SHAPE(3, 5), SNN_CPU);
    CHECK(t && t->numel == 15 && t->lifetime == SNN_OWNED && !t->requires_grad);
    for (int i = 0; i < 15; i++) CHECK(t->data[i] == 0.0f);
    CHECK(snn_live_bytes(SNN_CPU) > before);
    snn_tensor *g = snn_tensor_grad(t);
    CHECK(g && g == t->grad && g->numel == 15);
    snn_tensor_free(t);
    snn_tensor_free(NULL);
    CHECK(snn_live_bytes(SNN_CPU) == before);
}

static void test_step_tensors(void)
{
    CHECK(snn_step_depth() == 0);
    /* outside a step, step tensors are refused with a message that says what to do */
    CHECK(snn_zeros(SNN_SHAPE(2), SNN_CPU) == NULL);
    CHECK(snn_last_status() == SNN_ERR_STATE);
    CHECK(strstr(snn_last_error(), "snn_step_begin") != NULL);
    snn_clear_error();

    CHECK_OK(snn_step_begin());
    uint64_t outer = snn_step_id();
    float host[6] = {1, 2, 3, 4, 5, 6};
    snn_tensor *a = snn_from_host(SNN_SHAPE(2, 3), host, SNN_CPU);
    snn_tensor *f = snn_full(SNN_SHAPE(4), 2.5f, SNN_CPU);
    CHECK(a && a->lifetime == SNN_STEP && a->data[5] == 6.0f);
    CHECK(f && f->data[0] == 2.5f && f->data[3] == 2.5f);
    CHECK(snn_tensor_item(f) != snn_tensor_item(f) || 1); /* not a scalar: NaN and a message */
    CHECK(isnan(snn_tensor_item(f)) && snn_last_status() == SNN_ERR_ARGUMENT);
    snn_clear_error();

    CHECK_OK(snn_step_begin()); /* nested step */
    uint64_t inner = snn_step_id();
    CHECK(inner != outer && snn_step_is_open(inner) && snn_step_is_open(outer));
    snn_tensor *b = snn_to_device(a, SNN_CPU);
    CHECK(b && b->data != a->data && b->data[4] == 5.0f);
    snn_step_end();
    CHECK(!snn_step_is_open(inner) && snn_step_is_open(outer));
    /* the outer step's tensors are untouched by the inner step's end */
    CHECK(a->data[0] == 1.0f && f->data[2] == 2.5f);
    float back[6];
    CHECK_OK(snn_tensor_copy_to_host(a, back));
    CHECK(back[2] == 3.0f);
    snn_step_end();
    CHECK(snn_step_depth() == 0);
}

static void test_bad_arguments(void)
{
    CHECK_OK(snn_step_begin());
    CHECK(snn_empty(SNN_SHAPE(2, -1), SNN_CPU) == NULL);
    CHECK(strstr(snn_last_error(), "negative size") != NULL);
    snn_clear_error();
    snn_shape too_many = {.ndim = 7};
    CHECK(snn_empty(too_many, SNN_CPU) == NULL && snn_last_status() == SNN_ERR_ARGUMENT);
    snn_clear_error();
    if (!snn_cuda_available()) {
        CHECK(snn_empty(SNN_SHAPE(2), SNN_CUDA) == NULL);
        CHECK(snn_last_status() == SNN_ERR_UNSUPPORTED);
        CHECK(strstr(snn_last_error(), "cuda") || strstr(snn_last_error(), "CUDA"));
        snn_clear_error();
    }
    snn_device d;
    CHECK(snn_device_parse("cuda", &d) == SNN_OK && d == SNN_CUDA);
    CHECK(snn_device_parse("tpu", &d) == SNN_ERR_ARGUMENT);
    CHECK(strstr(snn_last_error(), "tpu") != NULL);
    snn_clear_error();
    snn_step_end();
}

static void test_allocation_failure(void)
{
    size_t before = snn_live_bytes(SNN_CPU);
    snn_alloc_fail_after(1);
    CHECK(snn_alloc(16, SNN_CPU) == NULL);
    void *p = snn_alloc(16, SNN_CPU); /* the hook fires once */
    CHECK(p != NULL);
    snn_free(p, 16, SNN_CPU);
    /* the data allocation of an owned tensor fails: the struct is released, message set */
    snn_alloc_fail_after(2);
    CHECK(snn_tensor_new(SNN_SHAPE(4, 4), SNN_CPU) == NULL);
    CHECK(snn_last_status() == SNN_ERR_MEMORY && strstr(snn_last_error(), "snn_tensor_new"));
    snn_clear_error();
    CHECK(snn_live_bytes(SNN_CPU) == before);
    /* the step arena needs a new block and cannot have it */
    snn_step_begin();
    snn_alloc_fail_after(1);
    CHECK(snn_zeros(SNN_SHAPE(1 << 22), SNN_CPU) == NULL); /* 16 MB: beyond the first block */
    CHECK(snn_last_status() == SNN_ERR_MEMORY);
    snn_clear_error();
    snn_alloc_fail_after(0);
    snn_step_end();
}

static void test_arena_reuse(void)
{
    /* After the first step the arena is one block big enough: later steps allocate nothing. */
    for (int step = 0; step < 3; step++) {
        snn_step_begin();
        for (int i = 0; i < 20; i++) CHECK(snn_zeros(SNN_SHAPE(50000), SNN_CPU) != NULL);
        snn_step_end();
    }
    uint64_t count = snn_alloc_count();
    size_t live = snn_live_bytes(SNN_CPU);
    for (int step = 0; step < 5; step++) {
        snn_step_begin();
        for (int i = 0; i < 20; i++) CHECK(snn_zeros(SNN_SHAPE(50000), SNN_CPU) != NULL);
        snn_step_end();
    }
    CHECK(snn_alloc_count() == count);
    CHECK(snn_live_bytes(SNN_CPU) == live);
    CHECK(snn_arena_reserved_bytes(SNN_CPU) >= 20u * 50000u * sizeof(float));
}

/* One step of `count` tensors of `floats` floats each (the CPU arena holds struct and data);
 * true when all were had. */
static bool arena_step(int count, int64_t floats)
{
    bool ok = snn_step_begin() == SNN_OK;
    for (int i = 0; ok && i < count; i++) ok = snn_empty(SNN_SHAPE(floats), SNN_CPU) != NULL;
    snn_step_end();
    return ok;
}

/* The arena's growth, as a long-T run meets it: a step that needs a little more than the block
 * of earlier steps must take a little more, not a new block of twice the old one while the old
 * one is held (on an 80 GB H100, a 29 GB arena asked for 58 GB more when the sparse pass of a
 * converted ResNet-18 needed ~30 GB: docs/ann2snn.md, section 5). */
static void test_arena_growth(void)
{
    enum { FLOATS = 100000 };
    snn_shutdown(); /* an empty arena */
    const size_t tensor_bytes = (sizeof(snn_tensor) + 63) / 64 * 64 +
                                (size_t)FLOATS * sizeof(float); /* struct + data, 64-B aligned */
    const size_t mib = (size_t)1 << 20;
    /* 1. from nothing: 1 MiB, 2, 4, ... blocks, merged at the end into one block of what the
     *    step had in use (whole MiB), without the unused ends of the blocks it grew through */
    CHECK(arena_step(40, FLOATS));
    CHECK(snn_step_peak_bytes(SNN_CPU) == 40 * tensor_bytes);
    const size_t block = snn_arena_reserved_bytes(SNN_CPU);
    CHECK(block == (40 * tensor_bytes + mib - 1) / mib * mib);
    /* 2. half as much again: the old block stays (its tensors live there) and blocks of an
     *    eighth of it, a quarter, a half are added as needed, not one of twice it (that made the
     *    step hold 3x the old block) */
    size_t live = snn_live_bytes(SNN_CPU);
    snn_reset_peak_bytes(SNN_CPU);
    CHECK(arena_step(60, FLOATS));
    CHECK(snn_peak_bytes(SNN_CPU) - live <= block);
    CHECK(snn_step_peak_bytes(SNN_CPU) == 60 * tensor_bytes);
    CHECK(snn_arena_reserved_bytes(SNN_CPU) == (60 * tensor_bytes + mib - 1) / mib * mib);
    /* 3. the same step again: no allocation at all */
    uint64_t count = snn_alloc_count();
    CHECK(arena_step(60, FLOATS));
    CHECK(snn_alloc_count() == count);
    /* 4. a first allocation larger than the block: the block holds nothing yet, so it is given
     *    back before the larger one is taken (the two were held together before) */
    const size_t held = snn_arena_reserved_bytes(SNN_CPU);
    live = snn_live_bytes(SNN_CPU);
    snn_reset_peak_bytes(SNN_CPU);
    CHECK(snn_step_begin() == SNN_OK);
    CHECK(snn_step_alloc("test_arena_growth", 3 * held, SNN_CPU) != NULL);
    snn_step_end();
    CHECK(snn_peak_bytes(SNN_CPU) == live - held + 3 * held);
    /* 5. a device nearly full: the block the policy wants cannot be had, so a smaller one is
     *    taken, down to the bytes asked for */
    const size_t big = snn_arena_reserved_bytes(SNN_CPU); /* one block, 3 held */
    snn_alloc_limit(SNN_CPU, snn_live_bytes(SNN_CPU) + 2 * tensor_bytes);
    CHECK(big / 8 > 2 * tensor_bytes); /* so the policy's block is refused */
    CHECK(snn_step_begin() == SNN_OK);
    CHECK(snn_step_alloc("test_arena_growth", big, SNN_CPU) != NULL); /* fills it */
    CHECK(snn_empty(SNN_SHAPE(FLOATS), SNN_CPU) != NULL);
    CHECK(snn_arena_reserved_bytes(SNN_CPU) > big);
    /* 6. and none at all: the message names the block the arena asked for, not only the bytes */
    CHECK(snn_empty(SNN_SHAPE(8 * FLOATS), SNN_CPU) == NULL);
    CHECK(snn_last_status() == SNN_ERR_MEMORY);
    CHECK(strstr(snn_last_error(), "could not add a block of") != NULL);
    snn_clear_error();
    snn_step_end();
    snn_alloc_limit(SNN_CPU, 0);
    snn_shutdown();
}

/* The step pool's profile (tensor/step_pool.c): what was in use at the pool's high-water, by
 * the name each block was taken under and the op whose backward took it. */
typedef struct pool_rows {
    const char *fn[4], *op[4];
    size_t bytes[4];
    int count[4], n;
} pool_rows;

static void pool_row(const char *fn, const char *backward_op, size_t bytes, int count,
                     void *ctx)
{
    pool_rows *r = ctx;
    if (r->n == 4) return;
    r->fn[r->n] = fn, r->op[r->n] = backward_op, r->bytes[r->n] = bytes, r->count[r->n] = count;
    r->n++;
}

static void test_step_pool_profile(void)
{
    snn_step_pool_release_all(); /* no free block of an earlier test serves these */
    snn_arena_profile(true);
    snn_step_pool_reset_peak(SNN_CPU);
    snn_step_begin();
    void *a = snn_step_pool_alloc("a", 1000, SNN_CPU);   /* 1024 B blocks (256-byte rounding) */
    void *b = snn_step_pool_alloc("b", 3000, SNN_CPU);   /* 3072: the peak is 4096 */
    snn_step_pool_release(a, SNN_CPU);
    CHECK(snn_step_pool_backward_op("op_x") == NULL); /* none named before */
    void *g = snn_step_pool_alloc("gradient", 5000, SNN_CPU); /* a new block: 8192, a new peak */
    const char *named = snn_step_pool_backward_op(NULL);
    CHECK(named && strcmp(named, "op_x") == 0);
    snn_step_pool_release(g, SNN_CPU);
    CHECK(snn_step_pool_alloc("c", 100, SNN_CPU) != NULL); /* 4096 in use: no new peak */
    CHECK(b && g && snn_step_pool_peak_bytes(SNN_CPU) == 8192);
    pool_rows r = {.n = 0};
    snn_step_pool_profile_report_peak(SNN_CPU, pool_row, &r);
    CHECK(r.n == 2);
    for (int i = 0; i < r.n; i++) {
        const bool is_b = strcmp(r.fn[i], "b") == 0;
        CHECK(is_b ? !r.op[i] && r.bytes[i] == 3072 && r.count[i] == 1
                   : strcmp(r.fn[i], "gradient") == 0 && r.op[i] && strcmp(r.op[i], "op_x") == 0 &&
                         r.bytes[i] == 5120 && r.count[i] == 1);
    }
    snn_step_end();
    snn_arena_profile(false);
}

static void test_rng(void)
{
    snn_rng a, b;
    snn_rng_seed(&a, 42);
    snn_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) CHECK(snn_rng_u64(&a) == snn_rng_u64(&b));
    snn_rng_seed(&b, 43);
    CHECK(snn_rng_u64(&a) != snn_rng_u64(&b));
    double sum = 0.0, sumsq = 0.0;
    int below = 0, n = 100000;
    for (int i = 0; i < n; i++) {
        float u = snn_rng_uniform(&a);
        CHECK(u >= 0.0f && u < 1.0f);
        float z = snn_rng_normal(&a);
        sum += (double)z;
        sumsq += (double)z * (double)z;
        below += snn_rng_below(&a, 10) < 5;
    }
    /* 5 standard errors: mean 0 +- 0.016, variance 1 +- 0.022, half below 5 +- 0.008 */
    CHECK(fabs(sum / n) < 0.016);
    CHECK(fabs(sumsq / n - 1.0) < 0.022);
    CHECK(fabs((double)below / n - 0.5) < 0.008);
}

int main(void)
{
    RUN(test_shapes);
    RUN(test_owned);
    RUN(test_step_tensors);
    RUN(test_bad_arguments);
    RUN(test_allocation_failure);
    RUN(test_arena_reuse);
    RUN(test_arena_growth);
    RUN(test_step_pool_profile);
    RUN(test_rng);
    return test_finish();
}
