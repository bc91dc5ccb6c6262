/*
 * loss_tet.c - the TET loss: Temporal Efficient Training (S. Deng, Y. Li, S. Zhang, S. Gu,
 * "Temporal Efficient Training of Spiking Neural Network via Gradient Re-weighting", ICLR 2022,
 * https://arxiv.org/abs/2202.11946).
 *
 * Dimension glossary: T time steps, N batch, K classes.
 *
 * The usual SNN loss is the cross-entropy of the time-mean output, CE((1/T) sum_t O[t], y). Its
 * gradient reaches every step through the mean only, and the paper shows that a net trained so
 * can get a low loss from a few steps with large outputs while the others stay wrong, which
 * hurts generalisation. TET puts the loss on every step instead, so each O[t] must classify on
 * its own, and adds a regulariser that keeps the outputs near a fixed value phi:
 *
 *     L_TET = (1/T) sum_t CE(O[t], y)                               (the paper's eq. 7)
 *     L_MSE = (1/T) sum_t MSE(O[t], phi)
 *           = (1/(T N K)) sum_{t,n,k} (O[t,n,k] - phi)^2            (MSE: mean over N and K)
 *     L     = (1 - lambda) L_TET + lambda L_MSE                     (eq. 9)
 *
 * with O (T, N, K) the last layer's output at each step (snn_model_forward_steps) and y (N) the
 * labels; CE may be label-smoothed (snn_cross_entropy_smooth, `smoothing`; 0 is plain CE). The
 * prediction is unchanged: the argmax of the mean over T, what snn_module_forward returns.
 *
 * Defaults (nn.h): lambda = SNN_TET_LAMBDA = 1e-3 and phi = SNN_TET_PHI = 1.0, the authors'
 * (their training script's --lamb 1e-3 and --means 1.0). lambda is kept small because L_MSE is
 * a regulariser against outlying outputs, not an objective of its own: at 1e-3 it barely moves
 * the outputs of a net that classifies well, while a large lambda pulls every logit toward phi,
 * erasing the margins between classes that the CE term builds. The paper's ablation reports
 * values up to 0.05 working as well; callers pass their own. phi = 1 is the paper's choice too;
 * only the logits' offset from phi matters, so any fixed value does the same job.
 *
 * How it is composed (so its backward is the primitives', with no hand-written code): a (T, N,
 * K) tensor viewed as (T N, K) rows, with the labels repeated T times, gives
 *     (1/(T N)) sum_{t,n} CE_row = (1/T) sum_t [ (1/N) sum_n CE_row ] = (1/T) sum_t CE(O[t], y)
 * exactly the per-step mean, in one cross-entropy call:
 *     rows   = reshape(O, (T N, K))                       a view
 *     y_rep  = reshape(repeat_time(y, T), (T N))          (T N) labels
 *     ce     = cross_entropy_smooth(rows, y_rep, smoothing)
 *     mse    = mean_all(square(O - phi))
 *     L      = (1 - lambda) ce + lambda mse               (lambda = 0: ce itself)
 * Memory: the log-probabilities (T N K floats), the labels repeated (T N), and with lambda > 0
 * two (T N K) tensors for the regulariser, in the step arena.
 *
 * Test: tests/test_loss_tet.c (ctest -R loss_tet); CUDA parity in tests/test_cuda_layers.c.
 */
#include <math.h>

#include "nn.h"
#include "tensor/error.h"

snn_tensor *snn_tet_loss(snn_tensor *step_logits, snn_tensor *labels, float lambda, float phi,
                         float smoothing)
{
    const char *fn = "snn_tet_loss";
    if (snn_check_rank(fn, "step_logits", step_logits, 3, "(T, N, K): snn_model_forward_steps") ||
        snn_check_rank(fn, "labels", labels, 1, "(N)") ||
        snn_check_dim(fn, "labels", labels, 0, step_logits->shape.dim[1],
                      "N (dim 1 of step_logits)") ||
        snn_check_same_device(fn, "step_logits", step_logits, "labels", labels))
        return NULL;
    if (!(lambda >= 0.0f && lambda <= 1.0f)) /* NaN fails too */
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'lambda' (expected 0 <= lambda "
                              "<= 1, got %g)", fn, (double)lambda);
    if (!isfinite(phi))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'phi' (expected a finite value, "
                              "got %g)", fn, (double)phi);
    if (!(smoothing >= 0.0f && smoothing < 1.0f))
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'smoothing' (expected 0 <= "
                              "smoothing < 1, got %g)", fn, (double)smoothing);
    const int64_t T = step_logits->shape.dim[0], N = step_logits->shape.dim[1];
    const int64_t K = step_logits->shape.dim[2];
    if (T > 1024)   /* snn_repeat_time takes an int; models run at most 1024 steps */
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'step_logits' (expected at most "
                              "1024 time steps, got %lld)", fn, (long long)T);

    /* L_TET: every step's rows in one cross-entropy (the per-step mean, see above) */
    snn_tensor *rows = snn_reshape(step_logits, SNN_SHAPE(T * N, K));
    snn_tensor *repeated = snn_reshape(snn_repeat_time(labels, (int)T), SNN_SHAPE(T * N));
    snn_tensor *ce = snn_cross_entropy_smooth(rows, repeated, smoothing);
    if (lambda == 0.0f || !ce) return ce;

    /* L_MSE: the mean over all T N K outputs of (O - phi)^2 */
    snn_tensor *mse = snn_mean_all(snn_square(snn_add_scalar(step_logits, -phi)));
    return snn_add(snn_scale(ce, 1.0f - lambda), snn_scale(mse, lambda));
}
