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
#   tools/gpu_session.sh sparse15a   issue 15, call 1 of 2 (<= ~8.5 min): ResNet-18 trained at 4
#                                  activity penalties, sparse vs dense on the GPU and the CPU
#   tools/gpu_session.sh sparse15b   issue 15, call 2 of 2 (<= ~8.5 min): its CUDA tests, the GPU
#                                  kernel tables, ResNet-50 trained briefly, run at T = 16
#   (also: ops, kernels, step, profile, sparse: see the cases below)
# Stages can be combined: tools/gpu_session.sh ref test bench
set -uo pipefail
OUT=${OUT:-/tmp/snn-out}
LOGS=/tmp/snn-logs            # everything; packed into $OUT/logs.tgz at the end (8 files come back)
mkdir -p "$OUT" "$LOGS"
trap 'tar -C /tmp -czf "$OUT/logs.tgz" snn-logs 2>/dev/null' EXIT
export PATH="/usr/local/cuda/bin:$PATH"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
summary() { tee -a "$OUT/summary.txt"; }

build() {
  # incremental: a warm machine keeps build-gpu/ between calls; arguments: only those targets
  log "build (sm_90, Release)${1:+: $*}"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        > "$LOGS/cmake.log" 2>&1 || { tail -20 "$LOGS/cmake.log"; return 1; }
  cmake --build build-gpu -j 16 ${1:+--target "$@"} -- -k > "$LOGS/build.log" 2>&1 ||
    grep -E "error" "$LOGS/build.log" | head -30
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
    SNN_DATA_DIR=$PWD/.carry ctest --test-dir build-gpu --output-on-failure -j 8 > "$LOGS/ctest.log" 2>&1
    grep -E "tests passed|tests failed|\*\*\*|Failed|Skipped|Not Run" "$LOGS/ctest.log" | summary
    grep -E "FAIL|CHECK failed|rel|error" "$LOGS/ctest.log" | head -40 | summary
    log "compute-sanitizer memcheck on the CUDA tests"
    for t in build-gpu/bin/test_cuda_*; do
      compute-sanitizer --tool memcheck --error-exitcode 9 "$t" > "$LOGS/sanitizer_$(basename "$t").log" 2>&1
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
    build || exit 1
    log "ncu: GPU time per kernel over ~one training step of bench_train_step (B=64, T=4)"
    # 3 warm-up steps + 1 timed step, training only: divide the totals by 4 for one step
    timeout 500 ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      build-gpu/bin/bench_train_step --batch 64 --steps 1 --no-infer > "$LOGS/ncu.txt" 2>&1
    python3 tools/ncu_summary.py "$LOGS/ncu.txt" 4 2>&1 | summary ;;
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
  *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
