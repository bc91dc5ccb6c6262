/*
 * cuda_context.cu - the CUDA backend's process-wide state: the one stream, the cuBLAS handle,
 * the reduction scratch, and the error reporting every .cu file uses (see cuda_common.cuh).
 *
 * Why one stream: every op of a training step is queued in program order on it, so kernels
 * never need events between them, scratch buffers can be reused by the next kernel without a
 * sync, and the host only waits where it reads a value back (copy device-to-host, synchronize).
 * It is an ordinary (blocking) stream: work queued on the legacy default stream, by a
 * cudaMemcpy somewhere or by another library, waits for it and is waited for, so a stray call
 * that forgets snn_cuda_stream() is slow rather than racy.
 *
 * Device memory: all of it through snn_alloc, so that snn_live_bytes sees it - the reduction
 * scratch and cuBLAS's workspace too (cublasSetWorkspace; without it cuBLAS allocates its own,
 * uncounted). What stays outside is the CUDA context itself and the kernel images the driver
 * loads (a few hundred MB, fixed; SNN_CUDA_HEADROOM in nn/model_memory.c).
 *
 * Everything is created lazily on first use (a program that never touches the GPU pays
 * nothing) and released by snn_cuda_shutdown(), after which first use creates it again.
 * Creation is guarded by a mutex: the data loader's thread may ask for the device count.
 */
#include <atomic>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/cuda_options.h"
#include "cuda_common.cuh"
#include "tensor/error.h"

static std::mutex context_mutex;
static std::atomic<bool> context_ready{false};
static cudaStream_t context_stream;
static cublasHandle_t context_blas;
static int context_sm_count;
static std::atomic<int> precision{SNN_PRECISION_FP32};
static void *scratch;          /* SNN_CUDA_SCRATCH_BYTES on the device, from snn_alloc */
static void *blas_workspace;   /* SNN_CUDA_BLAS_WORKSPACE_BYTES from snn_alloc (NULL: cuBLAS's) */

extern "C" void snn_cuda_fail(const char *what, const char *file, int line, const char *message)
{
    fprintf(stderr, "snn.c: CUDA error: %s failed at %s:%d: %s\n", what, file, line, message);
    fflush(stderr);
    abort();
}

extern "C" void snn_cuda_launch_fail(const char *kernel, const char *file, int line,
                                     cudaError_t error, unsigned grid, unsigned block)
{
    char message[256];
    snprintf(message, sizeof message, "%s (grid %u blocks of %u threads)",
             cudaGetErrorString(error), grid, block);
    char what[160];
    snprintf(what, sizeof what, "launch of %s", kernel);
    snn_cuda_fail(what, file, line, message);
}

extern "C" int snn_cuda_device_count(void)
{
    /* Asked on every dispatch, so it is queried once (C++11 makes this initialisation
     * thread-safe). A missing driver is "no device", not an error. */
    static const int count = [] {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            (void)cudaGetLastError(); /* clear it: it is not sticky, but keep the slate clean */
            n = 0;
        }
        return n;
    }();
    return count;
}

static void apply_math_mode(void)
{
    /* CUBLAS_DEFAULT_MATH computes fp32 GEMMs in full fp32; TF32 must be asked for. BF16 is
     * asked per call (gemm.cu passes CUBLAS_COMPUTE_32F_FAST_16BF), so the handle stays fp32. */
    SNN_CUBLAS_CHECK(cublasSetMathMode(context_blas, precision.load() == SNN_PRECISION_TF32
                                                         ? CUBLAS_TF32_TENSOR_OP_MATH
                                                         : CUBLAS_DEFAULT_MATH));
}

static void context_init(void)
{
    std::lock_guard<std::mutex> lock(context_mutex);
    if (context_ready.load()) return;
    if (snn_cuda_device_count() <= 0)
        snn_cuda_fail("snn_cuda_context_init", __FILE__, __LINE__, "no CUDA device is visible");
    int device = 0;
    SNN_CUDA_CHECK(cudaGetDevice(&device));
    SNN_CUDA_CHECK(cudaDeviceGetAttribute(&context_sm_count, cudaDevAttrMultiProcessorCount,
                                          device));
    SNN_CUDA_CHECK(cudaStreamCreateWithFlags(&context_stream, cudaStreamDefault));
    SNN_CUBLAS_CHECK(cublasCreate(&context_blas));
    SNN_CUBLAS_CHECK(cublasSetStream(context_blas, context_stream));
    /* after cublasSetStream, which resets the workspace to cuBLAS's own pool. A device too full
     * for it (or a test's injected failure) leaves cuBLAS its own: slower to account, not wrong. */
    blas_workspace = snn_alloc(SNN_CUDA_BLAS_WORKSPACE_BYTES, SNN_CUDA);
    if (blas_workspace)
        SNN_CUBLAS_CHECK(cublasSetWorkspace(context_blas, blas_workspace,
                                            SNN_CUDA_BLAS_WORKSPACE_BYTES));
    /* alpha and beta are host floats in every call */
    SNN_CUBLAS_CHECK(cublasSetPointerMode(context_blas, CUBLAS_POINTER_MODE_HOST));
    apply_math_mode();
    context_ready.store(true);
}

