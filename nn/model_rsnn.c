/*
 * model_rsnn.c - the recurrent SNN (SNN_MODEL_RSNN, "rsnn") for sequences: Fashion-MNIST read
 * row by row or pixel by pixel (sequential MNIST), or spike-train audio (SHD) frames.
 *
 * Dimension glossary: T time steps, N batch, C, H, W the image, F features, K classes.
 *
 *   x (N, C, H, W) image        --rows-->    (T = H,   N, C*W)   row t of every channel
 *                               --pixels-->  (T = H*W, N, C)     row-major pixel order
 *   x (T, N, F) or (T, N, C, H, W) frames (events) -> (T, N, F = C*H*W)
 *   [ fc_k: Linear(F -> hidden) -> rec_k: recurrent neurons(hidden) [-> dropout_k] ]
 *        rec_k:  I[t] = X[t] + S[t-1] W_rec^T, then the neuron step (IF, LIF or ALIF)
 *        k = 1 .. layers; dropout_k only with config.dropout = p > 0
 *   fc_out: Linear(hidden -> K)                                   (T, N, K) currents I[t]
 *   readout: a leaky integrator, no spikes, mean over t           (N, K) logits
 *
 * Dropout (config.dropout = p > 0, training only): dropout_k multiplies the spikes S (T, N,
 * hidden) of rec_k, on their way to the next fc (fc_{k+1}, or fc_out before the readout), by a
 * mask (N, hidden) drawn once per forward and shared by all T steps (snn_dropout_shared with
 * shared_dims 1, as the CNN's classifier): a dropped unit is silent downstream for the whole
 * sequence, while its own recurrence (W_rec, inside rec_k) still sees its spikes. The masks come
 * from the model's random stream (snn_model_seed_dropout), so a resumed run draws the same ones.
 * In evaluation the layers are the identity, and NIR export leaves them out.
 *
 * The image -> sequence step swaps the batch axis and the time axis: (N*C, H, W) becomes
 * (H, N*C, W) with snn_transpose01 (autograd/fn_transpose.c), between two views.
 *
 * The readout. A leaky integrator (a LIF membrane that never fires, decay_input, tau_out = 2
 * as the LIF default) integrates the last layer's currents, with a = 1 - 1/tau, b = 1/tau:
 *
 *   U[t] = U[t-1] + (I[t] - U[t-1]) / tau = a U[t-1] + b I[t],   U[-1] = 0
 *   so  U[t] = b sum_{s <= t} a^(t-s) I[s],
 *
 * and the logits are the mean over t of U[t]. Swapping the two sums (each I[s] reaches every
 * U[t] with t >= s), with the geometric sum b sum_{t=s}^{T-1} a^(t-s) = b (1 - a^(T-s)) / (1 - a)
 * and b / (1 - a) = 1:
 *
 *   logits = (1/T) sum_t U[t] = (1/T) sum_s I[s] (1 - a^(T-s))       s = 0 .. T-1
 *
 * It is linear in I, so the whole readout is one matrix product: a row w (1, T) with
 * w[s] = (1 - a^(T-s)) / T times I viewed as (T, N*K) (snn_matmul), forward and backward alike.
 * The last step weighs (1 - a) / T = b / T (it reaches U[T-1] alone); early steps weigh
 * almost 1/T (they reach every U[t]). snn_model_forward_steps returns the U[t] themselves:
 * U = L I with L (T, T) lower triangular, L[t, s] = b a^(t-s); their mean equals the forward's
 * logits up to float rounding (not bit for bit: another order of the sums). Test:
 * tests/test_rsnn.c (the closed form against the recurrence written as a loop).
 *
 * The readout's rows are made on the host for the current T and kept, on the input's device,
 * until T or the device changes; they are no parameters (a checkpoint holds none of them).
 */
#include <math.h>
#include <stdio.h>

#include "memory_layers.h"
#include "model_internal.h"
#include "tensor/arena.h"
#include "tensor/error.h"

/* ---- the leaky-integrator readout ---------------------------------------------------------- */

