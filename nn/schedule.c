/*
 * schedule.c - learning-rate schedules: the learning rate as a pure function of the step number
 * (optimizer updates done so far, from 0), so a resumed run recomputes it from the saved step.
 *
 *   constant  lr(s) = base
 *   cosine    lr(s) = base * s / warmup                                      s <  warmup
 *             lr(s) = min + (base - min) (1 + cos(pi (s - warmup) / (total - warmup))) / 2
 *                                                                  warmup <= s <  total
 *             lr(s) = min                                                    s >= total
 *             (linear warm-up from 0, then half a cosine period down to min_lr; SGDR,
 *             I. Loshchilov and F. Hutter, arXiv:1608.03983, without restarts)
 *   step      lr(s) = base * gamma^floor(s / step_size)      (torch.optim.lr_scheduler.StepLR)
 *
 * Edge cases are defined rather than errors (the function returns a float): a negative step
 * counts as 0; warmup <= 0 means no warm-up; total <= warmup means min_lr once warm-up ends;
 * step_size <= 0 means the base rate throughout. Computed in double, returned as float.
 *
 * Test: tests/test_schedule.c (ctest -R schedule).
 */
#include <math.h>

#include "nn.h"
#include "tensor/error.h"

#define SCHEDULE_PI 3.14159265358979323846

static double cosine_lr(const snn_schedule *s, int64_t step)
{
    const double base = (double)s->base_lr, lo = (double)s->min_lr;
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        return base * (double)step / (double)s->warmup_steps;
    const int64_t warmup = s->warmup_steps > 0 ? s->warmup_steps : 0;
    if (step >= s->total_steps) return lo;
    const double progress = (double)(step - warmup) / (double)(s->total_steps - warmup);
    return lo + (base - lo) * (1.0 + cos(SCHEDULE_PI * progress)) / 2.0;
}

float snn_schedule_lr(const snn_schedule *s, int64_t step)
{
    SNN_ASSERT(s != NULL);
    if (step < 0) step = 0;
    switch (s->kind) {
    case SNN_SCHEDULE_CONSTANT:
        return s->base_lr;
    case SNN_SCHEDULE_COSINE:
        return (float)cosine_lr(s, step);
    case SNN_SCHEDULE_STEP:
        if (s->step_size <= 0) return s->base_lr;
        return (float)((double)s->base_lr * pow((double)s->gamma, (double)(step / s->step_size)));
    }
    SNN_ASSERT(!"unknown schedule kind");
    return s->base_lr;
}