extern "C" cudaStream_t snn_cuda_stream(void)
{
    if (!context_ready.load()) context_init();
    return context_stream;
}

extern "C" cublasHandle_t snn_cuda_blas(void)
{
    if (!context_ready.load()) context_init();
    return context_blas;
}

extern "C" int snn_cuda_sm_count(void)
{
    if (!context_ready.load()) context_init();
    return context_sm_count;
}

extern "C" void *snn_cuda_scratch(size_t bytes)
{
    SNN_ASSERT(bytes <= SNN_CUDA_SCRATCH_BYTES);
    if (!context_ready.load()) context_init();
    if (!scratch) {
        /* Through snn_alloc so that the bytes are counted; taken once, kept until shutdown. */
        scratch = snn_alloc(SNN_CUDA_SCRATCH_BYTES, SNN_CUDA);
        if (!scratch)
            snn_cuda_fail("snn_cuda_scratch", __FILE__, __LINE__,
                          "cannot allocate the 8 MiB reduction scratch (device memory full?)");
    }
    return scratch;
}

extern "C" void snn_cuda_set_precision(snn_precision p)
{
    precision.store((int)p);
    std::lock_guard<std::mutex> lock(context_mutex);
    if (context_ready.load()) apply_math_mode();
}

extern "C" snn_precision snn_cuda_precision(void) { return (snn_precision)precision.load(); }

extern "C" void snn_cuda_set_tf32(bool on)
{
    snn_cuda_set_precision(on ? SNN_PRECISION_TF32 : SNN_PRECISION_FP32);
}

extern "C" bool snn_cuda_tf32(void) { return precision.load() == SNN_PRECISION_TF32; }

static std::atomic<int> conv_path{SNN_CONV_PATH_AUTO};
extern "C" void snn_cuda_set_conv_path(snn_conv_path path) { conv_path.store((int)path); }
extern "C" snn_conv_path snn_cuda_conv_path(void) { return (snn_conv_path)conv_path.load(); }

extern "C" snn_status snn_cuda_graph_capture_begin(void)
{
    const cudaError_t e = cudaStreamBeginCapture(snn_cuda_stream(), cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess)
        return snn_error(SNN_ERR_STATE, "snn_cuda_graph_capture_begin: %s", cudaGetErrorString(e));
    return SNN_OK;
}

extern "C" void *snn_cuda_graph_capture_end(void)
{
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(snn_cuda_stream(), &graph);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* a kernel launched into a failed capture leaves its error */
        return snn_error_null(SNN_ERR_STATE, "snn_cuda_graph_capture_end: %s (an op in the "
                              "captured forward synchronised with the host or used another "
                              "stream)", cudaGetErrorString(e));
    }
    cudaGraphExec_t exec = NULL;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess)
        return snn_error_null(SNN_ERR_STATE, "snn_cuda_graph_capture_end: instantiate: %s",
                              cudaGetErrorString(e));
    return exec;
}

extern "C" snn_status snn_cuda_graph_launch(void *graph)
{
    const cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)graph, snn_cuda_stream());
    if (e != cudaSuccess)
        return snn_error(SNN_ERR_STATE, "snn_cuda_graph_launch: %s", cudaGetErrorString(e));
    return SNN_OK;
}

extern "C" void snn_cuda_graph_free(void *graph)
{
    if (graph) SNN_CUDA_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)graph));
}

extern "C" void snn_cuda_shutdown(void)
{
    /* Safe to call when nothing was created (the CPU-only path of snn_shutdown). */
    if (!context_ready.load()) return;
    SNN_CUDA_CHECK(cudaStreamSynchronize(context_stream));
    if (scratch) {
        snn_free(scratch, SNN_CUDA_SCRATCH_BYTES, SNN_CUDA);
        scratch = NULL;
    }
    std::lock_guard<std::mutex> lock(context_mutex);
    SNN_CUBLAS_CHECK(cublasDestroy(context_blas));
    snn_free(blas_workspace, SNN_CUDA_BLAS_WORKSPACE_BYTES, SNN_CUDA); /* the stream is synced */
    blas_workspace = NULL;
    SNN_CUDA_CHECK(cudaStreamDestroy(context_stream));
    context_blas = NULL;
    context_stream = NULL;
    context_ready.store(false);
}
