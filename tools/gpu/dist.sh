#!/usr/bin/env bash
# dist.sh - data-parallel training on a machine of several GPUs (NCCL; docs/distributed.md). From
# the device tool, on a kind with 2 or more GPUs (nvidia-h100-x2, -x4), in the repository root,
# carrying .carry/ with .carry/fashion-mnist (lib.sh):
#
#   bash tools/gpu/dist.sh [STAGE...]        (no stage: tests scaling)
#
#   tests     sync-BN kernel parity and the world-size-1 NCCL smoke (the plain run, byte for
#             byte), then the multigpu tests (skipped below 2 GPUs)
#   scaling   bench_dist: ResNet-18, SEW-ResNet-18 (T = 4, batch 128 a GPU) and the CNN (T = 2) on
#             1 GPU without NCCL, then on 1, 2, 4, 8 GPUs as far as the host has them; ResNet-18's
#             all-reduce buckets of 1, 5 and 100 MiB on all GPUs; the scaling table
#   acc1      5 epochs of the CIFAR-format ResNet-18 (T = 4, ACC_PRECISION: tf32) on 1 GPU x 128
#   acc2      the same on 2 GPUs x 64 with --sync-bn (global batch 128); acc1 runs on any machine
#
# Output: $OUT/summary.txt, $OUT/logs.tgz.
cd "$(dirname "$0")/../.." && . tools/gpu/lib.sh
ngpu=$(nvidia-smi -L | wc -l)
stages=("$@"); (( $# )) || stages=(tests scaling)

for stage in "${stages[@]}"; do
  case "$stage" in
  tests)
    build snn-train snn-eval test_multigpu_train test_cuda_dist_smoke test_cuda_batchnorm_sync ||
      exit 1
    nvidia-smi -L | summary
    log "ctest: sync-BN parity, the NCCL smoke at world size 1, multigpu (skipped below 2 GPUs)"
    ctest --test-dir build-gpu -R "cuda_batchnorm_sync|cuda_dist_smoke" --output-on-failure \
      > "$LOGS/ctest_dist.log" 2>&1
    # -V: a passing test's own lines too (the worst relative loss difference, the kill timings)
    timeout 300 ctest --test-dir build-gpu -L multigpu -V >> "$LOGS/ctest_dist.log" 2>&1
    keys="tests passed|tests failed|Passed|Failed|Skipped|\*\*\*|FAIL|CHECK failed"
    grep -E "$keys|worst relative|killed rank|accuracy after|skipped:" "$LOGS/ctest_dist.log" |
      summary ;;
  scaling)
    build bench_dist || exit 1
    counts=1; for g in 2 4 8; do (( ngpu >= g )) && counts="$counts $g"; done
    for spec in "resnet18 4 128 25" "sew-resnet18 4 128 25" "cnn 2 128 100"; do
      set -- $spec
      log "bench_dist: $1, T = $2, batch $3 a GPU, $4 steps"
      for g in plain $counts; do
        mode="--gpus $g"; [ $g = plain ] && mode=--plain
        timeout 120 build-gpu/bin/bench_dist $mode --model $1 --T $2 --batch $3 --steps $4 2>&1 |
          tee -a "$LOGS/bench_dist.txt" | grep -v RESULT | summary
      done
    done
    for mb in 1 5 100; do
      (( ngpu >= 2 )) || break
      log "bench_dist: resnet18 on $ngpu GPUs, buckets of $mb MiB (25 in the runs above)"
      timeout 120 build-gpu/bin/bench_dist --gpus $ngpu --model resnet18 --T 4 --batch 128 \
        --steps 25 --bucket-mb $mb 2>&1 | tee -a "$LOGS/bench_dist.txt" | grep -v RESULT | summary
    done
    log "scaling (efficiency = N-GPU img/s / (N x the plain 1-GPU img/s); exposed:" \
        "communication the backward does not hide, per step)"
    awk '/^RESULT/ { delete kv; for (i = 2; i <= NF; i++) { split($i, p, "="); kv[p[1]] = p[2] }
           key = kv["model"]
           if (kv["mode"] == "plain") { base[key] = kv["img_s"]; next }
           up = 0; eff = 0
           if (base[key] > 0) { up = kv["img_s"] / base[key]; eff = 100 * up / kv["gpus"] }
           printf "%-12s %d GPU(s), buckets %3s MiB: %9.1f img/s  speed-up %5.2fx  " \
                  "efficiency %5.1f%%  step %7.2f ms  exposed comm %.3f ms (%.2f%%)  " \
                  "all-reduce %.3f ms  bus %.1f GB/s\n", key, kv["gpus"], kv["bucket_mb"],
                  kv["img_s"], up, eff, kv["step_ms"], kv["exposed_ms"],
                  100 * kv["exposed_ms"] / kv["step_ms"], kv["allreduce_ms"], kv["busbw_gbs"] }' \
      "$LOGS/bench_dist.txt" | summary ;;
  acc1|acc2)
    build snn-train snn-make-cifar || exit 1
    cifar
    acc="--model resnet18 --dataset cifar10 --data /tmp/fmcifar --epochs 5 --T 4 --lr 1e-3
      --precision ${ACC_PRECISION:-tf32}"
    run="--batch-size 128"; [ $stage = acc2 ] && run="--gpus 2 --batch-size 64 --sync-bn"
    log "ResNet-18 (T = 4, ${ACC_PRECISION:-tf32}), 5 epochs: $run"
    build-gpu/bin/snn-train --device cuda $acc $run --out "$LOGS/$stage" 2>&1 |
      grep -E "^epoch|done|rank|snn-train" | summary ;;
  *) echo "dist.sh: unknown stage '$stage' (tests scaling acc1 acc2)" >&2; exit 2 ;;
  esac
done
