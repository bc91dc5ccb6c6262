/*
 * cuda_options.h - the few knobs of the CUDA backend that callers outside tensor/ may turn
 * (tensor/cuda_context.cu). Safe to include from C; the functions exist only in builds with
 * SNN_CUDA (SNN_WITH_CUDA defined), so guard calls with that macro or snn_cuda_compiled().
 *
 *     snn_cuda_set_tf32(true);   // cuBLAS GEMMs (linear, conv) on TF32 tensor cores
 *
 * TF32 keeps fp32's range but rounds the GEMM inputs to a 10-bit mantissa: about 3x the
 * throughput of fp32 on an H100, with relative errors near 1e-3 instead of 1e-6. The default
 * is plain fp32, which is what the parity tests against the CPU expect.
 */
#ifndef SNN_CUDA_H
#define SNN_CUDA_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef SNN_WITH_CUDA
/* Selects TF32 tensor-core math (true) or fp32 (false, the default) for every cuBLAS call. */
void snn_cuda_set_tf32(bool on);
/* The current setting. */
bool snn_cuda_tf32(void);
/* The one stream every snn.c kernel is queued on (a cudaStream_t), for code beside tensor/
 * that orders its own streams against it with events (dist/comm_nccl.c). */
struct CUstream_st *snn_cuda_stream(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* SNN_CUDA_H */
