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
#   tools/gpu_session.sh sparse15    issue 15 in one run (~8 min): CUDA tests, golden files,
#                                  GPU tables, ResNet-18 trained at 4 activity penalties and
#                                  measured sparse vs dense (GPU and CPU), ResNet-50 at T = 16
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
  # incremental: a warm machine keeps build-gpu/ between calls
  log "build (sm_90, Release)"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        > "$LOGS/cmake.log" 2>&1 || { tail -20 "$LOGS/cmake.log"; return 1; }
  cmake --build build-gpu -j 16 -- -k > "$LOGS/build.log" 2>&1 || grep -E "error" "$LOGS/build.log" | head -30
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
    # Issue 15, everything in one run of ~8 minutes (each step under a timeout). ResNet-50 at
    # T = 16 runs batch 16 (256 images per conv call, as ResNet-18's 64 x T 4) and 4 calibration
    # batches: calibration copies every spike-fed conv's tensors to the host. Outputs in $OUT:
    # summary.txt, sparse15.csv (one line per snn-sparse run), sparse15_tradeoff.svg,
    # tiny_resnet50.safetensors (commit it to tests/ref/), resnet18_weights.part-* (the weights
    # of the ResNet-18 trained at SPARSE15_EXPORT, for the CPU measurement on another machine:
    # cat resnet18_weights.part-* > weights.safetensors). Checkpoints stay out of logs.tgz.
    S15_START=$(date +%s)
    s15_time() { echo "   ($(( $(date +%s) - S15_START )) s since the stage began)" | summary; }
    build || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
    export SNN_DATA_DIR=$PWD/.carry
    CK=/tmp/sparse15; mkdir -p "$CK" /tmp/fmcifar
    CSV="$OUT/sparse15.csv"; rm -f "$CSV"
    log "sparse15: golden files (PyTorch; ResNet-50 from the first seed with every membrane 2e-6 from V_th)"
    PYTHONUNBUFFERED=1 timeout 150 python3 tests/ref/make_ref.py 2>&1 | summary
    cp tests/ref/tiny_resnet50.safetensors "$OUT/" 2>/dev/null
    log "sparse15: CUDA tests (sparse kernels, activity penalty, golden ResNet-18/50 on both devices)"
    timeout 150 ctest --test-dir build-gpu -R "cuda_sparse|cuda_activity_penalty|model_resnet50|cuda_model" \
      --output-on-failure > "$LOGS/ctest_sparse15.log" 2>&1
    grep -E "Test +#|tests passed|tests failed|differs|FAIL|gradient of|step [0-9]" "$LOGS/ctest_sparse15.log" | head -40 | summary
    s15_time
    log "sparse15: bench_sparse GPU tables (256 images per call = batch 64 x T 4), ResNet-18 and -50 shapes"
    timeout 120 build-gpu/bin/bench_sparse 16 16 3 --gpu-only --gpu-images 256 --resnet50 2>&1 \
      | tee "$LOGS/bench_sparse15.txt" | summary
    s15_time
    [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
      build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
    # LAMBDA per layer (the penalty sums the layers): 0, then a decade of pressure around the
    # CNN's knee on the CPU (no cost at 1, -8 points at 3.3 after 100 steps: docs/sparse.md 7)
    for lam in ${SPARSE15_LAMBDAS:-0 0.5 1.5 5}; do
      log "sparse15: ResNet-18 (width 64, T = 4, 1 epoch, TF32 training) with --activity-penalty $lam"
      timeout 100 build-gpu/bin/snn-train --device cuda --tf32 --model resnet18 --dataset cifar10 \
        --data /tmp/fmcifar --T 4 --epochs 1 --batch-size 128 --activity-penalty $lam --out "$CK/r18_$lam" 2>&1 \
        | grep -E "^epoch|penalty|firing|done" | cut -c1-400 | summary
      log "sparse15: snn-sparse --device cuda, LAMBDA $lam (2000 test images, fp32)"
      timeout 90 build-gpu/bin/snn-sparse --checkpoint "$CK/r18_$lam/checkpoint.safetensors" --data /tmp/fmcifar \
        --device cuda --limit-test 2000 --passes 3 --csv "$CSV" > "$LOGS/sparse_r18_${lam}_cuda.txt" 2>&1
      grep -E "^layer|^layer[1-4]|accuracy|identical|swapped|latency|throughput|test set|end to end" \
        "$LOGS/sparse_r18_${lam}_cuda.txt" | summary
      s15_time
    done
    for lam in ${SPARSE15_CPU_LAMBDAS:-0 1.5 5}; do
      log "sparse15: snn-sparse --device cpu (16 threads), LAMBDA $lam (256 test images)"
      timeout 90 build-gpu/bin/snn-sparse --checkpoint "$CK/r18_$lam/checkpoint.safetensors" --data /tmp/fmcifar \
        --device cpu --threads 16 --limit-test 256 --calib-batches 4 --passes 1 --reps 5 --csv "$CSV" \
        > "$LOGS/sparse_r18_${lam}_cpu.txt" 2>&1
      grep -E "accuracy|identical|swapped|latency|throughput|test set|end to end" "$LOGS/sparse_r18_${lam}_cpu.txt" | summary
      s15_time
    done
    log "sparse15: ResNet-50 (width 64), trained briefly at T = 4 (10000 images, LAMBDA ${SPARSE15_R50_LAMBDA:-1.5}), measured at T = 16"
    timeout 100 build-gpu/bin/snn-train --device cuda --tf32 --model resnet50 --dataset cifar10 --data /tmp/fmcifar \
      --T 4 --epochs 1 --limit-train 10000 --limit-test 1000 --batch-size 64 \
      --activity-penalty ${SPARSE15_R50_LAMBDA:-1.5} --out "$CK/r50" 2>&1 | grep -E "^epoch|penalty|done" | summary
    timeout 120 build-gpu/bin/snn-sparse --checkpoint "$CK/r50/checkpoint.safetensors" --data /tmp/fmcifar --T 16 \
      --device cuda --batch-size 16 --calib-batches 4 --limit-test 512 --passes 2 --reps 5 --csv "$CSV" \
      > "$LOGS/sparse_r50_cuda.txt" 2>&1
    cat "$LOGS/sparse_r50_cuda.txt" | summary
    s15_time
    timeout 120 build-gpu/bin/snn-sparse --checkpoint "$CK/r50/checkpoint.safetensors" --data /tmp/fmcifar --T 16 \
      --device cpu --threads 16 --batch-size 16 --limit-test 32 --calib-batches 2 --passes 1 --reps 2 \
      --csv "$CSV" > "$LOGS/sparse_r50_cpu.txt" 2>&1
    grep -E "accuracy|identical|swapped|latency|throughput|test set|end to end|^layer" "$LOGS/sparse_r50_cpu.txt" | head -70 | summary
    log "sparse15: the trade-off (accuracy against speed-up)"
    cat "$CSV" | summary
    build-gpu/bin/snn-sparse-plot "$CSV" "$OUT/sparse15_tradeoff.svg" resnet18 2>&1 | summary
    exp=${SPARSE15_EXPORT:-1.5}
    if [ -f "$CK/r18_$exp/checkpoint.safetensors" ]; then
      python3 tools/export_weights.py "$CK/r18_$exp/checkpoint.safetensors" "$CK/weights.safetensors" > /dev/null &&
        split -b 15000000 "$CK/weights.safetensors" "$OUT/resnet18_weights.part-"
    fi
    for d in "$CK"/r18_* "$CK"/r50; do cp "$d/metrics.csv" "$LOGS/metrics_$(basename "$d").csv" 2>/dev/null; done
    s15_time ;;
  *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
