#!/usr/bin/env bash
# gpu_session.sh - everything one call of the GPU machine does, in one script, logging to $OUT.
#
#   tools/gpu_session.sh test      build for sm_90, run every test (CPU and CUDA), then
#                                  compute-sanitizer memcheck on the CUDA tests
#   tools/gpu_session.sh ref       regenerate tests/ref/tiny_resnet.safetensors with PyTorch
#   tools/gpu_session.sh bench     the benchmark programs (bench/) and the PyTorch comparison
#   tools/gpu_session.sh train     snn-train --device cuda runs (needs .carry/ with the data)
#   tools/gpu_session.sh cudatests   only the ctest `cuda` label (parity tests)
#   tools/gpu_session.sh sparsebench bench_sparse alone (CPU table, then the GPU tables)
#   tools/gpu_session.sh igemm     the tensor-core conv: parity, sanitizer, per-layer and per-step
#                                  benchmarks in fp32 / TF32 / BF16 beside PyTorch
#   tools/gpu_session.sh nhwc      the channels-last conv: parity, per-layer table, and the
#                                  BF16 step against the tree in .carry/base-src.tgz
#   tools/gpu_session.sh infer     inference at batch 1 and 64 (BF16, TF32) against .carry/base-src.tgz
#   tools/gpu_session.sh fusion    batch-norm -> neuron as one op: CUDA tests, memcheck, the step
#                                  with fusion on / off and .carry/base-src.tgz (BF16, TF32)
#   tools/gpu_session.sh distcheck dist's tests only (sync-BN parity, NCCL smoke, -L multigpu)
#   tools/gpu_session.sh bitcheck  a short CUDA ResNet-18 training, this tree against .carry/base-src.tgz:
#                                  the loss lines must match (changes that claim to keep the bits)
#   tools/gpu_session.sh packtest  spikes kept as bits: every CUDA test, memcheck on its test
#   tools/gpu_session.sh packing   the step with spikes as bits / floats / .carry/base-src.tgz
#   tools/gpu_session.sh steptable the training-step table: every precision and batch, and PyTorch
#   tools/gpu_session.sh precision 5-epoch accuracy of the CNN and ResNet-18 in fp32 / TF32 / BF16
#   tools/gpu_session.sh nir       train a small CNN (CUDA), snn-export-nir, then tools/nir_check.py
#                                  runs the NIR file in plain PyTorch (h5py) against snn-eval
#   tools/gpu_session.sh nircheck  NIR files exported on the dev machine (.carry/nir/) run by
#                                  tools/nir_check.py in PyTorch on the GPU against snn-eval
#   tools/gpu_session.sh reliability issue 19: memory estimate vs measured on the GPU, SIGTERM
#                                  and resume on CUDA, sizes refused (needs .carry/ with the data)
#   tools/gpu_session.sh dist      data-parallel training (NCCL): multigpu tests (skip on 1 GPU),
#                                  the world-size-1 NCCL smoke, and with >= 2 GPUs the scaling
#                                  table of bench_dist (needs .carry/ with the data for the tests)
#   tools/gpu_session.sh distacc   2 GPUs: 5 epochs of the CIFAR-format ResNet-18 (TF32; ACC_PRECISION
#                                  picks another) on 1 GPU x 128 and on 2 GPUs x 64 with --sync-bn,
#                                  test accuracy side by side (~5 minutes); distacc1 and distacc2
#                                  run one half each, so that the 1-GPU half can run on a 1-GPU machine
#   tools/gpu_session.sh sparse15a   issue 15, call 1 of 2 (<= ~8.5 min): ResNet-18 trained at 4
#                                  activity penalties, sparse vs dense on the GPU and the CPU
#   tools/gpu_session.sh sparse15b   issue 15, call 2 of 2 (<= ~8.5 min): its CUDA tests, the GPU
#                                  kernel tables, ResNet-50 trained briefly, run at T = 16
#   tools/gpu_session.sh ann2snn   ANN -> SNN: the conversion tests, the ANN vs SNN profile
#                                  table (bench_train_step), snn-ann2snn on CUDA (needs .carry/)
#   tools/gpu_session.sh ann2snn-oom the converted ResNet-18's sparse pass at T* = 51 that ran out
#                                  of memory (docs/ann2snn.md, section 5): three CUDA tests and
#                                  that one snn-ann2snn run, device memory sampled (~2-3 min after
#                                  the build; needs .carry/)
#   tools/gpu_session.sh recipe    issue 16: one recipe run of the spiking CNN (RECIPE_T, RECIPE_EPOCHS,
#                                  RECIPE_NAME, RECIPE_SECONDS; see the case below)
#   tools/gpu_session.sh threads   issue 15: batch-1 CPU latency by thread count, main against the
#                                  code before the thread rule (.carry/old-src.tgz; see the case)
#   tools/gpu_session.sh jobs      single-GPU training runs side by side, one per GPU, stopped at a
#                                  deadline and resumed by the next call (JOBS_FILE; see the case)
#   tools/gpu_session.sh jobsparse snn-sparse on the GPU and the CPU for finished jobs (JOBS_SPARSE)
#   tools/gpu_session.sh batch1    issue 15: batch-1 latency with and without the one-sample round
#   (also: ops, kernels, step, profile, sparse: see the cases below)
# Stages can be combined: tools/gpu_session.sh ref test bench
set -uo pipefail
OUT=${OUT:-/tmp/snn-out}
LOGS=/tmp/snn-logs            # everything; packed into $OUT/logs.tgz at the end (8 files come back)
mkdir -p "$OUT" "$LOGS"
trap 'tar -C /tmp -czf "$OUT/logs.tgz" snn-logs 2>/dev/null' EXIT
export PATH="/usr/local/cuda/bin:$PATH"
log() { echo "== $* [${SECONDS}s]" | tee -a "$OUT/summary.txt"; }
summary() { tee -a "$OUT/summary.txt"; }

build() {
  # incremental: a warm machine keeps build-gpu/ between calls; arguments: only those targets
  log "build (sm_90, Release)${1:+: $*}"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        > "$LOGS/cmake.log" 2>&1 || { tail -20 "$LOGS/cmake.log"; return 1; }
  cmake --build build-gpu -j 16 ${1:+--target "$@"} -- -k > "$LOGS/build.log" 2>&1 ||
    grep -E "error" "$LOGS/build.log" | head -30
}

# The tree in .carry/base-src.tgz (`git archive --prefix=base-src/ -o .carry/base-src.tgz BASE`):
# its targets (arguments; bench_train_step by default) built in /tmp/base-build, in the
# background (`wait` for it).
build_base() {
  [ -f .carry/base-src.tgz ] || return 0
  rm -rf /tmp/base-src && tar -xzf .carry/base-src.tgz -C /tmp
  ( cmake -S /tmp/base-src -B /tmp/base-build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      > "$LOGS/base_cmake.log" 2>&1 &&
    cmake --build /tmp/base-build -j 8 --target "${@:-bench_train_step}" > "$LOGS/base_build.log" 2>&1 ) &
}

# sparse15a / sparse15b: seconds since the stage began (S15_START); s15_go SECONDS command...
# runs the command under `timeout`, cut to what is left until S15_END, or skips it (and says so)
# when under 15 s are left, so that each stage fits one device call.
s15_time() { echo "   ($(( $(date +%s) - S15_START )) s since the stage began)" | summary; }
s15_go() {
  local t=$1 left=$(( S15_END - $(date +%s) )); shift
  # (straight into summary.txt: the callers send the command's own output elsewhere)
  if (( left < 15 )); then echo "   skipped (stage budget spent): ${*:1:4}" >> "$OUT/summary.txt"; return 124; fi
  (( left < t )) && t=$left
  timeout "$t" "$@"
}

