/*
 * test_gemm.c - the CPU SGEMM (kernels/cpu/gemm.c): the blocked, threaded snn_gemm_cpu and the
 * reference triple loop snn_gemm_ref (kernels/ref/gemm.c) against a double-precision
 * reference, on a hand-computed case and on many random shapes (1x1, odd sizes, sizes that
 * cross every block edge, all four transpose combinations, alpha/beta, leading dimensions
 * larger than the matrix).
 *
 * Tolerance: the rounding error of a float dot product of length K is at most about
 * K * eps * sum_k |a_k b_k| (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1),
 * whatever the summation order. Each element is checked against that bound, computed in double
 * along with the exact value, so the test does not depend on the order either kernel sums in.
 *
 * Run: ctest -R '^gemm$' --output-on-failure   (or build/bin/test_gemm)
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "tensor/error.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/ref/kernels_ref.h"
#include "test.h"

typedef void (*gemm_fn)(bool, bool, int, int, int, float, const float *, int, const float *, int,
                        float, float *, int);

static float *alloc_floats(size_t n)
{
    float *p = snn_alloc(n * sizeof *p, SNN_CPU);
    SNN_ASSERT(p);
    return p;
}
static void free_floats(float *p, size_t n) { snn_free(p, n * sizeof *p, SNN_CPU); }

static void fill_uniform(float *p, size_t n, snn_rng *rng)
{
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * snn_rng_uniform(rng) - 1.0f;
}

/* One test problem: matrices with their stored shapes and leading dimensions. */
typedef struct problem {
    bool trans_a, trans_b;
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
    float *A, *B, *C0;              /* inputs; C0 is C before the call */
    size_t a_size, b_size, c_size;  /* floats */
} problem;

static problem make_problem(bool trans_a, bool trans_b, int M, int N, int K, int pad, float alpha,
                            float beta, snn_rng *rng)
{
    problem p = {trans_a, trans_b, M, N, K, 0, 0, 0, alpha, beta, NULL, NULL, NULL, 0, 0, 0};
    int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    int b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    p.lda = a_cols + pad;
    p.ldb = b_cols + pad;
    p.ldc = N + pad;
    p.a_size = (size_t)a_rows * p.lda;
    p.b_size = (size_t)b_rows * p.ldb;
    p.c_size = (size_t)M * p.ldc;
    p.A = alloc_floats(p.a_size ? p.a_size : 1);
    p.B = alloc_floats(p.b_size ? p.b_size : 1);
    p.C0 = alloc_floats(p.c_size ? p.c_size : 1);
    fill_uniform(p.A, p.a_size, rng);
    fill_uniform(p.B, p.b_size, rng);
    fill_uniform(p.C0, p.c_size, rng);
    return p;
}

static void free_problem(problem *p)
{
    free_floats(p->A, p->a_size ? p->a_size : 1);
    free_floats(p->B, p->b_size ? p->b_size : 1);
    free_floats(p->C0, p->c_size ? p->c_size : 1);
}

/* Runs `gemm` on a copy of C0 and checks every element against the exact product (in double)
 * within the error bound of the file header; the padding columns of C must be untouched.
 * Returns true when all is well. */
