/*
 * backend_ops_compare.h - how the parity harness compares one output of a case with the
 * reference's (part of backend_ops.h; the rule and why it has a scaled term are at the top of
 * that file). Each comparison returns the worst ratio |got - ref| / tolerance over the buffer:
 * <= 1 passes, 0 is equal, infinity is a mismatch of an exact value, a NaN where the reference
 * has a number, or the poison left in an output (never written, or read before written).
 */

/* The tolerances of the checks that do not depend on the mode:
 *   ELEM  the same expression, evaluated with another rounding of one step (an fma, a vector
 *         exp within 1-2 ulp of expf, x / y against x * (1 / y)): 1e-6 absolute + 1e-5 relative;
 *   SUM   the same sum in another order (blocked, threaded, a tree on the GPU) or BPTT through
 *         T steps of such rounding: 1e-5 of the largest |output| + 1e-5 relative. A float sum
 *         of K terms errs by up to K eps of the sum of |terms| in the worst case, by about
 *         sqrt(K) eps typically; the cases sum up to ~10^4 terms. */
static bo_tol bo_tolerance_of(bo_check check, const bo_mode *m, const bo_op *op)
{
    switch (check) {
    case BO_ELEM: return (bo_tol){1e-6, 0.0, 1e-5};
    case BO_SUM: return (bo_tol){0.0, 1e-5, 1e-5};
    case BO_MMA: return m->mma[op->mma];
    default: return (bo_tol){0.0, 0.0, 0.0};
    }
}

static double bo_value(const void *p, bo_type t, int64_t i)
{
    switch (t) {
    case BO_F32: return (double)((const float *)p)[i];
    case BO_F64: return ((const double *)p)[i];
    case BO_I32: return (double)((const int32_t *)p)[i];
    case BO_U32: return (double)((const uint32_t *)p)[i];
    }
    return NAN;
}

/* The ratio of one element: got and ref as doubles, the start of an accumulator (NaN or 0 for
 * an output), the tensor's scale. */
static double bo_ratio(double got, double ref, double start, double scale, const bo_tol *t,
                       double ulp)
{
    if (isnan(got) || isnan(ref)) return isnan(got) && isnan(ref) ? 0.0 : (double)INFINITY;
    if (got == ref) return 0.0;
    if (isinf(got) || isinf(ref)) return (double)INFINITY;
    const double inc = isfinite(start) ? ref - start : ref;
    const double tol = t->atol + t->scaled * scale + t->rtol * fabs(inc) + ulp * fabs(ref);
    return fabs(got - ref) / tol;
}

/* Whether element i of a and b has the same bits. */
static bool bo_same_element(const void *a, const void *b, bo_type t, int64_t i)
{
    const size_t size = bo_type_size(t);
    const size_t at = (size_t)i * size;
    return memcmp((const char *)a + at, (const char *)b + at, size) == 0;
}

/* Compares buffer b of a case: got (the side under test) against ref. Writes the first
 * failure into why. */
