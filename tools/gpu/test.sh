#!/usr/bin/env bash
# test.sh - the tests on the GPU machine: build for sm_90, run ctest, compute-sanitizer on the
# CUDA tests. From the device tool, in the repository root, carrying .carry/ (the data; lib.sh):
#
#   bash tools/gpu/test.sh [STAGE...]        (no stage: all)
#
#   all      every test, CPU and CUDA (the multigpu ones skip on one GPU), then memcheck on each
#            test_cuda_* program; SANITIZE=none skips memcheck, SANITIZE=REGEX picks programs
#   cuda     only the ctest label `cuda` (the CUDA parity tests), memcheck as above if SANITIZE
#            is set; ONLY=REGEX runs just the tests whose names match instead
#   bits     a 16-step CUDA ResNet-18 training (BF16 and fp32, deterministic in both) in this
#            tree and in .carry/base-src.tgz: for a change that claims to keep the bits, the two
#            checkpoints (every weight and Adam moment) must be the same bytes; BITS_EXCEPT=REGEX
#            leaves out the tensors a change alters on purpose (tools/gpu/same_tensors.py);
#            BITS_FLAGS adds snn-train flags to both runs (e.g. --keep-bf16; a run it makes
#            fail, as --keep-bf16 does in fp32, is reported with snn-train's message)
#   memory   the memory estimate against the measured step on the GPU, SIGTERM and resume on
#            CUDA (ctest cuda_memory_estimate, cuda_train), and sizes too large for the GPU
#            refused before anything is allocated (exit 2, not 137)
#   ref      regenerate tests/ref/tiny_resnet.safetensors with PyTorch (tests/ref/make_ref.py)
#
# Output: $OUT/summary.txt, $OUT/logs.tgz (ctest and sanitizer logs).
cd "$(dirname "$0")/../.." && . tools/gpu/lib.sh

# memcheck [REGEX]: compute-sanitizer on each test_cuda_* program whose name matches. API errors
# are not reported: snn.c's own calls are checked (SNN_CUDA_CHECK), and libnccl probes kernels
# of other architectures on purpose while it starts.
memcheck() {
  log "compute-sanitizer memcheck on the CUDA tests (${1:-all})"
  for t in build-gpu/bin/test_cuda_*; do
    name=$(basename "$t")
    [ -z "${1:-}" ] || [ "$1" = all ] || [[ $name =~ $1 ]] || continue
    timeout "${SANITIZER_TIMEOUT:-100}" compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 9 "$t" > "$LOGS/sanitizer_$name.log" 2>&1
    echo "$name: exit $? $(grep -E 'ERROR SUMMARY' "$LOGS/sanitizer_$name.log")" | summary
  done
}

for stage in "${@:-all}"; do
  case "$stage" in
  all)
    build || exit 1
    gpu_name
    log "ctest (all)"
    ctest --test-dir build-gpu --output-on-failure -j 8 --timeout 300 > "$LOGS/ctest.log" 2>&1
    grep -E "tests passed|tests failed|\*\*\*|Failed|Skipped|Not Run" "$LOGS/ctest.log" | summary
    grep -E "FAIL|CHECK failed|error" "$LOGS/ctest.log" | head -40 | summary
    [ "${SANITIZE:-all}" = none ] || memcheck "${SANITIZE:-all}" ;;
  cuda)
    build || exit 1
    gpu_name
    select=(-L cuda); [ -n "${ONLY:-}" ] && select=(-R "$ONLY")
    log "ctest ${select[*]}"
    ctest --test-dir build-gpu "${select[@]}" --output-on-failure -j 4 --timeout 300 \
      > "$LOGS/ctest_cuda.log" 2>&1
    grep -E "tests passed|tests failed|Failed|Skipped|Not Run|differ|FAIL" "$LOGS/ctest_cuda.log" |
      head -30 | summary
    cp "$LOGS/ctest_cuda.log" "$OUT/"
    [ -z "${SANITIZE:-}" ] || [ "$SANITIZE" = none ] || memcheck "$SANITIZE" ;;
  bits)
    build_base snn-train
    build snn-train || exit 1
    wait
    for p in bf16 fp32; do
      for v in $(variants); do
        rm -rf /tmp/bits_${v}_$p
        timeout 120 "$(bin_of $v snn-train)" --device cuda --lr 1e-3 --model resnet18 --T 4 \
          --epochs 1 --limit-train 2048 --limit-test 512 --precision $p --seed 3 \
          ${BITS_FLAGS:-} --out /tmp/bits_${v}_$p > "$LOGS/bits_${v}_$p.txt" 2>&1
      done
      log "bits $p: checkpoint.safetensors of this tree against the base"
      missing=""
      for v in new base; do
        [ -f /tmp/bits_${v}_$p/checkpoint.safetensors ] || missing="$missing $v"
      done
      if [ -n "$missing" ]; then
        # a run that wrote no checkpoint (the flags refused in this precision, say
        # --keep-bf16 in fp32): what it said, in place of a comparison
        for v in $missing; do
          why="no base tree to compare against (.carry/base-src.tgz)"
          [ -f "$LOGS/bits_${v}_$p.txt" ] &&
            why=$(grep -m1 -E "snn-train:|error" "$LOGS/bits_${v}_$p.txt")
          echo "   no checkpoint from the $v run (${BITS_FLAGS:-} --precision $p): $why" | summary
        done
        continue
      fi
      python3 tools/gpu/same_tensors.py /tmp/bits_new_$p/checkpoint.safetensors \
        /tmp/bits_base_$p/checkpoint.safetensors ${BITS_EXCEPT:+--except "$BITS_EXCEPT"} 2>&1 |
        summary
      grep -E "^epoch" "$LOGS"/bits_*_$p.txt | summary
    done ;;
  memory)
    build || exit 1
    log "the memory estimate against the measured step; SIGTERM and resume on CUDA"
    timeout 400 ctest --test-dir build-gpu -R '^(cuda_memory_estimate|cuda_train)$' -V \
      > "$LOGS/memory.log" 2>&1
    echo "ctest exit $?" | summary
    keys="case \(|  (cnn|resnet|sew|dvsnet)|estimated total|SIGTERM|^[0-9]+: (ok|FAIL)|CHECK"
    grep -E "$keys|checks,|tests passed|tests failed" "$LOGS/memory.log" | summary
    log "sizes that cannot fit on the GPU are refused before allocating (want exit 2, not 137)"
    for flags in "--width 100000" "--width 256 --T 16 --batch-size 60000"; do
      timeout 120 build-gpu/bin/snn-train --device cuda $flags --epochs 1 --out /tmp/snn-refused \
        > "$LOGS/refused.txt" 2>&1
      echo "snn-train --device cuda $flags: exit $?" | summary
      grep -E "needs about|weights|hint" "$LOGS/refused.txt" | summary
    done ;;
  ref)
    log "PyTorch golden reference"
    python3 tests/ref/make_ref.py 2>&1 | summary
    cp tests/ref/tiny_resnet.safetensors "$OUT/" ;;
  *) echo "test.sh: unknown stage '$stage' (all, cuda, bits, memory, ref)" >&2; exit 2 ;;
  esac
done