static bool check_problem(const problem *p, gemm_fn gemm, const char *name)
{
    float *C = alloc_floats(p->c_size ? p->c_size : 1);
    if (p->c_size) memcpy(C, p->C0, p->c_size * sizeof *C);
    gemm(p->trans_a, p->trans_b, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B, p->ldb, p->beta,
         C, p->ldc);

    bool ok = true;
    for (int i = 0; i < p->M && ok; i++) {
        for (int j = 0; j < p->ldc && ok; j++) {
            size_t at = (size_t)i * p->ldc + j;
            if (j >= p->N) { /* padding: must be left alone */
                if (memcmp(&C[at], &p->C0[at], sizeof *C) != 0) ok = false;
                continue;
            }
            double exact = 0.0, magnitude = 0.0;
            for (int k = 0; k < p->K; k++) {
                double a = p->trans_a ? p->A[(size_t)k * p->lda + i] : p->A[(size_t)i * p->lda + k];
                double b = p->trans_b ? p->B[(size_t)j * p->ldb + k] : p->B[(size_t)k * p->ldb + j];
                exact += a * b;
                magnitude += fabs(a * b);
            }
            double c0 = p->C0[at];
            double alpha = p->alpha, beta = p->beta;
            exact = alpha * exact + (beta == 0.0 ? 0.0 : beta * c0);
            magnitude = fabs(alpha) * magnitude + (beta == 0.0 ? 0.0 : fabs(beta * c0));
            double bound = (p->K + 2) * (double)FLT_EPSILON * magnitude + 1e-30;
            if (!(fabs((double)C[at] - exact) <= bound)) ok = false;
            if (!ok)
                fprintf(stderr, "%s: trans %d%d M %d N %d K %d lda %d alpha %g beta %g: C[%d,%d] = "
                        "%.9g, exact %.9g, bound %.3g\n", name, p->trans_a, p->trans_b, p->M, p->N,
                        p->K, p->lda, (double)p->alpha, (double)p->beta, i, j, (double)C[at],
                        exact, bound);
        }
    }
    free_floats(C, p->c_size ? p->c_size : 1);
    return ok;
}

/* The 2x2 case worked by hand: A = [1 2; 3 4], B = [5 6; 7 8]. */
static void test_hand_2x2(void)
{
    const float A[4] = {1, 2, 3, 4}, B[4] = {5, 6, 7, 8};
    gemm_fn fns[2] = {snn_gemm_cpu, snn_gemm_ref};
    for (int f = 0; f < 2; f++) {
        float C[4] = {NAN, NAN, NAN, NAN}; /* beta = 0: C is never read */
        fns[f](false, false, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2);
        /* A B = [1*5 + 2*7, 1*6 + 2*8; 3*5 + 4*7, 3*6 + 4*8] = [19 22; 43 50] */
        CHECK(C[0] == 19.0f && C[1] == 22.0f && C[2] == 43.0f && C[3] == 50.0f);

        float D[4] = {1, 1, 1, 1};
        fns[f](false, false, 2, 2, 2, 2.0f, A, 2, B, 2, 1.0f, D, 2);
        /* 2 A B + 1 = [39 45; 87 101] */
        CHECK(D[0] == 39.0f && D[1] == 45.0f && D[2] == 87.0f && D[3] == 101.0f);

        float E[4];
        fns[f](true, false, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, E, 2);
        /* A^T B = [1 3; 2 4] B = [26 30; 38 44] */
        CHECK(E[0] == 26.0f && E[1] == 30.0f && E[2] == 38.0f && E[3] == 44.0f);

        float F[4];
        fns[f](false, true, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, F, 2);
        /* A B^T = A [5 7; 6 8] = [17 23; 39 53] */
        CHECK(F[0] == 17.0f && F[1] == 23.0f && F[2] == 39.0f && F[3] == 53.0f);

        float G[4];
        fns[f](true, true, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, G, 2);
        /* A^T B^T = (B A)^T; B A = [23 34; 31 46] -> [23 31; 34 46] */
        CHECK(G[0] == 23.0f && G[1] == 31.0f && G[2] == 34.0f && G[3] == 46.0f);
    }
}