static double bo_compare_buffer(const bo_buf *b, const void *got, const void *ref,
                                const bo_tol *tol, char *why, size_t why_size)
{
    const bool floating = b->type == BO_F32 || b->type == BO_F64;
    const double ulp = b->type == BO_F64 ? 0x1.0p-52 : 0x1.0p-23;
    double worst = 0.0;
    int64_t at = -1;

    if (b->role == BO_IN) { /* an input must come back as it went */
        if (memcmp(got, b->init, (size_t)b->n * bo_type_size(b->type)) == 0) return 0.0;
        for (at = 0; at < b->n; at++)
            if (!bo_same_element(got, b->init, b->type, at)) break;
        snprintf(why, why_size, "input '%s' changed at [%lld]", b->name, (long long)at);
        return (double)INFINITY;
    }
    if (b->role == BO_OUT)
        for (int64_t i = 0; i < b->n; i++) {
            if (bo_is_poison(ref, b->type, i)) {
                snprintf(why, why_size, "'%s' [%lld]: the reference left it unwritten", b->name,
                         (long long)i);
                return (double)INFINITY;
            }
            if (bo_is_poison(got, b->type, i)) {
                snprintf(why, why_size, "'%s' [%lld] was never written (or was read before "
                         "being written)", b->name, (long long)i);
                return (double)INFINITY;
            }
        }

    double scale = b->scale;
    if (!(scale > 0.0) && floating && b->check != BO_EXACT)
        for (int64_t i = 0; i < b->n; i++) {
            const double start = b->role == BO_ACC ? bo_value(b->init, b->type, i) : 0.0;
            const double r = bo_value(ref, b->type, i);
            const double inc = isfinite(start) ? r - start : r;
            if (isfinite(inc) && fabs(inc) > scale) scale = fabs(inc);
        }
    for (int64_t i = 0; i < b->n; i++) {
        const double g = bo_value(got, b->type, i), r = bo_value(ref, b->type, i);
        double ratio;
        if (!floating || b->check == BO_EXACT) {
            ratio = g == r || (isnan(g) && isnan(r)) ? 0.0 : (double)INFINITY;
        } else {
            const double start = b->role == BO_ACC ? bo_value(b->init, b->type, i) : 0.0;
            ratio = bo_ratio(g, r, start, scale, tol, ulp);
        }
        if (!(ratio <= worst)) {
            worst = isnan(ratio) ? (double)INFINITY : ratio;
            at = i;
        }
    }
    if (at >= 0 && !(worst <= 1.0)) {
        const double g = bo_value(got, b->type, at), r = bo_value(ref, b->type, at);
        if (!floating)
            snprintf(why, why_size, "'%s' [%lld]: 0x%08llx, reference 0x%08llx (must be equal)",
                     b->name, (long long)at, (unsigned long long)(int64_t)g,
                     (unsigned long long)(int64_t)r);
        else if (b->check == BO_EXACT)
            snprintf(why, why_size, "'%s' [%lld]: %.9g, reference %.9g (must be equal)", b->name,
                     (long long)at, g, r);
        else
            snprintf(why, why_size, "'%s' [%lld]: %.9g, reference %.9g (tolerance %g + %g * %.3g "
                     "+ %g |ref|)", b->name, (long long)at, g, r, tol->atol,
                     tol->scaled, scale, tol->rtol);
    }
    return worst;
}

/* Compares every output of a case run on the side under test. */
static double bo_compare_case(const bo_case *c, const bo_mode *m, void *const *got,
                              void *const *ref, char *why, size_t why_size)
{
    double worst = 0.0;
    why[0] = '\0';
    for (int i = 0; i < c->nbuf; i++) {
        const bo_buf *b = &c->buf[i];
        if (b->role == BO_REF || b->check == BO_CUSTOM) continue;
        const bo_tol tol = bo_tolerance_of(b->check, m, c->op);
        char one[256];
        const double r = bo_compare_buffer(b, got[i], ref[i], &tol, one, sizeof one);
        if (!(r <= worst)) {
            worst = isnan(r) ? (double)INFINITY : r;
            if (!(r <= 1.0)) snprintf(why, why_size, "%s", one);
        }
    }
    if (c->op->compare) {
        char one[256] = "";
        const double r = c->op->compare(c, got, ref, one, sizeof one);
        if (!(r <= worst)) {
            worst = isnan(r) ? (double)INFINITY : r;
            if (!(r <= 1.0)) snprintf(why, why_size, "%s", one);
        }
    }
    return worst;
}

/* A run the entry declined (it returned false): every output must be as it was, the outputs
 * still poisoned and the accumulators at their start. */
static double bo_compare_declined(const bo_case *c, void *const *got, char *why, size_t why_size)
{
    why[0] = '\0';
    for (int i = 0; i < c->nbuf; i++) {
        const bo_buf *b = &c->buf[i];
        if (b->role == BO_REF) continue;
        for (int64_t e = 0; e < b->n; e++) {
            const bool same = b->init ? bo_same_element(got[i], b->init, b->type, e)
                                      : bo_is_poison(got[i], b->type, e);
            if (!same) {
                snprintf(why, why_size, "declined, but changed '%s' [%lld]", b->name,
                         (long long)e);
                return (double)INFINITY;
            }
        }
    }
    return 0.0;
}
