/*
 * table.c - the reference kernel table: plain loops, one file per op family, one thread.
 * Every other table is tested against this one (tests/test_backend_ops.c).
 */
#include "tensor/host_memory.h"

const snn_kernels snn_kernels_ref = {
    .name = "ref",
    .device_alloc = snn_host_alloc,
    .device_free = snn_host_free,
    .copy = snn_host_copy,
    .synchronize = snn_host_synchronize,
    .memory_info = snn_memory_info_cpu,
};