/* The readout's state: tau, and its weights for the last T and device (OWNED, or NULL). */
typedef struct leaky_readout {
    float tau;
    snn_tensor *mean_row;   // (1, T): w[s] = (1 - a^(T-s)) / T
    snn_tensor *steps;      // (T, T): L[t, s] = b a^(t-s) for s <= t, else 0
} leaky_readout;

static void leaky_readout_free(snn_module *m)
{
    leaky_readout *r = m->impl;
    snn_tensor_free(r->mean_row);
    snn_tensor_free(r->steps);
}

/* The weights of the readout at T steps on `device`: the mean row (steps false) or the
 * per-step matrix (steps true), made on the host in double and kept until T or the device
 * changes. NULL with the error set. */
static snn_tensor *readout_weights(snn_module *m, int64_t T, snn_device device, bool steps)
{
    leaky_readout *r = m->impl;
    snn_tensor **slot = steps ? &r->steps : &r->mean_row;
    const snn_shape shape = steps ? SNN_SHAPE(T, T) : SNN_SHAPE(1, T);
    if (*slot && (*slot)->device == device && (*slot)->shape.dim[1] == T) return *slot;
    snn_tensor_free(*slot);
    *slot = NULL;
    const double a = 1.0 - 1.0 / (double)r->tau, b = 1.0 / (double)r->tau;
    const int64_t n = steps ? T * T : T;
    float *host = snn_alloc((size_t)n * sizeof *host, SNN_CPU);
    if (!host) return snn_error_null(SNN_ERR_MEMORY, "rsnn readout: out of host memory");
    for (int64_t t = 0; t < (steps ? T : 1); t++) {
        for (int64_t s = 0; s < T; s++) {
            double w = steps ? (s <= t ? b * pow(a, (double)(t - s)) : 0.0)
                             : (1.0 - pow(a, (double)(T - s))) / (double)T;
            host[t * T + s] = (float)w;
        }
    }
    snn_tensor *t = snn_tensor_new(shape, device);
    if (t && snn_tensor_copy_from_host(t, host) != SNN_OK) {
        snn_tensor_free(t);
        t = NULL;
    }
    snn_free(host, (size_t)n * sizeof *host, SNN_CPU);
    return *slot = t;
}

/* I (T, N, K) -> W (rows, T) times I viewed as (T, N*K): (rows, N*K). */
static snn_tensor *readout_apply(snn_tensor *w, snn_tensor *currents)
{
    const snn_shape s = currents->shape;
    snn_tensor *flat = snn_reshape(currents, SNN_SHAPE(s.dim[0], s.dim[1] * s.dim[2]));
    return flat ? snn_matmul(w, flat) : NULL;
}