/* Many random shapes, each through the threaded, the serial and the reference kernel. */
static void test_random_shapes(void)
{
    static const int sizes[] = {1, 2, 3, 5, 7, 8, 11, 12, 13, 16, 17, 24, 31, 32, 33, 47, 64, 65,
                                97, 128, 129, 200};
    static const float alphas[] = {1.0f, 0.5f, -2.0f};
    static const float betas[] = {0.0f, 1.0f, 0.25f};
    const int n_sizes = (int)(sizeof sizes / sizeof sizes[0]);
    snn_rng rng;
    snn_rng_seed(&rng, 1234);
    int failures = 0;
    for (int trial = 0; trial < 240; trial++) {
        int M = sizes[snn_rng_below(&rng, (uint64_t)n_sizes)];
        int N = sizes[snn_rng_below(&rng, (uint64_t)n_sizes)];
        int K = sizes[snn_rng_below(&rng, (uint64_t)n_sizes)];
        bool ta = trial & 1, tb = (trial >> 1) & 1;
        int pad = (int)snn_rng_below(&rng, 3) * 3; /* leading dims 0, 3 or 6 past the matrix */
        float alpha = alphas[snn_rng_below(&rng, 3)], beta = betas[snn_rng_below(&rng, 3)];
        problem p = make_problem(ta, tb, M, N, K, pad, alpha, beta, &rng);
        failures += !check_problem(&p, snn_gemm_cpu, "gemm_cpu");
        failures += !check_problem(&p, snn_gemm_serial_cpu, "gemm_serial_cpu");
        failures += !check_problem(&p, snn_gemm_ref, "gemm_ref");
        free_problem(&p);
    }
    CHECK(failures == 0);
}

/* Shapes that cross the MC, KC and NC block edges several times, in all trans combinations. */
static void test_large_blocks(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 99);
    struct { int M, N, K; } shapes[] = {{300, 130, 700}, {37, 2100, 290}, {161, 67, 1030}};
    for (int s = 0; s < 3; s++) {
        for (int t = 0; t < 4; t++) {
            problem p = make_problem(t & 1, (t >> 1) & 1, shapes[s].M, shapes[s].N, shapes[s].K,
                                     5, 1.5f, 0.5f, &rng);
            CHECK(check_problem(&p, snn_gemm_cpu, "gemm_cpu"));
            free_problem(&p);
        }
    }
}

/* beta = 0 must not read C: NaN and infinity in C do not leak into the result. Neither does
 * alpha = 0 or K = 0 read A and B. */
static void test_beta_zero_ignores_c(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 7);
    const int sizes[] = {3, 40, 150};
    for (int s = 0; s < 3; s++) {
        int n = sizes[s];
        problem p = make_problem(false, false, n, n, n, 0, 1.0f, 0.0f, &rng);
        for (size_t i = 0; i < p.c_size; i++) p.C0[i] = (i & 1) ? NAN : INFINITY;
        CHECK(check_problem(&p, snn_gemm_cpu, "gemm_cpu"));
        CHECK(check_problem(&p, snn_gemm_ref, "gemm_ref"));

        float *C = alloc_floats(p.c_size);
        memcpy(C, p.C0, p.c_size * sizeof *C);
        snn_gemm_cpu(false, false, n, n, n, 0.0f, p.A, n, p.B, n, 0.0f, C, n); /* C = 0 */
        bool zeros = true;
        for (size_t i = 0; i < p.c_size; i++) zeros = zeros && C[i] == 0.0f;
        CHECK(zeros);
        for (size_t i = 0; i < p.c_size; i++) C[i] = 3.0f;
        snn_gemm_cpu(false, false, n, n, 0, 1.0f, NULL, 1, NULL, 1, 0.5f, C, n); /* C = C/2 */
        bool halves = true;
        for (size_t i = 0; i < p.c_size; i++) halves = halves && C[i] == 1.5f;
        CHECK(halves);
        free_floats(C, p.c_size);
        free_problem(&p);
    }
}

/* The threaded SGEMM gives the same bits for 1 and 2 threads (each element is summed in the
 * same order whatever the thread grid). */
