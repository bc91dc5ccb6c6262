/*
 * test_memory_diet.c - the ops that write over an input the caller gives up
 * (snn_neuron_multistep_consume, snn_add_into) on the CPU: bit for bit the plain ops' outputs
 * and gradients, one activation less for IF / LIF; and their refusals.
 */
#include "memory_diet_check.h"

static void test_if(void) { check_diet(SNN_NEURON_IF, SNN_CPU); }
static void test_lif(void) { check_diet(SNN_NEURON_LIF, SNN_CPU); }
static void test_plif_keeps_its_input(void) { check_diet(SNN_NEURON_PLIF, SNN_CPU); }

static void test_add_into_refusals(void)
{
    snn_tensor *owned = snn_tensor_new(SNN_SHAPE(2, 3), SNN_CPU);
    snn_step_begin();
    snn_tensor *b = snn_full(SNN_SHAPE(2, 3), 1.0f, SNN_CPU);
    CHECK(snn_add_into(owned, b) == NULL);
    CHECK(strstr(snn_last_error(), "snn_add_into") && strstr(snn_last_error(), "OWNED"));
    snn_tensor *row = snn_full(SNN_SHAPE(3), 1.0f, SNN_CPU);
    CHECK(snn_add_into(row, b) == NULL); /* the sum (2, 3) does not fit in a (3) */
    CHECK(strstr(snn_last_error(), "only b may broadcast") != NULL);
    snn_tensor *a = snn_full(SNN_SHAPE(2, 3), 2.0f, SNN_CPU);
    snn_tensor *y = snn_add_into(a, row); /* b broadcasts: fine */
    CHECK(y != NULL && y->data == a->data && y->data[5] == 3.0f);
    snn_step_end();
    snn_tensor_free(owned);
}

int main(void)
{
    RUN(test_if);
    RUN(test_lif);
    RUN(test_plif_keeps_its_input);
    RUN(test_add_into_refusals);
    return test_finish();
}
