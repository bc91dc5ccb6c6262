/**
 * @file
 * dist.h - data-parallel training over several processes: one process (a rank) per GPU, each
 * with a full copy of the model and its own shard of every batch; gradients are summed across
 * ranks with NCCL (ncclAllReduce) in buckets that start while the backward pass still runs.
 * docs/distributed.md explains the design and the launch conventions.
 *
 *     snn_dist_config c = snn_dist_config_default();
 *     c.rank = env.rank; c.world_size = env.world_size; c.local_rank = env.local_rank;
 *     c.init = env.init; c.device = SNN_CUDA;
 *     snn_dist *d = snn_dist_new(&c);            // rendezvous, cudaSetDevice, ncclCommInitRank
 *     ... build the model on the device ...
 *     snn_dist_attach(d, model);                 // rank 0's weights to all, one gradient buffer
 *     for (each batch of this rank's shard) {
 *         snn_step_begin();
 *         snn_module_zero_grad(model);
 *         loss = ...forward...;
 *         snn_dist_backward(d, loss, batch.count, batch.global_count);  // backward + all-reduce
 *         snn_optimizer_step(opt);               // every rank makes the same update
 *         snn_step_end();
 *     }
 *     snn_module_free(model);
 *     snn_dist_free(d);                          // waits for every rank, then closes
 *
 * Vocabulary: world size W (number of ranks), rank r in 0..W-1, local rank = the rank's index
 * on its host (which GPU it drives). Rank 0 is the one that writes files.
 *
 * Backends: NCCL for CUDA tensors (distributed/comm_nccl.c, built when CMake finds NCCL); for CPU
 * tensors a small TCP backend (distributed/comm_tcp.c), so the whole machinery runs and is tested on
 * machines without a GPU. Both use the same rendezvous and the same bucket logic.
 *
 * Errors follow snn.c's rules: functions return snn_status (or NULL) with a message naming the
 * function, the argument or the rank at fault. A rank that fails or dies makes the others stop
 * with a message within a bounded time (docs/distributed.md, "Faults").
 */
#ifndef SNN_DIST_H
#define SNN_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../nn/nn.h"
#include "../tensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Who am I: rank, world size and rendezvous from the environment (distributed/env.c)
 * ------------------------------------------------------------------------------------------- */

/** What the environment says about this process's place in a distributed run. */
typedef struct snn_dist_env {
    int rank;                      /**< this process's rank, 0..world_size-1 */
    int world_size;                /**< number of ranks; 0: not a distributed run */
    int local_rank;                /**< the rank's index on its host (which GPU it drives) */
    int local_world_size;          /**< ranks on this host */
    char init[512];                /**< the rendezvous: "tcp://HOST:PORT" or "file:PATH" */
    char source[48];               /**< where rank and world came from: "RANK/WORLD_SIZE", ... */
} snn_dist_env;

/** Looks up an environment variable (getenv when NULL is passed to snn_dist_env_read). */
typedef const char *(*snn_getenv_fn)(const char *name, void *ctx);

/**
 * Reads into *out rank and world size from, in order: RANK / WORLD_SIZE (torchrun, snn-train
 * --gpus), OMPI_COMM_WORLD_RANK / _SIZE (Open MPI), PMI_RANK / PMI_SIZE (MPICH, Intel MPI),
 * SLURM_PROCID / SLURM_NTASKS (srun). The local rank from LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
 * MPI_LOCALRANKID or SLURM_LOCALID (else the rank). The rendezvous from `init_flag` (--init), else
 * SNN_DIST_INIT, else tcp://MASTER_ADDR:MASTER_PORT. A run is distributed when WORLD_SIZE is set or
 * init_flag is given; the MPI and Slurm variables are read only then (srun sets them for every
 * program). Returns SNN_OK with world_size = 0 when the run is not distributed; SNN_ERR_ARGUMENT
 * naming the variable for a value that is not a number, a rank out of range, or a missing
 * rendezvous.
 */
snn_status snn_dist_env_read(snn_getenv_fn get, void *ctx, const char *init_flag,
                             snn_dist_env *out);

/** How the ranks find each other. */
typedef enum snn_dist_init_kind {
    SNN_DIST_INIT_TCP,             /**< rank 0 listens on HOST:PORT */
    SNN_DIST_INIT_FILE,            /**< rank 0 publishes its address in a shared file */
} snn_dist_init_kind;

