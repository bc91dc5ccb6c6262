/**
 * @file
 * cuda_options.h - the knobs of the CUDA backend that callers outside tensor/ may turn
 * (kernels/cuda/cuda_context.cu): the precision of GEMMs and convolutions (FP32, TF32, BF16), which
 * kernel runs a TF32 / BF16 convolution (the conv path), the one stream every kernel is queued
 * on, and CUDA Graphs of that stream. Safe to include from C; the functions exist only in builds
 * with SNN_CUDA (SNN_WITH_CUDA defined), so guard calls with that macro, or use the public
 * snn_set_precision() of tensor.h, which works in every build.
 *
 *     snn_cuda_set_precision(SNN_PRECISION_BF16);  // convs and GEMMs on BF16 tensor cores
 *
 * FP32 (the default, what the parity tests against the CPU expect) runs cuBLAS SGEMM and the
 * im2col convolution of conv2d.cu. TF32 and BF16 run cuBLAS with TF32 / BF16 tensor-core math,
 * and each convolution either on the implicit-GEMM kernel of conv2d_igemm.cu or as im2col +
 * cuBLAS in the same precision, as snn_conv_path below decides; fp32 accumulation throughout
 * (BF16's im2col convolutions hand cuBLAS bf16 copies of the column matrix, dout and the
 * weight). tensor.h's snn_precision comment gives the rounding of each.
 */
#ifndef SNN_CUDA_H
#define SNN_CUDA_H

#include <stdbool.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef SNN_WITH_CUDA
/** Selects the math of every later cuBLAS call and convolution, process-wide (tensor.h's
 * snn_precision says what each rounds). */
void snn_cuda_set_precision(snn_precision p);
/** The current precision (SNN_PRECISION_FP32 until set). */
snn_precision snn_cuda_precision(void);
/** The older switch, kept: true selects TF32, false FP32. */
void snn_cuda_set_tf32(bool on);
/** True when the precision is TF32. */
bool snn_cuda_tf32(void);
/** The one stream every snn.c kernel is queued on (a cudaStream_t), for code beside tensor/
 * that orders its own streams against it with events (distributed/comm_nccl.c). */
struct CUstream_st *snn_cuda_stream(void);

/** Which kernels run a TF32 / BF16 convolution (fp32 always takes im2col + SGEMM). AUTO takes
 * the path conv_path.cu's rule measured fastest for the shape and precision; the others
 * force one, for benchmarks and tests:
 *   IGEMM   the implicit-GEMM kernel on the engine's NCHW fp32 tensors (conv2d_igemm.cu);
 *   IM2COL  the column matrix and cuBLAS in the same precision (conv2d.cu);
 *   NHWC    the implicit GEMM on channels-last bf16 / TF32 copies (conv2d_nhwc.cu), on the
 *           shapes it takes (strides 1-4, C_in and C_out multiples of 32); any other conv runs
 *           as under AUTO. */
typedef enum snn_conv_path {
    SNN_CONV_PATH_AUTO,
    SNN_CONV_PATH_IGEMM,
    SNN_CONV_PATH_IM2COL,
    SNN_CONV_PATH_NHWC
} snn_conv_path;
/** Selects the convolution path of later TF32 / BF16 convs (process-wide; AUTO by default). */
void snn_cuda_set_conv_path(snn_conv_path path);
/** The path snn_cuda_set_conv_path selected. */
snn_conv_path snn_cuda_conv_path(void);

/** CUDA Graphs of the one stream (nn/forward_graph.c uses them): everything queued between
 * begin and end is recorded, not run, and the returned graph replays it with one launch.
 * Relaxed capture mode: a cudaMalloc the arena makes while capturing is allowed (and not
 * recorded). end returns NULL with a message when the capture failed. */
snn_status snn_cuda_graph_capture_begin(void);
/** Ends the recording begun by snn_cuda_graph_capture_begin: the instantiated graph, or NULL. */
void *snn_cuda_graph_capture_end(void);
/** Replays a graph from snn_cuda_graph_capture_end on the stream. */
snn_status snn_cuda_graph_launch(void *graph);
/** Frees a graph from snn_cuda_graph_capture_end (NULL is a no-op). */
void snn_cuda_graph_free(void *graph);
#endif

#ifdef __cplusplus
}
#endif

#endif /* SNN_CUDA_H */