for stage in "$@"; do
  case "$stage" in
  ref)
    log "PyTorch golden reference"
    python3 tests/ref/make_ref.py 2>&1 | summary
    cp tests/ref/tiny_resnet.safetensors "$OUT/" ;;
  test)
    build || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    log "ctest (all)"
    SNN_DATA_DIR=$PWD/.carry ctest --test-dir build-gpu --output-on-failure -j 8 --timeout 300 > "$LOGS/ctest.log" 2>&1
    grep -E "tests passed|tests failed|\*\*\*|Failed|Skipped|Not Run" "$LOGS/ctest.log" | summary
    grep -E "FAIL|CHECK failed|rel|error" "$LOGS/ctest.log" | head -40 | summary
    # API errors are off: our own calls are checked by SNN_CUDA_CHECK, and libnccl probes kernels
    # of other architectures (cudaFuncGetAttributes -> error 209) on purpose while it starts
    # SANITIZE=none skips memcheck; SANITIZE=REGEX runs it on the CUDA tests whose name matches
    [ "${SANITIZE:-all}" = none ] && continue
    log "compute-sanitizer memcheck on the CUDA tests (${SANITIZE:-all})"
    for t in build-gpu/bin/test_cuda_*; do
      [ "${SANITIZE:-all}" = all ] || [[ $(basename "$t") =~ ${SANITIZE} ]] || continue
      SNN_DATA_DIR=$PWD/.carry timeout ${SANITIZER_TIMEOUT:-100} compute-sanitizer --tool memcheck \
        --report-api-errors no --error-exitcode 9 "$t" > "$LOGS/sanitizer_$(basename "$t").log" 2>&1
      echo "$(basename "$t"): exit $? $(grep -E 'ERROR SUMMARY' "$LOGS/sanitizer_$(basename "$t").log")" | summary
    done ;;
  bench)
    build || exit 1
    for b in bench_ops bench_neurons bench_train_step bench_sparse; do
      [ -x build-gpu/bin/$b ] || continue
      log "$b"
      timeout 240 build-gpu/bin/$b 2>&1 | tee "$LOGS/$b.txt" | summary
    done
    log "PyTorch reference: torch_train_step.py (fp32), then with TF32"
    timeout 200 python3 bench/torch_train_step.py 2>&1 | summary
    timeout 200 python3 bench/torch_train_step.py --tf32 2>&1 | summary ;;
  train)
    build || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    log "snn-train: Fashion-MNIST spiking CNN on CUDA (width 128, T=4, batch 128, Adam 1e-3, IF + ATan, MSE rate loss, 5 epochs)"
    build-gpu/bin/snn-train --device cuda --width 128 --T 4 --batch-size 128 --optimizer adam --lr 1e-3 \
      --neuron if --surrogate atan --loss mse --epochs 5 --out "$LOGS/fmnist_cuda" 2>&1 | grep -v "^train" | summary
    log "snn-make-cifar, then spiking ResNet-18 on the CIFAR-format Fashion-MNIST"
    mkdir -p /tmp/fmcifar
    build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz 2>&1 | tail -2 | summary
    build-gpu/bin/snn-train --device cuda --model resnet18 --dataset cifar10 --data /tmp/fmcifar --epochs 2 \
      --batch-size 128 --T 4 --out "$LOGS/resnet_cuda" 2>&1 | grep -v "^train" | summary ;;
  ops)
    build || exit 1
    log "bench_ops (every tensor kernel)"
    timeout 240 build-gpu/bin/bench_ops cuda 2>&1 | summary ;;
  cudatests)
    build || exit 1
    log "ctest -L cuda (the CUDA parity tests only)"
    SNN_DATA_DIR=$PWD/.carry ctest --test-dir build-gpu -L cuda --output-on-failure -j 4 > "$LOGS/ctest_cuda.log" 2>&1
    grep -E "tests passed|tests failed|Failed|Skipped|Not Run|differs|FAIL" "$LOGS/ctest_cuda.log" | head -30 | summary ;;
  sparsebench)
    build || exit 1
    log "bench_sparse (16 host threads; GPU tables at 16 and 256 images)"
    timeout 300 build-gpu/bin/bench_sparse 16 2>&1 | tee "$LOGS/bench_sparse.txt" | summary ;;
  kernels)
    build || exit 1
    log "the CUDA kernel parity test"
    build-gpu/bin/test_cuda_kernels 2>&1 | grep -E "FAIL|checks" | summary ;;
  step)
    build || exit 1
    log "bench_train_step (spiking ResNet-18, T=4)"
    timeout 240 build-gpu/bin/bench_train_step 2>&1 | summary
    timeout 240 build-gpu/bin/bench_train_step --tf32 2>&1 | summary ;;
  profile)
    # PROFILE_PRECISION (fp32 by default): the precision of the profiled step
    build bench_train_step || exit 1
    log "ncu: GPU time per kernel over ~one training step of bench_train_step (B=64, T=4, ${PROFILE_PRECISION:-fp32})"
    # 3 warm-up steps + 1 timed step, training only: divide the totals by 4 for one step
    timeout 500 ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      build-gpu/bin/bench_train_step --batch 64 --steps 1 --no-infer --precision ${PROFILE_PRECISION:-fp32} \
      > "$LOGS/ncu.txt" 2>&1
    python3 tools/ncu_summary.py "$LOGS/ncu.txt" 4 2>&1 | tee "$OUT/profile_${PROFILE_PRECISION:-fp32}.txt" | summary ;;
  ncukernel)
    # one launch of each kernel named in NCU_KERNELS (regex, comma-separated) in a BF16 training
    # step (B = 64): speed of light, memory workload, occupancy, launch statistics
    build bench_train_step || exit 1
    for kern in ${NCU_KERNELS//,/ }; do
      log "ncu --set detailed: $kern"
      timeout 200 ncu --kernel-name "regex:$kern" --launch-skip ${NCU_SKIP:-6} --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
        --section LaunchStats --section SchedulerStats --section WarpStateStats \
        build-gpu/bin/bench_train_step --batch 64 --steps 1 --no-infer --precision bf16 \
        > "$LOGS/ncu_$kern.txt" 2>&1
      grep -E "Duration|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Eligible|Issued Warp|Stall|Compute \(SM\)|L1/TEX Hit|L2 Hit|Grid Size|Waves" \
        "$LOGS/ncu_$kern.txt" | head -40 | summary
    done ;;
  sparse)
    build || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    mkdir -p /tmp/fmcifar
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    log "train the models the sparse pass is measured on (CUDA): CNN (main-job defaults) and ResNet-18"
    build-gpu/bin/snn-train --device cuda --epochs 4 --out "$LOGS/cnn_main" 2>&1 | grep -E "^epoch|done" | summary
    build-gpu/bin/snn-train --device cuda --model resnet18 --dataset cifar10 --data /tmp/fmcifar \
      --epochs 2 --out "$LOGS/resnet_sparse" 2>&1 | grep -E "^epoch|done" | summary
    for dev in ${SPARSE_DEVICES:-cuda cpu}; do
      log "snn-sparse --device $dev: spiking CNN"
      timeout 200 build-gpu/bin/snn-sparse --checkpoint "$LOGS/cnn_main/checkpoint.safetensors" --device $dev \
        --limit-test 2000 2>&1 | summary
      log "snn-sparse --device $dev: spiking ResNet-18"
      timeout 300 build-gpu/bin/snn-sparse --checkpoint "$LOGS/resnet_sparse/checkpoint.safetensors" \
        --data /tmp/fmcifar --device $dev --limit-test 2000 2>&1 | summary
    done ;;
  igemm)
    # issue 11: the tensor-core conv's parity, then its speed per layer and per training step
    build || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    log "test_cuda_igemm (TF32 / BF16, igemm and im2col paths, against the CPU reference)"
    timeout 300 build-gpu/bin/test_cuda_igemm > "$LOGS/test_cuda_igemm.log" 2>&1
    echo "exit $?" | summary; grep -E "FAIL|rel|checks" "$LOGS/test_cuda_igemm.log" | head -20 | summary
    log "ctest -L cuda"
    SNN_DATA_DIR=$PWD/.carry timeout 200 ctest --test-dir build-gpu -L cuda --output-on-failure -j 4 > "$LOGS/ctest_cuda.log" 2>&1
    grep -E "tests passed|tests failed|Failed|Not Run|differs|FAIL" "$LOGS/ctest_cuda.log" | head -30 | summary
    log "bench_conv2d_cuda (256 images: batch 64 x T 4)"
    timeout 120 build-gpu/bin/bench_conv2d_cuda 2>&1 | tee "$LOGS/bench_conv2d_cuda.txt" | summary
    for p in ${PRECISIONS:-fp32 tf32 bf16}; do
      log "bench_train_step --precision $p (ResNet-18, T=4)"
      timeout 150 build-gpu/bin/bench_train_step --precision $p --batch ${STEP_BATCHES:-16,64,128,256} \
        --steps 10 --memory 2>&1 | tee "$LOGS/bench_train_step_$p.txt" | summary
    done
    for flag in --tf32 --bf16; do
      log "PyTorch reference torch_train_step.py $flag"
      timeout 120 python3 bench/torch_train_step.py $flag --batch ${STEP_BATCHES:-16,64,128,256} --steps 10 2>&1 | summary
    done
    log "compute-sanitizer memcheck on test_cuda_igemm"
    timeout 600 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/bin/test_cuda_igemm > "$LOGS/sanitizer_igemm.log" 2>&1
    echo "exit $? $(grep -E 'ERROR SUMMARY' "$LOGS/sanitizer_igemm.log")" | summary ;;
  nhwc)
    # issue 11: the channels-last conv (kernels/cuda/conv/conv2d_nhwc.cu): parity on every shape it
    # takes, the per-layer table, and the BF16 training step against the code before it (the
    # tree in .carry/base-src.tgz, made by `git archive --prefix=base-src/ -o
    # .carry/base-src.tgz BASE`; its bench_train_step and bench_conv2d_cuda are built beside
    # this tree's), same call.
    build_base bench_train_step bench_conv2d_cuda
    build test_cuda_igemm bench_conv2d_cuda bench_train_step || exit 1
    wait
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    log "test_cuda_igemm (every path, incl. nhwc, against the CPU reference)"
    timeout 300 build-gpu/bin/test_cuda_igemm > "$OUT/test_cuda_igemm.log" 2>&1
    echo "exit $?" | summary; grep -E "FAIL|checks|passed" "$OUT/test_cuda_igemm.log" | head -30 | summary
    log "bench_conv2d_cuda (256 images: batch 64 x T 4)"
    timeout 150 build-gpu/bin/bench_conv2d_cuda 2>&1 | tee "$OUT/bench_conv2d_cuda.txt" | grep -vE "^\| .* (fp32|tf32) " | summary
    if [ -x /tmp/base-build/bin/bench_conv2d_cuda ]; then
      log "bench_conv2d_cuda, base"
      timeout 150 /tmp/base-build/bin/bench_conv2d_cuda 2>&1 | tee "$LOGS/bench_conv2d_cuda_base.txt" |
        grep -vE "^\| .* (fp32|tf32) " | summary
    fi
    for b in base new; do
      bin=build-gpu/bin/bench_train_step; [ $b = base ] && bin=/tmp/base-build/bin/bench_train_step
      [ -x "$bin" ] || { echo "   $b: no bench_train_step" | summary; continue; }
      log "bench_train_step --precision bf16, $b"
      timeout 120 "$bin" --precision bf16 --batch ${STEP_BATCHES:-64,128} --steps 10 \
        --infer-batch 1,64 2>&1 | tee "$OUT/step_bf16_$b.txt" | grep -E "^\||conv path" | summary
    done
    if [ -n "${NHWC_SANITIZE:-}" ]; then
      log "compute-sanitizer memcheck: test_cuda_igemm, test_conv_nhwc only"
      SNN_TEST_ONLY=test_conv_nhwc timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
        build-gpu/bin/test_cuda_igemm > "$LOGS/sanitizer_nhwc.log" 2>&1
      echo "exit $? $(grep -E 'ERROR SUMMARY' "$LOGS/sanitizer_nhwc.log"); $(grep -cE '^ok|^FAIL' "$LOGS/sanitizer_nhwc.log") test(s) run" | summary
    fi ;;
  infer)
    # issue 11: the eval-mode conv + batch-norm (+ residual) op's parity test, then inference
    # (CUDA Graph) at batch 1 and 64 in BF16 and TF32, this tree against .carry/base-src.tgz,
    # alternating, two rounds (INFER_ROUNDS)
    build_base
    build test_cuda_igemm bench_train_step || exit 1
    wait
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    log "test_cuda_igemm: test_conv_bn_eval"
    SNN_TEST_ONLY=test_conv_bn_eval timeout 300 build-gpu/bin/test_cuda_igemm > "$OUT/test_conv_bn_eval.log" 2>&1
    echo "exit $?" | summary; grep -E "FAIL|checks|passed" "$OUT/test_conv_bn_eval.log" | head -10 | summary
    for round in $(seq ${INFER_ROUNDS:-2}); do
      for b in base new; do
        bin=build-gpu/bin/bench_train_step; [ $b = base ] && bin=/tmp/base-build/bin/bench_train_step
        [ -x "$bin" ] || { echo "   $b: no bench_train_step" | summary; continue; }
        for p in bf16 tf32; do
          log "round $round, $b, $p: inference"
          timeout 120 "$bin" --precision $p --batch 16 --steps 3 --infer-batch 1,64 2>&1 |
            tee -a "$LOGS/infer_$b.txt" | grep -iE "infer|graph" | summary
        done
      done
    done ;;
  fusion)
    # issue 11: batch-norm -> neuron as one op (snn_batchnorm_neuron): the CUDA tests, memcheck
    # on its test, then the training step with fusion on and off (one build) and the tree in
    # .carry/base-src.tgz, BF16 and TF32
    build_base
    build || exit 1
    wait
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    log "ctest -L cuda"
    SNN_DATA_DIR=$PWD/.carry ctest --test-dir build-gpu -L cuda --output-on-failure -j 4 > "$LOGS/ctest_cuda.log" 2>&1
    grep -E "tests passed|tests failed|Failed|Skipped|Not Run|differs|FAIL" "$LOGS/ctest_cuda.log" | head -30 | summary
    log "compute-sanitizer memcheck: test_cuda_bn_neuron"
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/bin/test_cuda_bn_neuron \
      > "$LOGS/sanitizer_bn_neuron.log" 2>&1
    echo "exit $? $(grep -E 'ERROR SUMMARY' "$LOGS/sanitizer_bn_neuron.log")" | summary
    for p in bf16 tf32; do
      for v in new nofusion base; do
        bin=build-gpu/bin/bench_train_step; flag=""
        [ $v = base ] && bin=/tmp/base-build/bin/bench_train_step
        [ $v = nofusion ] && flag=--no-fusion
        [ -x "$bin" ] || { echo "   $v: no bench_train_step" | summary; continue; }
        log "bench_train_step --precision $p, $v"
        timeout 150 "$bin" --precision $p --batch ${STEP_BATCHES:-64,128,256} --steps 10 \
          --infer-batch 1,64 $flag 2>&1 | tee "$OUT/step_${p}_$v.txt" | grep -E "^\| (train|infer)" | summary
      done
    done ;;
  bitcheck)
    # the same short ResNet-18 training (CUDA, BF16 and fp32, deterministic in both) with this
    # tree and the tree in .carry/base-src.tgz: for a change that claims to keep the bits, the
    # checkpoints (every weight and Adam moment after the run) must be the same bytes
    build_base snn-train
    build snn-train || exit 1
    wait
    export SNN_DATA_DIR=$PWD/.carry
    for p in bf16 fp32; do
      for v in new base; do
        bin=build-gpu/bin/snn-train; [ $v = base ] && bin=/tmp/base-build/bin/snn-train
        rm -rf /tmp/bitcheck_${v}_$p
        timeout 120 "$bin" --device cuda --model resnet18 --T 4 --epochs 1 --limit-train 2048 \
          --limit-test 512 --precision $p --seed 3 --out /tmp/bitcheck_${v}_$p \
          > "$LOGS/bitcheck_${v}_$p.txt" 2>&1
      done
      log "bitcheck $p: checkpoint.safetensors of this tree against the base"
      cmp /tmp/bitcheck_new_$p/checkpoint.safetensors /tmp/bitcheck_base_$p/checkpoint.safetensors \
        > /dev/null 2>&1 && echo "   the same bytes" | summary || echo "   DIFFER" | summary
      grep -E "^epoch" "$LOGS/bitcheck_new_$p.txt" "$LOGS/bitcheck_base_$p.txt" | summary
    done ;;
  packtest)
    # issue 11: spikes kept as bits (snn_spikes_pack): every CUDA test, then memcheck on the
    # packing test (kernels and model steps with packed spikes)
    build || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    log "ctest -L cuda"
    SNN_DATA_DIR=$PWD/.carry ctest --test-dir build-gpu -L cuda --output-on-failure -j 4 > "$LOGS/ctest_cuda.log" 2>&1
    grep -E "tests passed|tests failed|Failed|Skipped|Not Run|differ|FAIL" "$LOGS/ctest_cuda.log" | head -30 | summary
    cp "$LOGS/ctest_cuda.log" "$OUT/"
    log "compute-sanitizer memcheck: test_cuda_spike_pack"
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/bin/test_cuda_spike_pack \
      > "$LOGS/sanitizer_spike_pack.log" 2>&1
    echo "exit $? $(grep -E 'ERROR SUMMARY' "$LOGS/sanitizer_spike_pack.log")" | summary ;;
  packing)
    # issue 11: the training step with spikes kept as bits and as floats (--no-spike-packing),
    # one build, and the tree in .carry/base-src.tgz; BF16 and TF32 (PACK_PRECISIONS) at
    # STEP_BATCHES; the memory table (--memory) of the first batch for the new tree
    build_base
    build bench_train_step || exit 1
    wait
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    for p in ${PACK_PRECISIONS:-bf16 tf32}; do
      for v in new floats base; do
        bin=build-gpu/bin/bench_train_step; flag=""
        [ $v = base ] && bin=/tmp/base-build/bin/bench_train_step
        [ $v = floats ] && flag=--no-spike-packing
        [ $v = new ] && flag=--memory
        [ -x "$bin" ] || { echo "   $v: no bench_train_step" | summary; continue; }
        log "bench_train_step --precision $p, $v"
        timeout 150 "$bin" --precision $p --batch ${STEP_BATCHES:-64,128,256} --steps 10 \
          --no-infer $flag 2>&1 | tee "$OUT/step_${p}_$v.txt" | grep -E "^\| train" | summary
      done
    done ;;
  steptable)
    # issue 11: the training-step table of docs/benchmarks.md in one call: bench_train_step in
    # each precision at batch 16 / 64 / 128 / 256 (with the memory table of the first batch),
    # then the PyTorch reference in TF32 and BF16 on the same GPU
    build bench_train_step || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    for p in ${PRECISIONS:-fp32 tf32 bf16}; do
      log "bench_train_step --precision $p (ResNet-18, T=4)"
      timeout 150 build-gpu/bin/bench_train_step --precision $p --batch ${STEP_BATCHES:-16,64,128,256} \
        --steps 10 --memory 2>&1 | tee "$OUT/step_$p.txt" | grep -E "^\|" | summary
    done
    for flag in --tf32 --bf16; do
      log "PyTorch reference torch_train_step.py $flag"
      timeout 150 python3 bench/torch_train_step.py $flag --batch ${STEP_BATCHES:-16,64,128,256} --steps 10 2>&1 |
        tee "$OUT/torch_${flag#--}.txt" | summary
    done ;;
  precision)
    # issue 11: accuracy after 5 epochs in each precision; the three runs of a model share the GPU.
    # PRECISION_MODELS (default "cnn resnet"): which of the two models to train
    build || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    mkdir -p /tmp/fmcifar
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    models=" ${PRECISION_MODELS:-cnn resnet} "
    [[ $models == *" cnn "* ]] && {
    log "spiking CNN (width 128, T=4) on Fashion-MNIST, 5 epochs, fp32 / tf32 / bf16 side by side"
    for p in fp32 tf32 bf16; do
      build-gpu/bin/snn-train --device cuda --width 128 --T 4 --epochs 5 --precision $p \
        --out "$LOGS/cnn_$p" > "$LOGS/cnn_$p.log" 2>&1 &
    done
    wait
    for p in fp32 tf32 bf16; do echo "-- cnn $p"; grep -E "^epoch|done" "$LOGS/cnn_$p.log"; done | summary
    }
    [[ $models == *" resnet "* ]] || continue
    log "spiking ResNet-18 (T=4) on CIFAR-format Fashion-MNIST, 5 epochs, fp32 / tf32 / bf16 side by side"
    for p in fp32 tf32 bf16; do
      build-gpu/bin/snn-train --device cuda --model resnet18 --dataset cifar10 --data /tmp/fmcifar \
        --epochs 5 --T 4 --precision $p --out "$LOGS/resnet_$p" > "$LOGS/resnet_$p.log" 2>&1 &
    done
    wait
    for p in fp32 tf32 bf16; do echo "-- resnet18 $p"; grep -E "^epoch|done" "$LOGS/resnet_$p.log"; done | summary ;;
  nir)
    build || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    [ -x build-gpu/bin/snn-export-nir ] || { log "nir: snn-export-nir not built (no HDF5: apt-get install libhdf5-dev)"; continue; }
    log "nir: spiking CNN on Fashion-MNIST (CUDA, 2 epochs, T=4), NIR export, the file run in PyTorch"
    build-gpu/bin/snn-train --device cuda --epochs 2 --T 4 --out "$LOGS/nir_cnn" 2>&1 | grep -E "^epoch|done" | summary
    ckpt="$LOGS/nir_cnn/checkpoint.safetensors"
    build-gpu/bin/snn-export-nir --checkpoint "$ckpt" -o "$OUT/cnn.nir" 2>&1 | summary
    build-gpu/bin/snn-eval --checkpoint "$ckpt" --device cpu --predictions "$LOGS/nir_pred.txt" 2>&1 | grep -E "accuracy" | summary
    timeout 300 python3 tools/nir_check.py "$OUT/cnn.nir" --predictions "$LOGS/nir_pred.txt" --device cuda 2>&1 | summary
    log "nir: SEW-ResNet-18 (width 16, 1 epoch on 20000 images), export and check"
    build-gpu/bin/snn-train --device cuda --model sew-resnet18 --width 16 --epochs 1 --T 2 --limit-train 20000 \
      --out "$LOGS/nir_sew" 2>&1 | grep -E "^epoch|done" | summary
    build-gpu/bin/snn-export-nir --checkpoint "$LOGS/nir_sew/checkpoint.safetensors" -o "$LOGS/sew.nir" 2>&1 | summary
    build-gpu/bin/snn-eval --checkpoint "$LOGS/nir_sew/checkpoint.safetensors" --device cuda \
      --predictions "$LOGS/nir_sew_pred.txt" 2>&1 | grep -E "accuracy" | summary
    timeout 300 python3 tools/nir_check.py "$LOGS/sew.nir" --predictions "$LOGS/nir_sew_pred.txt" --device cuda 2>&1 | summary ;;
  nircheck)
    # NIR files exported on the dev machine (HDF5 there) with snn-eval's predictions beside them,
    # carried in .carry/nir/<name>.nir + <name>_pred.txt: each run in plain PyTorch on this GPU
    log "nir: the carried NIR files run in plain PyTorch (h5py) on the GPU against snn-eval"
    for f in .carry/nir/*.nir; do
      [ -f "$f" ] || { log "nircheck: no .carry/nir/*.nir"; break; }
      log "nir_check.py $(basename "$f")"
      timeout 240 python3 tools/nir_check.py "$f" --predictions "${f%.nir}_pred.txt" \
        --data .carry/fashion-mnist --device cuda 2>&1 | summary
    done ;;
  reliability)
    build || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    log "issue 19: the memory estimate against the measured step on the GPU; SIGTERM + resume on CUDA"
    timeout 400 ctest --test-dir build-gpu -R '^(cuda_memory_estimate|cuda_train)$' -V \
      > "$LOGS/reliability.log" 2>&1
    echo "ctest exit $?" | summary
    grep -E "case \(|  (cnn|resnet|sew|dvsnet)|estimated total|SIGTERM|^[0-9]+: (ok|FAIL)|CHECK|checks,|tests passed|tests failed" \
      "$LOGS/reliability.log" | summary
    log "issue 19: sizes that cannot fit on the GPU are refused before allocating (want exit 2, not 137)"
    for flags in "--width 100000" "--width 256 --T 16 --batch-size 60000"; do
      timeout 120 build-gpu/bin/snn-train --device cuda $flags --epochs 1 --out /tmp/snn-refused \
        > "$LOGS/refused.txt" 2>&1
      echo "snn-train --device cuda $flags: exit $?" | summary
      grep -E "needs about|weights|hint" "$LOGS/refused.txt" | summary
    done ;;
  dist|distcheck)
    # only what this stage runs: a full build is not needed. distcheck: the tests only (a short
    # multi-GPU call), not the scaling benchmarks
    log "build (sm_90, Release): the data-parallel targets"
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
          > "$LOGS/cmake_dist.log" 2>&1 || { tail -20 "$LOGS/cmake_dist.log"; exit 1; }
    grep -E "snn.c: CUDA" "$LOGS/cmake_dist.log" | summary
    cmake --build build-gpu -j 16 --target snn-train snn-eval bench_dist test_multigpu_train \
          test_cuda_dist_smoke test_cuda_batchnorm_sync > "$LOGS/build_dist.log" 2>&1 ||
      { grep -E "error" "$LOGS/build_dist.log" | head -30 | summary; exit 1; }
    nvidia-smi -L | summary
    ngpu=$(nvidia-smi -L | wc -l)
    export SNN_DATA_DIR=$PWD/.carry
    log "ctest: sync-BN kernel parity, the world-size-1 NCCL smoke (--gpus 1 = the plain run, byte for byte), multigpu (skipped below 2 GPUs)"
    ctest --test-dir build-gpu -R "cuda_batchnorm_sync|cuda_dist_smoke" --output-on-failure > "$LOGS/ctest_dist.log" 2>&1
    # -V: a passing test's own lines too (the worst relative loss difference, the kill timings)
    timeout 300 ctest --test-dir build-gpu -L multigpu -V >> "$LOGS/ctest_dist.log" 2>&1
    grep -E "tests passed|tests failed|Passed|Failed|Skipped|\*\*\*|FAIL|CHECK failed|worst relative|killed rank|accuracy after|skipped:" \
      "$LOGS/ctest_dist.log" | summary
    [ "$stage" = distcheck ] && { cp "$LOGS/ctest_dist.log" "$OUT/"; continue; }
    # scaling: 1 GPU without NCCL, 1 GPU through NCCL (world 1), then 2, 4, 8 up to the GPUs here
    counts="1"; for g in 2 4 8; do [ "$ngpu" -ge $g ] && counts="$counts $g"; done
    for spec in "resnet18 4 128 25" "sew-resnet18 4 128 25" "cnn 2 128 100"; do
      set -- $spec
      log "bench_dist: $1, T=$2, batch $3 per GPU"
      timeout 120 build-gpu/bin/bench_dist --plain --model $1 --T $2 --batch $3 --steps $4 2>&1 | tee -a "$LOGS/bench_dist.txt" | grep -v RESULT | summary
      for g in $counts; do
        timeout 120 build-gpu/bin/bench_dist --gpus $g --model $1 --T $2 --batch $3 --steps $4 2>&1 | tee -a "$LOGS/bench_dist.txt" | grep -v RESULT | summary
      done
    done
    # the all-reduce bucket size at the most GPUs here (25 MiB is the default, in the runs above)
    if [ "$ngpu" -ge 2 ]; then
      for mb in 1 5 100; do
        log "bench_dist: resnet18 on $ngpu GPUs, buckets of $mb MiB"
        timeout 120 build-gpu/bin/bench_dist --gpus $ngpu --model resnet18 --T 4 --batch 128 --steps 25 --bucket-mb $mb 2>&1 |
          tee -a "$LOGS/bench_dist.txt" | grep -v RESULT | summary
      done
    fi
    log "scaling table (efficiency = N-GPU img/s / (N x the plain 1-GPU img/s); exposed = comm not hidden by the backward, per step)"
    awk '/^RESULT/ { delete kv; for (i = 2; i <= NF; i++) { split($i, p, "="); kv[p[1]] = p[2] }
           key = kv["model"]
           if (kv["mode"] == "plain") { base[key] = kv["img_s"]; next }
           up = 0; eff = 0
           if (base[key] > 0) { up = kv["img_s"] / base[key]; eff = 100 * up / kv["gpus"] }
           printf "%-12s %d GPU(s), buckets %3s MiB: %9.1f img/s  speed-up %5.2fx  efficiency %5.1f%%  step %7.2f ms  exposed comm %.3f ms (%.2f%%)  all-reduce %.3f ms  bus %.1f GB/s\n", key, kv["gpus"], kv["bucket_mb"], kv["img_s"], up, eff, kv["step_ms"], kv["exposed_ms"], 100 * kv["exposed_ms"] / kv["step_ms"], kv["allreduce_ms"], kv["busbw_gbs"] }' \
      "$LOGS/bench_dist.txt" | summary ;;
  distacc|distacc1|distacc2)
    # distacc: both runs; distacc1: the 1-GPU run alone (any machine); distacc2: the 2-GPU run alone
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$LOGS/cmake_dist.log" 2>&1
    cmake --build build-gpu -j 16 --target snn-train snn-make-cifar > "$LOGS/build_distacc.log" 2>&1 ||
      { grep -E "error" "$LOGS/build_distacc.log" | head -30 | summary; exit 1; }
    export SNN_DATA_DIR=$PWD/.carry
    mkdir -p /tmp/fmcifar
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    acc_flags="--model resnet18 --dataset cifar10 --data /tmp/fmcifar --epochs 5 --T 4 --precision ${ACC_PRECISION:-tf32}"
    if [ "$stage" != distacc2 ]; then
      log "ResNet-18 (T=4, ${ACC_PRECISION:-tf32}) on CIFAR-format Fashion-MNIST, 5 epochs: 1 GPU x 128"
      build-gpu/bin/snn-train --device cuda $acc_flags --batch-size 128 --out "$LOGS/acc_1gpu" 2>&1 |
        grep -E "^epoch|done" | summary
    fi
    if [ "$stage" != distacc1 ]; then
      log "ResNet-18 (T=4, ${ACC_PRECISION:-tf32}), 5 epochs: 2 GPUs x 64 with --sync-bn (global batch 128)"
      build-gpu/bin/snn-train --gpus 2 --device cuda $acc_flags --batch-size 64 --sync-bn --out "$LOGS/acc_2gpu" 2>&1 |
        grep -E "^epoch|done|rank|snn-train" | summary
    fi ;;
  recipe)
    # issue 16: one training recipe run of the Fashion-MNIST spiking CNN; RECIPE_T (8) time steps,
    # RECIPE_EPOCHS (60), RECIPE_DROPOUT (0.3; the runs of docs/results.md before the record
    # used 0.5), RECIPE_NAME (cnn_t8) names its folder; its metrics.csv and
    # accuracy.svg come back as $OUT/<name>_metrics.csv and $OUT/<name>_accuracy.svg. Stopped at
    # RECIPE_SECONDS (570) by SIGTERM, which saves a checkpoint and keeps the finished epochs.
    build snn-train || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    name=${RECIPE_NAME:-cnn_t8}
    recipe="--device cuda --precision tf32 --model cnn --neuron plif --width 128 --hidden 2048
      --T ${RECIPE_T:-8} --epochs ${RECIPE_EPOCHS:-60} --batch-size 128 --optimizer adamw --lr 1e-3
      --weight-decay 0.01 --schedule cosine --loss tet --label-smoothing 0.1 --dropout ${RECIPE_DROPOUT:-0.3}
      --augment 1 --crop-padding 2 --ema 0.999 --seed 0"
    log "recipe $name on $(nvidia-smi -i "${CUDA_VISIBLE_DEVICES:-0}" --query-gpu=name --format=csv,noheader): snn-train" $recipe
    timeout -s TERM ${RECIPE_SECONDS:-570} build-gpu/bin/snn-train $recipe --out "$LOGS/$name" \
      > "$LOGS/$name.log" 2>&1
    echo "exit $?" | summary
    grep -E "^epoch|best|done|snn-train:" "$LOGS/$name.log" | summary
    cp "$LOGS/$name/metrics.csv" "$OUT/${name}_metrics.csv" 2>/dev/null
    cp "$LOGS/$name/accuracy.svg" "$OUT/${name}_accuracy.svg" 2>/dev/null ;;
  jobs)
    # Single-GPU snn-train runs side by side, the i-th job of JOBS_FILE (tools/jobs/recipes_x4.jobs) on
    # GPU i, each its own GPU and --threads (cores / GPUs). Each run is stopped by SIGTERM at
    # JOBS_DEADLINE (seconds since the epoch; else JOBS_SECONDS, 540, from now), which saves a
    # checkpoint, and the next call of this stage resumes it (state in build-gpu/jobs/<name>/,
    # kept between calls on a warm machine); a finished run is left alone. Each run's metrics.csv,
    # accuracy.svg and log come back as $OUT/<name>_*.
    build snn-train snn-make-cifar || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    mkdir -p /tmp/fmcifar
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    jobs_file=${JOBS_FILE:-tools/jobs/recipes_x4.jobs}
    deadline=${JOBS_DEADLINE:-$(( $(date +%s) + ${JOBS_SECONDS:-540} ))}
    ngpu=$(nvidia-smi -L | wc -l)
    threads=$(( $(nproc) / ngpu )); (( threads < 1 )) && threads=1
    gpu=0
    while IFS='|' read -r name flags; do
      name=$(echo $name)
      [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
      (( gpu >= ngpu )) && { echo "   $name: no GPU left ($ngpu here)" | summary; continue; }
      dir=build-gpu/jobs/$name; mkdir -p "$dir"
      if [ -f "$dir/done" ]; then echo "   $name: finished earlier" | summary; gpu=$(( gpu + 1 )); continue; fi
      left=$(( deadline - $(date +%s) ))
      (( left < 30 )) && { echo "   $name: under 30 s left, not started" | summary; gpu=$(( gpu + 1 )); continue; }
      resume=""; [ -f "$dir/out/checkpoint.safetensors" ] && resume="--resume $dir/out/checkpoint.safetensors"
      log "job $name on GPU $gpu ($(nvidia-smi -i $gpu --query-gpu=name --format=csv,noheader)), $threads threads, $left s: snn-train $flags $resume"
      ( echo "== segment $(date -u +%FT%TZ), $left s${resume:+, resumed}" >> "$dir/log"
        start=$(date +%s)
        CUDA_VISIBLE_DEVICES=$gpu timeout -s TERM $left build-gpu/bin/snn-train --device cuda $flags \
          --threads $threads --out "$dir/out" $resume < /dev/null >> "$dir/log" 2>&1
        rc=$?
        echo "== segment ended: exit $rc after $(( $(date +%s) - start )) s" >> "$dir/log"
        [ $rc -eq 0 ] && touch "$dir/done" ) &
      gpu=$(( gpu + 1 ))
    done < "$jobs_file"
    wait
    for dir in build-gpu/jobs/*/; do
      name=$(basename "$dir")
      log "job $name: $([ -f "$dir/done" ] && echo finished || echo 'not finished')"
      grep -E "^epoch|best|segment|snn-train:" "$dir/log" | tail -6 | cut -c1-300 | summary
      cp "$dir/log" "$OUT/${name}_log.txt" 2>/dev/null
      cp "$dir/out/metrics.csv" "$OUT/${name}_metrics.csv" 2>/dev/null
      cp "$dir/out/accuracy.svg" "$OUT/${name}_accuracy.svg" 2>/dev/null
    done ;;
  jobsparse)
    # Issue 15 on the finished runs of the jobs stage named in JOBS_SPARSE (the ResNet-18 pair of
    # tools/jobs/recipes_x4.jobs, without and with the activity penalty): snn-sparse dense vs
    # sparse on the evaluated weights (best.safetensors), on the GPU (2000 test images, fp32,
    # one run per GPU side by side) and then on this host's CPU (16 threads, 256 images, one run
    # at a time), one CSV line each ($OUT/jobsparse.csv) and the trade-off plot.
    build snn-sparse snn-sparse-plot || exit 1
    CSV="$OUT/jobsparse.csv"; rm -f "$CSV"
    gpu=0
    for name in ${JOBS_SPARSE:-r18_e50 r18_e50_pen1}; do
      ck=build-gpu/jobs/$name/out/best.safetensors
      [ -f "build-gpu/jobs/$name/done" ] && [ -f "$ck" ] || { echo "   $name: not finished, skipped" | summary; continue; }
      log "jobsparse: snn-sparse --device cuda, $name (GPU $gpu)"
      CUDA_VISIBLE_DEVICES=$gpu timeout 200 build-gpu/bin/snn-sparse --checkpoint "$ck" --data /tmp/fmcifar \
        --device cuda --limit-test 2000 --passes 3 --csv "$LOGS/jobsparse_$name.csv" \
        > "$LOGS/jobsparse_${name}_cuda.txt" 2>&1 &
      gpu=$(( gpu + 1 ))
    done
    wait
    for name in ${JOBS_SPARSE:-r18_e50 r18_e50_pen1}; do
      [ -f "$LOGS/jobsparse_${name}_cuda.txt" ] || continue
      log "jobsparse: $name on the GPU"
      grep -E "accuracy|identical|swapped|latency|throughput|test set|end to end|snn-sparse:" \
        "$LOGS/jobsparse_${name}_cuda.txt" | summary
      cp "$LOGS/jobsparse_${name}_cuda.txt" "$OUT/"
      ck=build-gpu/jobs/$name/out/best.safetensors
      log "jobsparse: snn-sparse --device cpu (16 threads, 256 test images), $name"
      timeout 150 build-gpu/bin/snn-sparse --checkpoint "$ck" --data /tmp/fmcifar --device cpu --threads 16 \
        --limit-test 256 --calib-batches 4 --passes 1 --reps 5 --csv "$LOGS/jobsparse_$name.csv" \
        > "$LOGS/jobsparse_${name}_cpu.txt" 2>&1
      grep -E "accuracy|identical|swapped|latency|throughput|test set|end to end|snn-sparse:" \
        "$LOGS/jobsparse_${name}_cpu.txt" | summary
      cp "$LOGS/jobsparse_${name}_cpu.txt" "$OUT/"
    done
    # one CSV: the header once, then every run's line
    first=1
    for f in "$LOGS"/jobsparse_*.csv; do
      [ -f "$f" ] || continue
      if [ $first -eq 1 ]; then cat "$f"; first=0; else tail -n +2 "$f"; fi
    done > "$CSV"
    cat "$CSV" | summary
    build-gpu/bin/snn-sparse-plot "$CSV" "$OUT/jobsparse_tradeoff.svg" resnet18 2>&1 | summary ;;
  batch1)
    # Issue 15: batches of one sample after the one-sample calibration round. The CUDA sparse
    # tests, then a ResNet-18 (T = 4) trained 3 epochs with --activity-penalty 0.5 (TF32), the net
    # whose sparse pass ran batch 1 at 0.50x on the CPU (docs/sparse.md, section 7), run by
    # snn-sparse with --one-sample 0 (the old rule) and 1, on the GPU (2000 test images) and on
    # this host's CPU (16 threads, 256 images).
    build snn-train snn-sparse snn-make-cifar test_cuda_sparse test_cuda_ann2snn || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    export SNN_DATA_DIR=$PWD/.carry
    log "ctest: cuda_sparse, cuda_ann2snn"
    ctest --test-dir build-gpu -R "cuda_sparse|cuda_ann2snn" --output-on-failure > "$LOGS/ctest_batch1.log" 2>&1
    grep -E "tests passed|tests failed|Passed|Failed|CHECK failed" "$LOGS/ctest_batch1.log" | summary
    mkdir -p /tmp/fmcifar
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    log "train: ResNet-18, T = 4, 3 epochs, TF32, --activity-penalty 0.5"
    build-gpu/bin/snn-train --device cuda --tf32 --model resnet18 --dataset cifar10 --data /tmp/fmcifar --T 4 \
      --epochs 3 --batch-size 128 --activity-penalty 0.5 --out /tmp/batch1 2>&1 | grep -E "^epoch|done" | cut -c1-200 | summary
    for one in 0 1; do
      log "snn-sparse --device cuda --one-sample $one"
      timeout 120 build-gpu/bin/snn-sparse --checkpoint /tmp/batch1/checkpoint.safetensors --data /tmp/fmcifar \
        --device cuda --limit-test 2000 --passes 3 --one-sample $one > "$OUT/batch1_cuda_one$one.txt" 2>&1
      grep -E "identical|swapped|latency|throughput|test set, batch|snn-sparse:" "$OUT/batch1_cuda_one$one.txt" | summary
    done
    for one in 0 1; do
      log "snn-sparse --device cpu (16 threads) --one-sample $one"
      timeout 150 build-gpu/bin/snn-sparse --checkpoint /tmp/batch1/checkpoint.safetensors --data /tmp/fmcifar \
        --device cpu --threads 16 --limit-test 256 --calib-batches 4 --passes 1 --reps 5 --one-sample $one \
        > "$OUT/batch1_cpu_one$one.txt" 2>&1
      grep -E "identical|swapped|latency|throughput|test set, batch|snn-sparse:" "$OUT/batch1_cpu_one$one.txt" | summary
    done ;;
  threads)
    # Issue 15: batch-1 CPU latency by thread count on this host (docs/sparse.md, 7b), the code
    # of main against the code before the work-or-whole-team rule (kernels/cpu/cpu_threads.h). Trains
    # a ResNet-18 (T = 4) one epoch with --activity-penalty 0.5 (TF32, ~20 s), then runs
    # bench_sparse_threads of both trees on it, one after the other, same host and minute. The
    # old tree comes from .carry/old-src.tgz (make it with
    #   git archive --prefix=old-src/ -o .carry/old-src.tgz 7099cbb
    # and pass .carry in carry); without it only the new code runs.
    build snn-train snn-make-cifar bench_sparse_threads || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    mkdir -p /tmp/fmcifar
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    log "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) CPUs"
    log "train: ResNet-18, T = 4, 1 epoch, TF32, --activity-penalty 0.5"
    build-gpu/bin/snn-train --device cuda --precision tf32 --model resnet18 --dataset cifar10 --data /tmp/fmcifar \
      --T 4 --epochs 1 --batch-size 128 --activity-penalty 0.5 --out /tmp/threads 2>&1 |
      grep -E "^epoch|done" | cut -c1-200 | summary
    bench_flags="--checkpoint /tmp/threads/checkpoint.safetensors --data /tmp/fmcifar --threads 1,2,4,8,16 --reps 20"
    # THREADS_NEW_FIRST=1 runs main's bench before the old tree's (the order is the other way
    # by default): the pair in both orders separates an order effect from a real difference
    if [ -n "${THREADS_NEW_FIRST:-}" ]; then
      log "bench_sparse_threads, main (first)"
      timeout 200 build-gpu/bin/bench_sparse_threads $bench_flags > "$OUT/threads_new_first.txt" 2>&1
      summary < "$OUT/threads_new_first.txt"
    fi
    if [ -f .carry/old-src.tgz ]; then
      rm -rf /tmp/old-src && tar -xzf .carry/old-src.tgz -C /tmp
      # the bench uses only the public API; bench/CMakeLists.txt builds every bench_*.c it finds
      cp bench/bench_sparse_threads.c bench/bench_stats.h /tmp/old-src/bench/
      cmake -S /tmp/old-src -B /tmp/old-build -DSNN_CUDA=OFF -DCMAKE_BUILD_TYPE=Release > "$LOGS/old_cmake.log" 2>&1 &&
        cmake --build /tmp/old-build -j"$(nproc)" --target bench_sparse_threads > "$LOGS/old_build.log" 2>&1 ||
        echo "   old tree: build failed (see old_build.log)" | summary
      log "bench_sparse_threads, code before the rule"
      [ -x /tmp/old-build/bin/bench_sparse_threads ] &&
        timeout 200 /tmp/old-build/bin/bench_sparse_threads $bench_flags > "$OUT/threads_old.txt" 2>&1
      summary < "$OUT/threads_old.txt"
    fi
    log "bench_sparse_threads, main"
    timeout 200 build-gpu/bin/bench_sparse_threads $bench_flags > "$OUT/threads_new.txt" 2>&1
    summary < "$OUT/threads_new.txt" ;;
  sparse15)
    echo "sparse15 is two device calls of under 9 minutes each: tools/gpu_session.sh sparse15a," \
         "then tools/gpu_session.sh sparse15b (separate calls)"
    exit 2 ;;
  sparse15a)
    # Issue 15, part a (one device call, at most ~8.5 min: each step's timeout is cut to what is
    # left of SPARSE15_BUDGET seconds, build included; a step with under 15 s left is skipped
    # and says so). The trade-off of the activity penalty on the spiking ResNet-18 (width 64,
    # T = 4): trained one epoch (TF32) at each LAMBDA, then snn-sparse dense vs sparse on the
    # GPU (fp32, 2000 test images, batch 64) and, for SPARSE15_CPU_LAMBDAS, on this host's CPU
    # (16 threads, 256 images). Outputs in $OUT: summary.txt, sparse15.csv (one line per
    # snn-sparse run), sparse15_tradeoff.svg, resnet18_weights.part-* (the weights of the net
    # trained at SPARSE15_EXPORT, for the CPU measurement on another machine:
    # cat resnet18_weights.part-* > weights.safetensors). Checkpoints stay out of logs.tgz.
    S15_START=$(date +%s); S15_END=$(( S15_START + ${SPARSE15_BUDGET:-500} ))
    build snn-train snn-sparse snn-make-cifar snn-sparse-plot || exit 1
    s15_time
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    export SNN_DATA_DIR=$PWD/.carry
    CK=/tmp/sparse15; mkdir -p "$CK" /tmp/fmcifar
    CSV="$OUT/sparse15.csv"; rm -f "$CSV"
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    cpu_lams=" ${SPARSE15_CPU_LAMBDAS:-0 1.5 5} "
    # LAMBDA per layer (the penalty sums the layers): 0, then a decade of pressure around the
    # CNN's knee on the CPU (no cost at 1, -8 points at 3.3 after 100 steps: docs/sparse.md 7)
    for lam in ${SPARSE15_LAMBDAS:-0 0.5 1.5 5}; do
      log "sparse15a: ResNet-18 (width 64, T = 4, 1 epoch, TF32 training) with --activity-penalty $lam"
      s15_go 100 build-gpu/bin/snn-train --device cuda --tf32 --model resnet18 --dataset cifar10 \
        --data /tmp/fmcifar --T 4 --epochs 1 --batch-size 128 --activity-penalty $lam --out "$CK/r18_$lam" 2>&1 \
        | grep -E "^epoch|penalty|firing|done" | cut -c1-400 | summary
      log "sparse15a: snn-sparse --device cuda, LAMBDA $lam (2000 test images, fp32)"
      s15_go 90 build-gpu/bin/snn-sparse --checkpoint "$CK/r18_$lam/checkpoint.safetensors" --data /tmp/fmcifar \
        --device cuda --limit-test 2000 --passes 3 --csv "$CSV" > "$LOGS/sparse_r18_${lam}_cuda.txt" 2>&1
      grep -E "^layer|accuracy|identical|swapped|latency|throughput|test set|end to end|snn-sparse:" \
        "$LOGS/sparse_r18_${lam}_cuda.txt" | summary
      s15_time
      if [[ "$cpu_lams" == *" $lam "* ]]; then
        log "sparse15a: snn-sparse --device cpu (16 threads), LAMBDA $lam (256 test images)"
        s15_go 90 build-gpu/bin/snn-sparse --checkpoint "$CK/r18_$lam/checkpoint.safetensors" --data /tmp/fmcifar \
          --device cpu --threads 16 --limit-test 256 --calib-batches 4 --passes 1 --reps 5 --csv "$CSV" \
          > "$LOGS/sparse_r18_${lam}_cpu.txt" 2>&1
        grep -E "accuracy|identical|swapped|latency|throughput|test set|end to end|snn-sparse:" \
          "$LOGS/sparse_r18_${lam}_cpu.txt" | summary
        s15_time
      fi
    done
    log "sparse15a: the trade-off (accuracy against speed-up)"
    cat "$CSV" | summary
    build-gpu/bin/snn-sparse-plot "$CSV" "$OUT/sparse15_tradeoff.svg" resnet18 2>&1 | summary
    exp=${SPARSE15_EXPORT:-1.5}
    if [ -f "$CK/r18_$exp/checkpoint.safetensors" ]; then
      python3 tools/export_weights.py "$CK/r18_$exp/checkpoint.safetensors" "$CK/weights.safetensors" > /dev/null &&
        split -b 15000000 "$CK/weights.safetensors" "$OUT/resnet18_weights.part-"
    fi
    for d in "$CK"/r18_*; do cp "$d/metrics.csv" "$LOGS/metrics_$(basename "$d").csv" 2>/dev/null; done
    s15_time ;;
  sparse15b)
    # Issue 15, part b (one device call, at most ~8.5 min under SPARSE15_BUDGET, as sparse15a):
    # the CUDA tests of the issue (sparse kernels incl. event-smem, activity penalty, golden
    # ResNet-18/50 on both devices), bench_sparse's GPU tables (ResNet-18 and -50 shapes, 256
    # images per call, the smem column), and a width-64 ResNet-50 trained briefly at T = 4
    # (10000 images, LAMBDA SPARSE15_R50_LAMBDA) then run at T = 16 (batch 16: 256 images per
    # conv call; 4 calibration batches, since calibration copies every spike-fed conv's tensors
    # to the host) on the GPU and on this host's CPU. Outputs: summary.txt, sparse15_r50.csv.
    S15_START=$(date +%s); S15_END=$(( S15_START + ${SPARSE15_BUDGET:-500} ))
    build snn-train snn-sparse snn-make-cifar bench_sparse test_cuda_sparse test_cuda_activity_penalty \
      test_model_resnet50 test_cuda_model_resnet50 test_cuda_model || exit 1
    s15_time
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    export SNN_DATA_DIR=$PWD/.carry
    CK=/tmp/sparse15; mkdir -p "$CK" /tmp/fmcifar
    CSV="$OUT/sparse15_r50.csv"; rm -f "$CSV"
    log "sparse15b: CUDA tests (sparse kernels, activity penalty, golden ResNet-18/50 on both devices)"
    s15_go 150 ctest --test-dir build-gpu -R "^(cuda_sparse|cuda_activity_penalty|model_resnet50|cuda_model|cuda_model_resnet50)$" \
      --output-on-failure > "$LOGS/ctest_sparse15.log" 2>&1
    grep -E "Test +#|tests passed|tests failed|differs|FAIL|gradient of|step [0-9]" "$LOGS/ctest_sparse15.log" | head -40 | summary
    s15_time
    log "sparse15b: bench_sparse GPU tables (256 images per call = batch 64 x T 4), ResNet-18 and -50 shapes"
    s15_go 120 build-gpu/bin/bench_sparse 16 16 3 --gpu-only --gpu-images 256 --resnet50 2>&1 \
      | tee "$LOGS/bench_sparse15.txt" | summary
    s15_time
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    log "sparse15b: ResNet-50 (width 64), trained briefly at T = 4 (10000 images, LAMBDA ${SPARSE15_R50_LAMBDA:-1.5}), measured at T = 16"
    s15_go 100 build-gpu/bin/snn-train --device cuda --tf32 --model resnet50 --dataset cifar10 --data /tmp/fmcifar \
      --T 4 --epochs 1 --limit-train 10000 --limit-test 1000 --batch-size 64 \
      --activity-penalty ${SPARSE15_R50_LAMBDA:-1.5} --out "$CK/r50" 2>&1 | grep -E "^epoch|penalty|done" | summary
    s15_time
    s15_go 120 build-gpu/bin/snn-sparse --checkpoint "$CK/r50/checkpoint.safetensors" --data /tmp/fmcifar --T 16 \
      --device cuda --batch-size 16 --calib-batches 4 --limit-test 512 --passes 2 --reps 5 --csv "$CSV" \
      > "$LOGS/sparse_r50_cuda.txt" 2>&1
    cat "$LOGS/sparse_r50_cuda.txt" | summary
    s15_time
    s15_go 120 build-gpu/bin/snn-sparse --checkpoint "$CK/r50/checkpoint.safetensors" --data /tmp/fmcifar --T 16 \
      --device cpu --threads 16 --batch-size 16 --limit-test 32 --calib-batches 2 --passes 1 --reps 2 \
      --csv "$CSV" > "$LOGS/sparse_r50_cpu.txt" 2>&1
    grep -E "accuracy|identical|swapped|latency|throughput|test set|end to end|^layer|snn-sparse:" \
      "$LOGS/sparse_r50_cpu.txt" | head -70 | summary
    cat "$CSV" | summary
    cp "$CK/r50/metrics.csv" "$LOGS/metrics_r50.csv" 2>/dev/null
    s15_time ;;
  ann2snn)
    # issue 14: QANN -> ST-BIF conversion. ~4 min after a build (every part has its own timeout;
    # the elapsed seconds are logged after each). Pass/fail: docs/ann2snn.md, "Running it on a GPU".
    t0=$SECONDS
    build || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    log "ctest -V: test_ann2snn, test_ann2snn_program (CPU), test_cuda_ann2snn, test_cuda_sparse (signed spikes)  [$((SECONDS - t0)) s]"
    timeout 180 ctest --test-dir build-gpu -R 'ann2snn|cuda_sparse' -V > "$LOGS/ctest_ann2snn.log" 2>&1
    grep -E "tests passed|tests failed|Failed|Skipped|FAIL|differs|beyond|dstep|max \||step gradient|checks, " \
      "$LOGS/ctest_ann2snn.log" | head -40 | summary
    log "ANN vs SNN profile: bench_train_step, ResNet-18 (width 64, 3x32x32, fp32), median ms per step  [$((SECONDS - t0)) s]"
    rows="$LOGS/ann2snn_profile_rows.txt"; : > "$rows"
    for run in relu:1 lif:4 lif:8 stbif:4 stbif:8; do
      n=${run%:*}; t=${run#*:}
      timeout 60 build-gpu/bin/bench_train_step --device cuda --model resnet18 --neuron "$n" --T "$t" \
        --batch 32 --infer-batch 1,32 --steps 20 > "$LOGS/bench_${n}_$t.txt" 2>&1
      # columns found by their header names (bench_train_step's table may gain columns)
      awk -F'|' -v n="$n" -v t="$t" '
        /^\| phase \|/ { for (i = 1; i <= NF; i++) { h = $i; gsub(/^ +| +$/, "", h); col[h] = i } }
        /^\| train \| 32 / { tr = $col["ms / step"] + 0; mb = $col["peak MB"] + 0 }
        /^\| infer \| 1 / { i1 = $col["ms / step"] + 0 }
        /^\| infer \| 32 / { i32 = $col["ms / step"] + 0 }
        END { print n, t, tr + 0, i1 + 0, i32 + 0, mb + 0 }' "$LOGS/bench_${n}_$t.txt" >> "$rows"
    done
    {
      echo "| neurons | T | train B=32 ms | infer B=1 ms | infer B=32 ms | train / ANN | infer B=1 / ANN | infer B=32 / ANN | peak MB (train) |"
      echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
      awk 'function r(a, b) { return (a > 0 && b > 0) ? sprintf("%.2fx", a / b) : "-" }
        NR == 1 { a_tr = $3; a_i1 = $4; a_i32 = $5 }
        { printf "| %s | %s | %.2f | %.2f | %.2f | %s | %s | %s | %.0f |\n", $1, $2, $3, $4, $5,
                 r($3, a_tr), r($4, a_i1), r($5, a_i32), $6
          if (NR > 1) { tr[NR] = r($3, a_tr); i1[NR] = r($4, a_i1); name[NR] = $1 " T=" $2
                        ok_tr[NR] = a_tr > 0 && $3 > 0 && $3 <= 3 * a_tr; ok_i1[NR] = a_i1 > 0 && $4 > 0 && $4 <= 2 * a_i1 } }
        END { for (k = 2; k <= NR; k++)
                printf "check: %s: training B=32 %s the ANN (target <= 3x): %s; inference B=1 %s (target <= 2x): %s\n",
                       name[k], tr[k], ok_tr[k] ? "PASS" : "MISS", i1[k], ok_i1[k] ? "PASS" : "MISS" }' "$rows"
    } | summary
    log "snn-ann2snn --device cuda: Fashion-MNIST CNN, 4 levels; QANN and ReLU ANN, 4 epochs each; T = 1..64 and T*  [$((SECONDS - t0)) s]"
    timeout 150 build-gpu/bin/snn-ann2snn --device cuda --relu-baseline --out "$LOGS/ann2snn_fmnist" \
      > "$LOGS/ann2snn_fmnist.txt" 2> "$LOGS/ann2snn_fmnist.err"
    echo "exit $?" | summary; cat "$LOGS/ann2snn_fmnist.txt" | summary
    grep -E "epoch|snn-ann2snn:" "$LOGS/ann2snn_fmnist.err" | tail -12 | summary
    cp "$LOGS/ann2snn_fmnist/accuracy_vs_T.svg" "$OUT/ann2snn_fmnist.svg" 2>/dev/null
    cp "$LOGS/ann2snn_fmnist/results.csv" "$OUT/ann2snn_fmnist.csv" 2>/dev/null
    log "snn-ann2snn --device cuda: ResNet-18 on the CIFAR-format Fashion-MNIST (2 epochs of 30000, batch 64, 2000 test images)  [$((SECONDS - t0)) s]"
    mkdir -p /tmp/fmcifar
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      timeout 60 build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    timeout 200 build-gpu/bin/snn-ann2snn --device cuda --model resnet18 --dataset cifar10 --data /tmp/fmcifar \
      --epochs 2 --batch-size 64 --limit-train 30000 --limit-test 2000 --out "$LOGS/ann2snn_resnet" \
      > "$LOGS/ann2snn_resnet.txt" 2> "$LOGS/ann2snn_resnet.err"
    echo "exit $?" | summary; cat "$LOGS/ann2snn_resnet.txt" | summary
    grep -E "epoch|snn-ann2snn:" "$LOGS/ann2snn_resnet.err" | tail -12 | summary
    cp "$LOGS/ann2snn_resnet/accuracy_vs_T.svg" "$OUT/ann2snn_resnet.svg" 2>/dev/null
    cp "$LOGS/ann2snn_resnet/results.csv" "$OUT/ann2snn_resnet.csv" 2>/dev/null
    log "ann2snn done  [$((SECONDS - t0)) s]" ;;
  ann2snn-oom)
    # The run that ran out of device memory on 2026-11-24 (docs/ann2snn.md, section 5): a ResNet-18
    # QANN converted, evaluated at T = 51 and 64 (the largest step of that run, ~29 GB), then
    # sparsified at T* = 51. Pass: the tests pass; snn-ann2snn exits 0 with its "memory:" lines
    # and its two "check:" lines PASS; the device memory nvidia-smi samples stays below the
    # card with room (the estimates printed: ~30 GB at T = 64, ~25 GB for the sparse pass).
    t0=$SECONDS
    build snn-ann2snn snn-make-cifar test_cuda_sparse test_cuda_ann2snn test_cuda_memory_estimate || exit 1
    export SNN_DATA_DIR=$PWD/.carry
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    log "ctest: the CUDA memory estimate (a converted ResNet-18 at T = 51 among its cases), the CUDA sparse and ann2snn parity  [$((SECONDS - t0)) s]"
    timeout 120 ctest --test-dir build-gpu -R 'cuda_memory_estimate|cuda_sparse|cuda_ann2snn' \
      -V > "$LOGS/ctest_oom.log" 2>&1
    grep -E "tests passed|tests failed|Failed|FAIL|CHECK failed|converted resnet18" \
      "$LOGS/ctest_oom.log" | head -30 | summary
    log "snn-ann2snn --device cuda: ResNet-18, CIFAR-format Fashion-MNIST, 2 epochs of 30000, batch 64, 2000 test images, T = 51 and 64, then the sparse pass at T* = 51  [$((SECONDS - t0)) s]"
    mkdir -p /tmp/fmcifar
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      timeout 60 build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    nvidia-smi -i "${CUDA_VISIBLE_DEVICES:-0}" --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > "$LOGS/oom_memory_used.txt" 2>&1 &
    sampler=$!
    timeout 200 build-gpu/bin/snn-ann2snn --device cuda --model resnet18 --dataset cifar10 --data /tmp/fmcifar \
      --epochs 2 --batch-size 64 --limit-train 30000 --limit-test 2000 --steps 64 --out "$LOGS/ann2snn_oom" \
      > "$LOGS/ann2snn_oom.txt" 2> "$LOGS/ann2snn_oom.err"
    echo "exit $?" | summary
    kill "$sampler" 2>/dev/null
    grep -E "snn-ann2snn:|hint:" "$LOGS/ann2snn_oom.err" | tail -12 | summary
    grep -E "^\| (51|64)|check:|snn_sparsify:|sparse SNN" "$LOGS/ann2snn_oom.txt" | summary
    echo "device memory used, most nvidia-smi saw: $(sort -n "$LOGS/oom_memory_used.txt" | tail -1) MiB" | summary
    log "ann2snn-oom done  [$((SECONDS - t0)) s]" ;;
  *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