/** A parsed rendezvous (snn_dist_init_parse). */
typedef struct snn_dist_init {
    snn_dist_init_kind kind;       /**< tcp or file */
    char host[256];                /**< tcp: rank 0's host name or address */
    int port;                      /**< tcp: 1..65535 */
    char path[512];                /**< file: a path every rank sees (a shared file system) */
} snn_dist_init;

/** Parses `text`, "tcp://HOST:PORT" (HOST may be [v6 address]) or "file:PATH" / "file://PATH",
 * into *out; SNN_ERR_ARGUMENT with a message otherwise. */
snn_status snn_dist_init_parse(const char *text, snn_dist_init *out);

/* ---------------------------------------------------------------------------------------------
 * Gradient buckets (distributed/buckets.c): a pure function of the parameter sizes
 * ------------------------------------------------------------------------------------------- */

/**
 * The layout of every trainable parameter's gradient in one contiguous buffer, and its cut into
 * buckets that are all-reduced one piece each. Backward produces gradients roughly in reverse
 * order of the parameters (the last layer's first), so the buffer holds them in reverse order:
 * the first bucket to fill is bucket 0, at the start. Each gradient starts at a multiple of
 * `align` floats; a bucket closes once it holds >= bucket_floats (a gradient never straddles
 * two buckets, so one larger than bucket_floats is a bucket of its own).
 */
typedef struct snn_bucket_plan {
    int n_params;             /**< parameters laid out */
    int n_buckets;            /**< buckets they are cut into */
    int64_t *offset;          /**< (n_params) where parameter i's gradient starts, in floats */
    int *bucket;              /**< (n_params) the bucket parameter i belongs to */
    int64_t *bucket_begin;    /**< (n_buckets + 1): bucket b is [bucket_begin[b], [b + 1]) */
    int *bucket_params;       /**< (n_buckets) how many parameters each bucket waits for */
    int64_t total;            /**< floats in the buffer (= bucket_begin[n_buckets]) */
} snn_bucket_plan;

/** Plans into *out the buffer of `n_params` gradients of numel[i] floats each, in buckets of
 * about `bucket_floats`, each gradient aligned to `align` floats (as above); *out owns its
 * arrays (snn_bucket_plan_free). SNN_ERR_ARGUMENT for bad sizes, SNN_ERR_MEMORY. */
snn_status snn_bucket_plan_make(const int64_t *numel, int n_params, int64_t bucket_floats,
                                int64_t align, snn_bucket_plan *out);
/** Frees what snn_bucket_plan_make took and zeroes *plan; a zeroed plan is a no-op. */
void snn_bucket_plan_free(snn_bucket_plan *plan);

/* ---------------------------------------------------------------------------------------------
 * The process group (distributed/comm.c, distributed/reducer.c)
 * ------------------------------------------------------------------------------------------- */

/** What snn_dist_new joins; start from snn_dist_config_default(). */
typedef struct snn_dist_config {
    int rank;                   /**< this process's rank */
    int world_size;             /**< number of ranks */
    int local_rank;             /**< the rank's index on its host: the GPU it drives */
    const char *init;           /**< "tcp://HOST:PORT" or "file:PATH" */
    snn_device device;          /**< CUDA: NCCL; CPU: the TCP backend */
    double timeout_s;           /**< rendezvous, and a collective that makes no progress; 300 */
    size_t bucket_bytes;        /**< gradient bucket size; 25 MiB (PyTorch DDP's default) */
    bool sync_batchnorm;        /**< batch-norm statistics over every rank's batch */
} snn_dist_config;

/** The defaults listed in snn_dist_config; rank 0 of 1 on the CPU, no rendezvous yet. */
snn_dist_config snn_dist_config_default(void);

/** A process group: this rank's membership of a data-parallel run (opaque). */
typedef struct snn_dist snn_dist;

/** Joins the group `config` describes: rendezvous (every rank must call it; it waits up to
 * timeout_s for the others), then the backend (CUDA: selects GPU local_rank, or GPU 0 when only one
 * is visible, before anything else touches CUDA; then ncclCommInitRank). NULL with a message on
 * failure. */
snn_dist *snn_dist_new(const snn_dist_config *config);
/** Leaves the group `d` in order: waits until every rank got here, then closes. NULL is a no-op.
 * Free the attached model (its gradients are views of a buffer the group owns) first. */