static void test_thread_count_invariance(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 5);
    const int M = 211, N = 390, K = 333;
    for (int t = 0; t < 4; t++) {
        problem p = make_problem(t & 1, (t >> 1) & 1, M, N, K, 0, 1.0f, 0.75f, &rng);
        float *c1 = alloc_floats(p.c_size), *c2 = alloc_floats(p.c_size);
        memcpy(c1, p.C0, p.c_size * sizeof *c1);
        memcpy(c2, p.C0, p.c_size * sizeof *c2);
        int threads = snn_get_num_threads();
        snn_set_num_threads(1);
        snn_gemm_cpu(p.trans_a, p.trans_b, M, N, K, 1.0f, p.A, p.lda, p.B, p.ldb, 0.75f, c1, p.ldc);
        snn_set_num_threads(2);
        snn_gemm_cpu(p.trans_a, p.trans_b, M, N, K, 1.0f, p.A, p.lda, p.B, p.ldb, 0.75f, c2, p.ldc);
        snn_set_num_threads(threads);
        CHECK(memcmp(c1, c2, p.c_size * sizeof *c1) == 0);
        free_floats(c1, p.c_size);
        free_floats(c2, p.c_size);
        free_problem(&p);
    }
}

/* The packing buffers are kept between calls and given back by snn_gemm_release_cpu. */
static void test_release(void)
{
    snn_rng rng;
    snn_rng_seed(&rng, 11);
    problem p = make_problem(false, false, 100, 100, 100, 0, 1.0f, 0.0f, &rng);
    size_t before = snn_live_bytes(SNN_CPU);
    CHECK(check_problem(&p, snn_gemm_cpu, "gemm_cpu"));
    snn_gemm_release_cpu();
    CHECK(snn_live_bytes(SNN_CPU) <= before);
    CHECK(check_problem(&p, snn_gemm_cpu, "gemm_cpu after release"));
    free_problem(&p);
}

/* snn_gemm_k_slice_cpu describes how the blocked path groups each sum (sparse/ relies on it to
 * reproduce the SGEMM bit for bit): check the slice lengths, and, where the micro-kernel uses
 * FMA instructions, rebuild C from that description with fmaf and compare bits. */
static void test_k_slice_contract(void)
{
    CHECK(snn_gemm_k_slice_cpu(64, 1024, 576) == 288);  /* 576 = 2 slices of 288 */
    CHECK(snn_gemm_k_slice_cpu(64, 1024, 512) == 512);
    CHECK(snn_gemm_k_slice_cpu(64, 64, 1030) == 344);   /* 3 slices: 344, 344, 342 */
    CHECK(snn_gemm_k_slice_cpu(4, 4, 4) == 0);          /* tiny: unpacked */
    CHECK(snn_gemm_k_slice_cpu(1, 500, 900) == 0);      /* one row: unpacked */
#if defined(__FMA__)
    snn_rng rng;
    snn_rng_seed(&rng, 21);
    const int M = 19, N = 45, K = 1100;
    const float alpha = 0.75f, beta = 0.5f;
    problem p = make_problem(false, false, M, N, K, 0, alpha, beta, &rng);
    float *C = alloc_floats(p.c_size), *want = alloc_floats(p.c_size);
    memcpy(C, p.C0, p.c_size * sizeof *C);
    snn_gemm_cpu(false, false, M, N, K, alpha, p.A, K, p.B, N, beta, C, N);
    int L = snn_gemm_k_slice_cpu(M, N, K);
    CHECK(L > 0 && L < K);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float c = p.C0[i * N + j];
            for (int k0 = 0; k0 < K; k0 += L) {
                float slice = 0.0f;
                for (int k = k0; k < K && k < k0 + L; k++)
                    slice = fmaf(p.A[i * K + k], p.B[k * N + j], slice);
                c = fmaf(alpha, slice, k0 == 0 ? beta * c : c);
            }
            want[i * N + j] = c;
        }
    }
    CHECK(memcmp(C, want, p.c_size * sizeof *C) == 0);
    free_floats(C, p.c_size);
    free_floats(want, p.c_size);
    free_problem(&p);
#endif
}

int main(void)
{
    snn_set_num_threads(2);
    RUN(test_hand_2x2);
    RUN(test_random_shapes);
    RUN(test_large_blocks);
    RUN(test_beta_zero_ignores_c);
    RUN(test_thread_count_invariance);
    RUN(test_release);
    RUN(test_k_slice_contract);
    return test_finish();
}