/* forward: currents I (T, N, K) -> logits (N, K), the mean over t of U[t] in closed form */
static snn_tensor *leaky_readout_forward(snn_module *m, snn_tensor *x)
{
    const char *fn = "rsnn readout";
    if (snn_check_tensor(fn, "x", x)) return NULL;
    if (x->shape.ndim != 3) {
        char buf[96];
        return snn_error_null(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected currents (T, N, "
                              "K), got %s)", fn, snn_shape_str(x->shape, buf, sizeof buf));
    }
    snn_tensor *w = readout_weights(m, x->shape.dim[0], x->device, false);
    snn_tensor *y = w ? readout_apply(w, x) : NULL; // (1, N*K)
    return y ? snn_reshape(y, SNN_SHAPE(x->shape.dim[1], x->shape.dim[2])) : NULL;
}

const snn_module_ops snn_leaky_readout_ops = {"LeakyIntegratorReadout(tau=2, mean over T)",
                                              leaky_readout_forward, leaky_readout_free, NULL};

float snn_leaky_readout_tau(const snn_module *m)
{
    return m && m->ops == &snn_leaky_readout_ops ? ((const leaky_readout *)m->impl)->tau : 0.0f;
}

static snn_module *leaky_readout_new(float tau)
{
    leaky_readout r = {.tau = tau};
    return snn_module_new_copy(&snn_leaky_readout_ops, &r, sizeof r);
}

/* ---- the model ------------------------------------------------------------------------------ */

/* The features of one step of the input sequence (double: no overflow for any int sizes). */
static double rsnn_step_features(const snn_model_config *c)
{
    const double C = c->in_channels, H = c->height, W = c->width;
    return c->encoding == SNN_ENCODING_ROWS ? C * W : c->encoding == SNN_ENCODING_PIXELS ? C : C * H * W;
}

snn_status snn_rsnn_config_check(const snn_model_config *c)
{
    const char *fn = "snn_model_new";
    const bool sequence = c->encoding == SNN_ENCODING_ROWS || c->encoding == SNN_ENCODING_PIXELS;
    if (c->kind != SNN_MODEL_RSNN) {
        if (!sequence) return SNN_OK;
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'encoding' (the %s encoding reads an "
                         "image as a sequence, which only the rsnn takes; got model %s); hint: "
                         "use direct or poisson encoding with %s, or model rsnn",
                         fn, c->encoding == SNN_ENCODING_ROWS ? "rows" : "pixels",
                         snn_model_kind_name(c->kind), snn_model_kind_name(c->kind));
    }
    if (!sequence && c->encoding != SNN_ENCODING_EVENTS)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'encoding' (the rsnn takes sequences: "
                         "expected rows, pixels or events, got %s)", fn,
                         c->encoding == SNN_ENCODING_DIRECT    ? "direct"
                         : c->encoding == SNN_ENCODING_POISSON ? "poisson"
                                                               : "first-step");
    if (c->layers < 1 || c->layers > 64)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'layers' (the rsnn's recurrent layers: "
                         "expected 1..64, got %d)", fn, c->layers);
    if (c->hidden < 1)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'hidden' (the rsnn's width: expected "
                         ">= 1, got %d)", fn, c->hidden);
    const double steps = c->encoding == SNN_ENCODING_ROWS     ? (double)c->height
                         : c->encoding == SNN_ENCODING_PIXELS ? (double)c->height * c->width
                                                              : (double)c->time_steps;
    if (sequence && steps != (double)c->time_steps)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'time_steps' (the %s encoding of %dx%d "
                         "images takes T = %s = %.0f steps, got %d)", fn,
                         c->encoding == SNN_ENCODING_ROWS ? "rows" : "pixels", c->height,
                         c->width, c->encoding == SNN_ENCODING_ROWS ? "H" : "H*W", steps,
                         c->time_steps);
    if (rsnn_step_features(c) > INT32_MAX)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config (the rsnn's input features per step, "
                         "%.0f, must be below 2^31)", fn, rsnn_step_features(c));
    const snn_neuron_kind k = c->neuron.kind;
    if (k != SNN_NEURON_IF && k != SNN_NEURON_LIF && k != SNN_NEURON_ALIF)
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'neuron' (the rsnn's recurrent layers "
                         "take if, lif or alif neurons, got %s)", fn, snn_neuron_kind_name(k));
    if (c->spiking_readout) /* the dropout's range is model.c's check */
        return snn_error(SNN_ERR_ARGUMENT, "%s: bad config 'spiking_readout' (the rsnn has a "
                         "leaky-integrator readout: expected off, got on)", fn);
    return SNN_OK;
}

/* SNN_OK when x fits: an image (N, C, H, W) for rows and pixels; (T, N, C, H, W) frames or
 * (T, N, C*H*W) steps for events, with the model's T. */
static snn_status rsnn_check_input(const char *fn, const snn_model_config *c, snn_tensor *x)
{
    if (!x) return SNN_OK; /* the forward of a failed op reports its own error */
    const snn_shape *s = &x->shape;
    char want[128], buf[96];
    if (c->encoding != SNN_ENCODING_EVENTS) {
        if (s->ndim == 4 && s->dim[1] == c->in_channels && s->dim[2] == c->height &&
            s->dim[3] == c->width)
            return SNN_OK;
        snprintf(want, sizeof want, "(N, %d, %d, %d) images, read as %d steps", c->in_channels,
                 c->height, c->width, c->time_steps);
    } else {
        const int64_t F = (int64_t)c->in_channels * c->height * c->width;
        if (s->dim[0] == c->time_steps &&
            ((s->ndim == 3 && s->dim[2] == F) ||
             (s->ndim == 5 && s->dim[2] == c->in_channels && s->dim[3] == c->height &&
              s->dim[4] == c->width)))
            return SNN_OK;
        snprintf(want, sizeof want, "(T=%d, N, %lld) steps or (T=%d, N, %d, %d, %d) frames",
                 c->time_steps, (long long)F, c->time_steps, c->in_channels, c->height,
                 c->width);
    }
    return snn_error(SNN_ERR_ARGUMENT, "%s: bad argument 'x' (expected %s, got %s)", fn, want,
                     snn_shape_str(x->shape, buf, sizeof buf));
}

/* The input as a time-major sequence (T, N, F) (see the top of the file). */
static snn_tensor *rsnn_sequence(const snn_model_config *c, snn_tensor *x)
{
    const int64_t C = c->in_channels, H = c->height, W = c->width;
    if (c->encoding == SNN_ENCODING_EVENTS) {
        const int64_t T = x->shape.dim[0], N = x->shape.dim[1];
        return snn_reshape(x, SNN_SHAPE(T, N, C * H * W)); // (T, N, F)
    }
    const int64_t N = x->shape.dim[0];
    if (c->encoding == SNN_ENCODING_ROWS) {
        snn_tensor *rows = snn_reshape(x, SNN_SHAPE(N * C, H, W)); // (N*C, H, W)
        rows = rows ? snn_transpose01(rows) : NULL;                 // (H, N*C, W)
        return rows ? snn_reshape(rows, SNN_SHAPE(H, N, C * W)) : NULL; // (H, N, C*W)
    }
    snn_tensor *pixels = snn_reshape(x, SNN_SHAPE(N * C, H * W)); // (N*C, H*W)
    pixels = pixels ? snn_transpose01(pixels) : NULL;              // (H*W, N*C)
    return pixels ? snn_reshape(pixels, SNN_SHAPE(H * W, N, C)) : NULL; // (H*W, N, C)
}

/* The last layer's currents I (T, N, K): the sequence through every child but the readout. */
static snn_tensor *rsnn_currents(snn_module *m, snn_tensor *x)
{
    snn_model_impl *impl = m->impl;
    if (impl->plan.tracing) snn_plan_trace_begin(&impl->plan, m, x); /* snn_model_explain */
    snn_model_seed_dropout(m); /* training with dropout: this forward's masks */
    snn_tensor *h = rsnn_sequence(&impl->config, x);
    if (h) h = snn_modules_forward(m->children, m->n_children - 1, h);
    if (impl->plan.tracing) snn_plan_trace_end(&impl->plan);
    return h;
}

static snn_tensor *rsnn_forward(snn_module *m, snn_tensor *x)
{
    snn_model_impl *impl = m->impl;
    if (rsnn_check_input(m->ops->kind, &impl->config, x) != SNN_OK) return NULL;
    snn_tensor *currents = rsnn_currents(m, x);
    return currents ? snn_module_forward(m->children[m->n_children - 1], currents) : NULL;
}

const snn_module_ops snn_rsnn_model_ops = {"RecurrentSNN", rsnn_forward, snn_model_free_impl,
                                           NULL};

snn_tensor *snn_rsnn_forward_steps(snn_module *m, snn_tensor *x)
{
    snn_model_impl *impl = m->impl;
    if (rsnn_check_input("snn_model_forward_steps", &impl->config, x) != SNN_OK) return NULL;
    snn_tensor *currents = rsnn_currents(m, x); // (T, N, K)
    if (!currents) return NULL;
    const snn_shape s = currents->shape;
    snn_tensor *L = readout_weights(m->children[m->n_children - 1], s.dim[0], currents->device,
                                    true);
    snn_tensor *U = L ? readout_apply(L, currents) : NULL; // (T, N*K)
    return U ? snn_reshape(U, s) : NULL;                   // (T, N, K): U[t]
}

snn_module *snn_rsnn_new(const snn_model_config *c, snn_rng *rng)
{
    snn_module *m = snn_model_module_new(&snn_rsnn_model_ops, c);
    if (!m) return NULL;
    int features = (int)rsnn_step_features(c); /* checked below 2^31 */
    snn_status s = SNN_OK;
    for (int k = 1; s == SNN_OK && k <= c->layers; k++) {
        char name[24];
        snprintf(name, sizeof name, "fc%d", k);
        s = snn_module_add(m, name, snn_linear_new(features, c->hidden, true, rng));
        snprintf(name, sizeof name, "rec%d", k);
        if (s == SNN_OK)
            s = snn_module_add(m, name, snn_recurrent_layer_new(c->hidden, &c->neuron, rng));
        snprintf(name, sizeof name, "dropout%d", k); /* no parameters: names and rng unchanged */
        if (s == SNN_OK && c->dropout > 0.0f)
            s = snn_module_add(m, name, snn_dropout_shared_new(c->dropout, 0, 1));
        features = c->hidden;
    }
    if (s == SNN_OK) s = snn_module_add(m, "fc_out", snn_linear_new(c->hidden, c->classes, true, rng));
    /* tau_out = 2: the LIF default, whatever the hidden neurons' tau */
    if (s == SNN_OK) s = snn_module_add(m, "readout", leaky_readout_new(2.0f));
    if (s != SNN_OK) {
        snn_module_free(m);
        return NULL;
    }
    return m;
}

/* Floats the rsnn holds (model_internal.h): per layer fc_k (weight and bias) and the recurrent
 * weights (hidden x hidden); fc_out with its bias. A lower bound: whatever else a recurrent
 * layer keeps is left out. */
double snn_rsnn_param_floats(const snn_model_config *c)
{
    const double H = c->hidden, F = rsnn_step_features(c), K = c->classes;
    return (F * H + H) + (c->layers - 1) * (H * H + H) + c->layers * H * H + (H * K + K);
}

/* The memory estimate's walk of the rsnn (nn/model_memory.c): the sequence (a transpose
 * between views, or a view of event steps), per layer fc_k's output and the recurrent layer
 * (snn_walk_recurrent, nn/memory_walk.c), and in training with dropout its mask (N, H) and
 * the product (T, N, H); then fc_out. Returns the id of the currents
 * I (T, N, K); model_memory.c adds the readout's (N, K) and the loss. */
int snn_rsnn_memory_walk(snn_walk *w, const snn_model_config *c, double T, double N)
{
    const double H = c->hidden, F = rsnn_step_features(c), K = c->classes;
    int x = -1;
    if (c->encoding != SNN_ENCODING_EVENTS) {        /* the transpose and its views */
        x = snn_walk_view(w, T * N * F, x);
        x = snn_walk_output(w, T * N * F, x, -1);
        x = snn_walk_view(w, T * N * F, x);
    } else {
        x = snn_walk_view(w, T * N * F, x);
    }
    for (int k = 0; k < c->layers; k++) {
        const double in = k == 0 ? F : H;
        snn_walk_param(w, in * H, true);
        snn_walk_param(w, H, true);
        x = snn_walk_output(w, T * N * H, x, -1);     /* fc_k */
        x = snn_walk_recurrent(w, x, &c->neuron, T, N, H);
        if (c->dropout > 0.0f && w->training) { /* eval: the identity, nothing allocated */
            snn_walk_constant(w, N * H);
            x = snn_walk_output(w, T * N * H, x, -1);
        }
    }
    snn_walk_param(w, H * K, true);
    snn_walk_param(w, K, true);
    x = snn_walk_output(w, T * N * K, x, -1);         /* fc_out */
    return snn_walk_view(w, T * N * K, x);            /* viewed (T, N*K) for the readout */
}