void snn_dist_free(snn_dist *d);
/** Leaves `d` at once after a failure of this rank: no waiting, no goodbye, so the other ranks see
 * it leave and stop too (docs/distributed.md, "Faults"). NULL is a no-op. */
void snn_dist_abort(snn_dist *d);

/** The exit code of a rank that stopped because another rank failed or left. */
#define SNN_DIST_EXIT_PEER 4

/** True when this build has the NCCL backend (several GPUs); the TCP backend is always there. */
bool snn_dist_nccl_compiled(void);

/** The rank of `d`; 0 for NULL: a non-distributed run is rank 0. */
int snn_dist_rank(const snn_dist *d);
/** The world size of `d`; 1 for NULL. */
int snn_dist_world_size(const snn_dist *d);
/** The backend of `d`: "nccl" or "tcp" ("none" for NULL). */
const char *snn_dist_backend(const snn_dist *d);

/**
 * Prepares `model`, built on the group's device (and its optimizer's parameters: make the
 * optimizer before or after, either works): copies rank 0's parameters and buffers to every
 * rank, makes every trainable parameter's gradient a view of one contiguous buffer laid out by
 * snn_bucket_plan_make, and with sync_batchnorm turns on the batch-norm sync. One model per
 * group.
 */
snn_status snn_dist_attach(snn_dist *d, snn_module *model);

/**
 * The backward of one step of data-parallel training (group `d`), for a loss that is the mean over
 * this rank's `count` samples of a global batch of `global_count` samples (the loader's
 * snn_batch.count and .global_count). It seeds the backward with count / global_count, so that the
 * sum over ranks of the gradients is the gradient of the mean over the global batch; each bucket of
 * the gradient buffer is summed over the ranks (ncclAllReduce on a side stream) as soon as the
 * backward has finished with its parameters. Returns once the sums are queued before whatever comes
 * next on the device (the optimizer step).
 */
snn_status snn_dist_backward(snn_dist *d, snn_tensor *loss, int count, int global_count);

/** values (n doubles, host memory) <- their sum over the ranks of `d`. Blocks. */
snn_status snn_dist_allreduce_host(snn_dist *d, double *values, int n);
/** Copies rank 0's buffers of `model` (batch-norm running statistics) to every rank of `d`: with
 * per-rank batch-norm they drift apart; this makes evaluation and the checkpoint rank 0's. */
snn_status snn_dist_broadcast_buffers(snn_dist *d, snn_module *model);
/** Checks that every rank of `d` holds the same trainable parameters of `model`, bit for bit (a
 * 64-bit hash of each rank's parameters, all-gathered): SNN_ERR_STATE naming the first rank that
 * differs. */
snn_status snn_dist_check_replicas(snn_dist *d, snn_module *model);

/** buf (n floats, memory of the group's device) <- its sum over the ranks of `d`, in the order of
 * the device's queued work (benchmarks time it: bench/bench_dist.c). */
snn_status snn_dist_allreduce(snn_dist *d, float *buf, int64_t n);
/** The milliseconds between the end of the last snn_dist_backward's backward pass on the device
 * and the end of its gradient all-reduce: the communication the backward did not hide
 * (exposed). Waits for the device. -1 for a backend without a side stream (TCP). */
double snn_dist_exposed_ms(snn_dist *d);

/* ---------------------------------------------------------------------------------------------
 * The launcher of snn-train --gpus N (distributed/launch.c)
 * ------------------------------------------------------------------------------------------- */

/**
 * Starts n_ranks copies of this program on this host, ranks 0..n-1, with argv less the option
 * `drop_option` and its value (argv[0] is re-executed as /proc/self/exe). Each child gets the
 * parent's environment unchanged plus RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and a
 * rendezvous on a loopback port the launcher holds open (SNN_DIST_INIT, SNN_DIST_LISTEN_FD).
 * Waits for all; when one fails or is killed, says which and how, gives the others 5 s to stop
 * by themselves, then stops them (SIGTERM, then SIGKILL after 10 s), and returns the exit code
 * of the root cause: a rank killed by a signal (128 + signal), else one that failed by itself,
 * before ranks that stopped because another failed. Returns 0 when all succeed. SIGINT and
 * SIGTERM sent to the launcher are passed to the ranks.
 */
int snn_dist_launch(int n_ranks, int argc, char **argv, const char *drop_option);

#ifdef __cplusplus
}
#endif

#endif /* SNN_DIST_H */
