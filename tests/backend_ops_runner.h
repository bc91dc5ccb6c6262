/*
 * backend_ops_runner.h - the parity harness's loop (part of backend_ops.h): every case, on the
 * reference table and then in every mode of the backend under test; one printed row per case
 * and mode; the counts; the check that every entry of the table under test ran at least once.
 */

/* The case lists (backend_ops_tensor.h, backend_ops_conv.h, backend_ops_neuron.h). */
static void bo_tensor_cases(bo_list *l);
static void bo_conv_cases(bo_list *l);
static void bo_neuron_cases(bo_list *l);

/* FNV-1a of the op's name and the case's label: the seed of the case's inputs. */
static uint64_t bo_seed_of(const bo_case *c)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = c->op->name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (const char *p = c->label; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static bool bo_env_matches(const char *env_name, const char *text)
{
    const char *want = getenv(env_name);
    return !want || !*want || strstr(text, want) != NULL;
}

/* Whether mode m runs case c: TF32 / BF16 modes run the ops that read the precision, conv-path
 * modes the convolutions, and the backend may refuse more (a path that does not take the dims). */
static bool bo_mode_runs(const bo_backend *be, const bo_mode *m, const bo_case *c)
{
    if (m->precision != SNN_PRECISION_FP32 && !c->op->precision) return false;
    if (m->conv_only && !c->conv) return false;
    return !be->takes || be->takes(m, c);
}

typedef struct bo_counts {
    int passed, failed, declined, skipped;
} bo_counts;

/* Runs case c on the reference (once per operand rounding) and in every mode of be. */
static void bo_run_case(const bo_backend *be, bo_case *c, bo_counts *counts)
{
    bo_side ref = {&snn_kernels_ref, &snn_neuron_kernels_ref, SNN_CPU, true, {0}, {0}, {0}, 0,
                   BO_ROUND_NONE};
    bo_side dut = {be->k, be->nk, be->device, false, {0}, {0}, {0}, 0, BO_ROUND_NONE};
    void *ref_out[BO_ROUNDINGS][BO_MAX_BUFS] = {{0}};
    bool ref_done[BO_ROUNDINGS] = {false};
    bool set_up = false;
    for (int mi = 0; mi < be->nmodes; mi++) {
        const bo_mode *m = &be->modes[mi];
        if (!bo_env_matches("SNN_TEST_MODE", m->name) || !bo_mode_runs(be, m, c)) continue;
        if (!set_up) {
            snn_rng_seed(&bo_rng, bo_seed_of(c));
            c->op->setup(c);
            set_up = true;
        }
        if (be->set_mode) be->set_mode(m);
        const bo_rounding r = c->op->precision ? m->rounding[c->op->mma] : BO_ROUND_NONE;
        if (!ref_done[r]) {
            bo_side_load(&ref, c, r);
            const bool ran = c->op->run(c, &ref);
            SNN_ASSERT(ran); /* the reference never declines */
            bo_side_unload(&ref, c, ref_out[r]);
            ref_done[r] = true;
        }
        void *got[BO_MAX_BUFS] = {0};
        bo_side_load(&dut, c, BO_ROUND_NONE);
        const bool ran = c->op->run(c, &dut);
        bo_side_unload(&dut, c, got);

        char why[320];
        const double worst = ran ? bo_compare_case(c, m, got, ref_out[r], why, sizeof why)
                                 : bo_compare_declined(c, got, why, sizeof why);
        const bool ok = worst <= 1.0;
        test_checks++;
        if (!ok) test_failures++;
        if (ok && !ran) counts->declined++;
        else if (ok) counts->passed++;
        else counts->failed++;
        char ratio[32];
        if (!ran) snprintf(ratio, sizeof ratio, "declined");
        else snprintf(ratio, sizeof ratio, "%.3g", worst);
        printf("%-26s %-58s %-5s %-12s %10s  %s\n", c->op->name, c->label, be->name, m->name,
               ratio, ok ? "OK" : "FAIL");
        if (!ok) printf("    FAIL: %s\n", why);
        bo_free_all(got, c->nbuf);
    }
    for (int r = 0; r < BO_ROUNDINGS; r++) bo_free_all(ref_out[r], c->nbuf);
    bo_free_buffers(c);
}

/* Every case of the lists on backend be; returns the exit code (test_finish's verdict). */
static int bo_main(const bo_backend *be)
{
    bo_list list = {NULL, 0, 0};
    bo_large_cases = be->large_cases;
    bo_tensor_cases(&list);
    bo_conv_cases(&list);
    bo_neuron_cases(&list);
    bo_counts counts = {0, 0, 0, 0};
    printf("%-26s %-58s %-5s %-12s %10s  %s\n", "op", "case", "backend", "mode", "worst",
           "result");

    /* each op (cases of one op are listed together), whether any of its cases ran, and
     * whether any ran without the entry declining */
    const bo_op *ops[128];
    int nops = 0;
    bool op_ran[128] = {false}, op_took[128] = {false};
    for (int i = 0; i < list.count; i++) {
        bo_case *c = &list.cases[i];
        int o = 0;
        while (o < nops && ops[o] != c->op) o++;
        if (o == nops) {
            SNN_ASSERT(nops < 128);
            ops[nops++] = c->op;
        }
        if (!bo_env_matches("SNN_TEST_OP", c->op->name)) continue;
        const bo_side dut = {be->k, be->nk, be->device, false, {0}, {0}, {0}, 0, BO_ROUND_NONE};
        if (!c->op->has(&dut)) {
            counts.skipped++;
            continue;
        }
        const int before = counts.passed + counts.failed + counts.declined;
        const int took_before = counts.passed + counts.failed;
        bo_run_case(be, c, &counts);
        if (counts.passed + counts.failed + counts.declined > before) op_ran[o] = true;
        if (counts.passed + counts.failed > took_before) op_took[o] = true;
        fflush(stdout);
    }
    if (be->set_mode) be->set_mode(&be->modes[0]);

    /* coverage: with no filter, every entry the table has ran in at least one case */
    const char *only_op = getenv("SNN_TEST_OP"), *only_mode = getenv("SNN_TEST_MODE");
    const bool filtered = (only_op && *only_op) || (only_mode && *only_mode);
    const bo_side dut = {be->k, be->nk, be->device, false, {0}, {0}, {0}, 0, BO_ROUND_NONE};
    printf("\nentries of the %s table without a case:", be->name);
    int missing = 0;
    for (int o = 0; o < nops; o++)
        if (!ops[o]->has(&dut)) printf(" %s", ops[o]->name);
    printf(" (skipped: the table has none)\n");
    for (int o = 0; o < nops && !filtered; o++)
        if (ops[o]->has(&dut) && !op_ran[o]) {
            printf("FAIL: the %s table has '%s' but no case of it ran\n", be->name, ops[o]->name);
            missing++;
        } else if (ops[o]->has(&dut) && !op_took[o]) {
            /* an entry that may decline (conv2d_dx_over_dout, the bits readers) must still take
             * some case, else a table that declines everything would pass */
            printf("FAIL: the %s table's '%s' declined every case\n", be->name, ops[o]->name);
            missing++;
        }
    test_checks++;
    if (missing) test_failures++;
    printf("backend_ops %s: %d passed, %d failed, %d declined (the entry returned false and "
           "left its outputs alone), %d skipped (the table lacks the entry), %d cases listed\n",
           be->name, counts.passed, counts.failed, counts.declined, counts.skipped, list.count);
    free(list.cases);
    return test_finish();
}
