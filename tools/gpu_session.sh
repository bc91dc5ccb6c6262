#!/usr/bin/env bash
# gpu_session.sh - everything one call of the GPU machine does, in one script, logging to $OUT.
#
#   tools/gpu_session.sh test      build for sm_90, run every test (CPU and CUDA), then
#                                  compute-sanitizer memcheck on the CUDA tests
#   tools/gpu_session.sh ref       regenerate tests/ref/tiny_resnet.safetensors with PyTorch
#   tools/gpu_session.sh bench     the benchmark programs (bench/) and the PyTorch comparison
#   tools/gpu_session.sh train     snn-train --device cuda runs (needs .carry/ with the data)
# Stages can be combined: tools/gpu_session.sh ref test bench
set -uo pipefail
OUT=${OUT:-/tmp/snn-out}
mkdir -p "$OUT"
export PATH="/usr/local/cuda/bin:$PATH"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }

build() {
  [ -x build-gpu/bin/test_tensor ] && return 0
  log "build (sm_90, Release)"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; return 1; }
  cmake --build build-gpu -j 16 -- -k > "$OUT/build.log" 2>&1 || grep -E "error" "$OUT/build.log" | head -30
}

for stage in "$@"; do
  case "$stage" in
  ref)
    log "PyTorch golden reference"
    python3 tests/ref/make_ref.py 2>&1 | tee -a "$OUT/summary.txt"
    cp tests/ref/tiny_resnet.safetensors "$OUT/" ;;
  test)
    build || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt"
    log "ctest (all)"
    ctest --test-dir build-gpu --output-on-failure -j 4 > "$OUT/ctest.log" 2>&1
    grep -E "tests passed|tests failed|\*\*\*|Failed|Skipped|Not Run" "$OUT/ctest.log" | tee -a "$OUT/summary.txt"
    log "compute-sanitizer memcheck on the CUDA tests"
    for t in build-gpu/bin/test_cuda_*; do
      compute-sanitizer --tool memcheck --error-exitcode 9 "$t" > "$OUT/sanitizer_$(basename "$t").log" 2>&1
      echo "$(basename "$t"): exit $? $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer_$(basename "$t").log")" | tee -a "$OUT/summary.txt"
    done ;;
  bench)
    build || exit 1
    for b in build-gpu/bin/bench_*; do
      log "$(basename "$b")"
      timeout 300 "$b" 2>&1 | tee "$OUT/$(basename "$b").txt" | tail -40
    done ;;
  *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
