/*
 * test_neurons_stbif.c - ST-BIF is the L-level quantizer it replaces, exactly (kernels/cpu/stbif.c).
 *
 * ST-BIF keeps the invariant V/theta + A = 1/2 + (sum of inputs)/theta. Once the input stops
 * changing, each step moves A one level towards clip(floor(X/theta + 1/2), A_min, A_max), where
 * X is the summed input, and then stays. So with the input delivered over the first few steps
 * and enough silent steps after it, the summed output must equal
 *     theta * clip(floor(X / theta + 0.5), A_min, A_max)
 * exactly. Inputs are multiples of 1/64 and theta a power of two, so every sum is exact in float
 * and the comparison is ==. Levels 4, 8, 16, unsigned [0, L-1] and symmetric [-L/2, L/2-1],
 * theta 1, 0.5 and 2, inputs spread over 1 to 4 steps with mixed signs; summed X includes
 * values far outside the range (both clips), and exact ties X/theta + 1/2 = integer.
 * The same through the single-step API, with the state carried between calls.
 * Run: ctest -R neurons_stbif
 */
#include <math.h>

#include "neurons/neurons.h"
#include "test.h"

static void check_quantizer(int levels, bool symmetric, float theta, uint64_t seed)
{
    enum { N = 40, F = 50, M = N * F, T_IN = 4 };
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_STBIF);
    c.levels = levels;
    c.symmetric = symmetric;
    c.theta = theta;
    int amin, amax;
    snn_stbif_bounds(&c, &amin, &amax);
    CHECK(amax - amin == levels - 1);
    /* After the input: at most |A| moves of one level to reach the target from wherever the
     * input phase left A, i.e. L - 1 steps, plus a margin. */
    const int T = T_IN + levels + 2;

    snn_rng rng;
    snn_rng_seed(&rng, seed);
    CHECK_OK(snn_step_begin());
    snn_tensor *x = snn_zeros(SNN_SHAPE(T, N, F), SNN_CPU); /* (T, N, F) */
    float X[M];                                            /* summed input per element */
    for (int i = 0; i < M; i++) {
        int steps = 1 + (int)snn_rng_below(&rng, T_IN);    /* input over 1..4 steps */
        X[i] = 0.0f;
        for (int t = 0; t < steps; t++) {
            /* multiples of 1/64 in about [-(L+2) theta, (L+2) theta] / steps */
            int64_t span = (int64_t)((float)(levels + 2) * theta * 64.0f);
            float v = (float)((int64_t)snn_rng_below(&rng, (uint64_t)(2 * span + 1)) - span) / 64.0f;
            if (i % 17 == 0) v = (float)(i % 5) * theta * 0.5f; /* ties: X/theta + 1/2 integer */
            x->data[t * M + i] = v;
            X[i] += v;
        }
    }
    snn_tensor *y = snn_neuron_multistep(x, &c, NULL, NULL);
    CHECK(y != NULL);
    int bad = 0, bad_step = 0, clipped_lo = 0, clipped_hi = 0;
    snn_neuron_state st = {0};
    float sum_step[M] = {0};
    for (int t = 0; t < T && y; t++) {
        snn_tensor *xt = snn_from_host(SNN_SHAPE(N, F), x->data + t * M, SNN_CPU);
        snn_tensor *yt = snn_neuron_step(xt, &c, NULL, &st, NULL);
        CHECK(yt != NULL);
        if (!yt) break;
        for (int i = 0; i < M; i++) {
            bad_step += yt->data[i] != y->data[t * M + i];
            sum_step[i] += yt->data[i];
        }
    }
    for (int i = 0; i < M && y; i++) {
        float sum = 0.0f;
        for (int t = 0; t < T; t++) sum += y->data[t * M + i];
        float q = floorf(X[i] / theta + 0.5f);
        clipped_lo += q < (float)amin;
        clipped_hi += q > (float)amax;
        q = fminf(fmaxf(q, (float)amin), (float)amax);
        float want = theta * q;
        if (sum != want) {
            if (bad < 5)
                fprintf(stderr, "L=%d sym=%d theta=%g elem %d: X=%g sum=%g want=%g\n", levels,
                        symmetric, (double)theta, i, (double)X[i], (double)sum, (double)want);
            bad++;
        }
        bad_step += sum_step[i] != sum;
        /* the state holds the invariant at the end: V/theta + A = 1/2 + X/theta */
        if (st.v && st.a)
            bad += st.v->data[i] / theta + st.a->data[i] != 0.5f + X[i] / theta;
    }
    CHECK(bad == 0);
    CHECK(bad_step == 0);
    CHECK(clipped_lo > 0 && clipped_hi > 0); /* both clips exercised */
    snn_step_end();
}

static void test_quantizer_equivalence(void)
{
    const int levels[3] = {4, 8, 16};
    const float thetas[3] = {1.0f, 0.5f, 2.0f};
    uint64_t seed = 7;
    for (int il = 0; il < 3; il++)
        for (int sym = 0; sym < 2; sym++)
            for (int it = 0; it < 3; it++) check_quantizer(levels[il], sym != 0, thetas[it], seed++);
}

/* Too few silent steps: the sum has not reached the target yet (the test above is not vacuous). */
static void test_needs_enough_steps(void)
{
    snn_neuron_config c = snn_neuron_config_default(SNN_NEURON_STBIF);
    c.levels = 16;
    CHECK_OK(snn_step_begin());
    const float x[3] = {9.0f, 0.0f, 0.0f}; /* target 9 levels, 3 steps give at most 3 */
    snn_tensor *xt = snn_from_host(SNN_SHAPE(3, 1), x, SNN_CPU);
    snn_tensor *y = snn_neuron_multistep(xt, &c, NULL, NULL);
    CHECK(y && y->data[0] + y->data[1] + y->data[2] == 3.0f);
    snn_step_end();
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_quantizer_equivalence);
    RUN(test_needs_enough_steps);
    return test_finish();
}
