/*
 * test_schedule.c - learning-rate schedules (nn/schedule.c) against values worked out by hand.
 * Run: ctest --test-dir build -R '^schedule$'   (or build/bin/test_schedule)
 */
#include "snn.h"
#include "test.h"

static void test_constant(void)
{
    snn_schedule s = {.kind = SNN_SCHEDULE_CONSTANT, .base_lr = 0.05f};
    CHECK(snn_schedule_lr(&s, 0) == 0.05f);
    CHECK(snn_schedule_lr(&s, 123456) == 0.05f);
    CHECK(snn_schedule_lr(&s, -1) == 0.05f);
}

/* base 0.1, min 0.001, 10 warm-up steps, 110 in all: the cosine part spans 100 steps */
static void test_cosine(void)
{
    snn_schedule s = {.kind = SNN_SCHEDULE_COSINE, .base_lr = 0.1f, .warmup_steps = 10,
                      .total_steps = 110, .min_lr = 0.001f};
    /* warm-up: base * step / warmup */
    CHECK(snn_schedule_lr(&s, 0) == 0.0f);
    CHECK_CLOSE(snn_schedule_lr(&s, 1), 0.01, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 5), 0.05, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 9), 0.09, 0, 1e-6);
    /* the end of warm-up is the top of the cosine: cos(0) = 1 */
    CHECK_CLOSE(snn_schedule_lr(&s, 10), 0.1, 0, 1e-6);
    /* a quarter of the way: min + (base - min)(1 + cos(pi/4))/2 = 0.001 + 0.099 * 0.853553 */
    CHECK_CLOSE(snn_schedule_lr(&s, 35), 0.0855017856687341, 0, 1e-6);
    /* half way: cos(pi/2) = 0, so (base + min)/2 */
    CHECK_CLOSE(snn_schedule_lr(&s, 60), 0.0505, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 85), 0.0154982143312659, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 109), 0.0010244252618962857, 0, 1e-6);
    /* clamped at total and beyond */
    CHECK(snn_schedule_lr(&s, 110) == 0.001f);
    CHECK(snn_schedule_lr(&s, 1000000) == 0.001f);
    /* never rises after warm-up */
    for (int64_t k = 11; k <= 110; k++) CHECK(snn_schedule_lr(&s, k) <= snn_schedule_lr(&s, k - 1));
    /* negative steps count as 0 */
    CHECK(snn_schedule_lr(&s, -5) == 0.0f);
}

static void test_cosine_edges(void)
{
    /* no warm-up: starts at base, half way at (base + min) / 2 */
    snn_schedule s = {.kind = SNN_SCHEDULE_COSINE, .base_lr = 1.0f, .warmup_steps = 0,
                      .total_steps = 4, .min_lr = 0.0f};
    CHECK(snn_schedule_lr(&s, 0) == 1.0f);
    CHECK_CLOSE(snn_schedule_lr(&s, 1), 0.8535533905932737, 0, 1e-6); /* (1 + cos(pi/4))/2 */
    CHECK_CLOSE(snn_schedule_lr(&s, 2), 0.5, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 3), 0.14644660940672627, 0, 1e-6);
    CHECK(snn_schedule_lr(&s, 4) == 0.0f);
    /* total <= warmup: warm up, then the minimum */
    snn_schedule t = {.kind = SNN_SCHEDULE_COSINE, .base_lr = 0.1f, .warmup_steps = 10,
                      .total_steps = 5, .min_lr = 0.002f};
    CHECK_CLOSE(snn_schedule_lr(&t, 3), 0.03, 0, 1e-6);
    CHECK(snn_schedule_lr(&t, 10) == 0.002f);
    CHECK(snn_schedule_lr(&t, 50) == 0.002f);
}

/* StepLR: base * gamma^floor(step / step_size) */
static void test_step(void)
{
    snn_schedule s = {.kind = SNN_SCHEDULE_STEP, .base_lr = 0.1f, .step_size = 30, .gamma = 0.1f};
    CHECK_CLOSE(snn_schedule_lr(&s, 0), 0.1, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 29), 0.1, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 30), 0.01, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 59), 0.01, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 60), 0.001, 0, 1e-6);
    CHECK_CLOSE(snn_schedule_lr(&s, 95), 0.0001, 0, 1e-6);
    snn_schedule half = {.kind = SNN_SCHEDULE_STEP, .base_lr = 2.0f, .step_size = 1, .gamma = 0.5f};
    CHECK(snn_schedule_lr(&half, 3) == 0.25f);
    /* step_size <= 0: the base rate throughout */
    snn_schedule off = {.kind = SNN_SCHEDULE_STEP, .base_lr = 0.3f, .step_size = 0, .gamma = 0.5f};
    CHECK(snn_schedule_lr(&off, 100) == 0.3f);
}

int main(void)
{
    RUN(test_constant);
    RUN(test_cosine);
    RUN(test_cosine_edges);
    RUN(test_step);
    return test_finish();
}
