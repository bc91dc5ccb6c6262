#!/usr/bin/env bash
# bench.sh - the GPU tables of docs/benchmarks.md and docs/sparse.md, PyTorch beside snn.c where
# a table compares them. From the device tool, in the repository root, carrying .carry/ when
# a base tree is to be compared (lib.sh):
#
#   bash tools/gpu/bench.sh STAGE...
#
#   ops       bench_ops cuda: every tensor kernel against the copy bandwidth
#   neurons   bench_neurons: the fused neuron kernels against the copy bandwidth
#   conv      bench_conv2d_cuda: each conv path per layer and precision, and the decision check
#             of kernels/cuda/conv/conv_path.cu ("Conv paths")
#   step      bench_train_step (ResNet-18, T = 4) in each of PRECISIONS (fp32 tf32 bf16) at
#             STEP_BATCHES (16,64,128,256), inference at batch 1 and 64, the memory table of the
#             first batch, STEP_FLAGS added (e.g. --no-fusion); then bench/torch_train_step.py in
#             TF32 and BF16 (TORCH=0 skips it)
#   memory    bench_train_step --memory, ResNet-18 BF16, 20 training steps, for each case of
#             MEMORY_CASES ("T:B:flags" separated by spaces, flags comma-separated; by default
#             issue 33's: T = 4 at B = 64 and 32, plain and --keep-bf16, T = 32 B = 32
#             --keep-bf16): ms per step and MB per image, the arena's high-water and the pool's
#             reservation, this tree and the base one after the other ("Memory of a training
#             step")
#   ab        bench_train_step's train row, this tree and the base alternated AB_REPEATS (3)
#             times for each case of AB_CASES ("B:flags" separated by spaces, flags
#             comma-separated; by default BF16 T = 4 at B = 64 and 256, plain and --keep-bf16),
#             30 steps each: a before / after pair whose noise the repeats show. A case's flags
#             come last, so they may change the precision or T: "256:--precision,tf32",
#             "32:--T,32,--keep-bf16"
#   profile   ncu: GPU time per kernel over a training step at B = 64 (PROFILE_PRECISION: fp32,
#             PROFILE_FLAGS added; PROFILE_BASE=1 profiles the base tree too, which must know
#             bench_train_step --no-warmup: 3873c61 or later)
#   inferprofile  ncu: GPU time per kernel of BF16 inference at B = 64 (bench_train_step
#             --no-train: 3 + 2 eager forwards, the graph's first forward, then 3 + 2 replays of
#             its CUDA Graph); the table's totals over those eleven forwards
#   launches  ncu: each launch of the kernels matching LAUNCH_KERNELS (a regex) over a training
#             step at B = 64 (LAUNCH_PRECISION: bf16, LAUNCH_FLAGS added): time, DRAM bytes,
#             bandwidth, occupancy, the longest LAUNCH_ROWS (40) first (tools/ncu_launches.py)
#   ncu       ncu's detailed sections on one launch of each kernel in NCU_KERNELS (regexes,
#             comma-separated; NCU_SKIP launches skipped first, 6) in a BF16 training step
#   sparse    bench_sparse: the CPU table, then the GPU tables (SPARSE_ARGS: 16)
#   annsnn    ANN against SNN: bench_train_step with ReLU, LIF and ST-BIF at T = 4 and 8, the
#             table with its ratio columns and a PASS / MISS line per cost target
#
# With .carry/base-src.tgz, conv and step time the base tree too, in the same call, rows marked
# "base": a before / after pair on one machine. Output: $OUT/summary.txt, a stage's own table
# as $OUT/STAGE.txt (conv: conv_new.txt, conv_base.txt), everything in $OUT/logs.tgz.
cd "$(dirname "$0")/../.." && . tools/gpu/lib.sh

for stage in "$@"; do
  case "$stage" in
  ops|neurons)
    build bench_$stage || exit 1
    gpu_name
    log "bench_$stage"
    args=""; [ "$stage" = ops ] && args=cuda
    timeout 240 build-gpu/bin/bench_$stage $args 2>&1 | tee "$OUT/$stage.txt" | summary ;;
  conv)
    build_base bench_conv2d_cuda
    build bench_conv2d_cuda || exit 1
    wait
    gpu_name
    for v in $(variants); do
      log "bench_conv2d_cuda (256 images: batch 64 x T 4), $v"
      timeout 150 "$(bin_of $v bench_conv2d_cuda)" 2>&1 | tee "$OUT/conv_$v.txt" | summary
    done ;;
  step)
    build_base bench_train_step
    build bench_train_step || exit 1
    wait
    gpu_name
    for p in ${PRECISIONS:-fp32 tf32 bf16}; do
      for v in $(variants); do
        log "bench_train_step --precision $p, $v"
        timeout 150 "$(bin_of $v bench_train_step)" --precision $p \
          --batch ${STEP_BATCHES:-16,64,128,256} --steps 10 --infer-batch 1,64 --memory \
          ${STEP_FLAGS:-} 2>&1 | tee "$LOGS/step_${p}_$v.txt" | grep -E "^\|" | summary
      done
    done
    [ "${TORCH:-1}" = 0 ] && continue
    for flag in --tf32 --bf16; do
      log "PyTorch: bench/torch_train_step.py $flag"
      timeout 150 python3 bench/torch_train_step.py $flag --batch ${STEP_BATCHES:-16,64,128,256} \
        --steps 10 2>&1 | tee "$LOGS/torch_${flag#--}.txt" | summary
    done ;;
  memory)
    build_base bench_train_step
    build bench_train_step || exit 1
    wait
    gpu_name
    cases=${MEMORY_CASES:-"4:64: 4:64:--keep-bf16 4:32: 4:32:--keep-bf16 32:32:--keep-bf16"}
    for c in $cases; do
      IFS=: read -r T B flags <<< "$c"
      for v in $(variants); do
        log "bench_train_step --precision bf16 --T $T --batch $B ${flags//,/ }, $v"
        timeout 200 "$(bin_of $v bench_train_step)" --model resnet18 --precision bf16 --T "$T" \
          --batch "$B" --steps 20 --no-infer --memory ${flags//,/ } \
          > "$LOGS/memory_T${T}_B${B}${flags//[ ,-]/_}_$v.txt" 2>&1
        grep -E "^\| train|high-water" "$LOGS/memory_T${T}_B${B}${flags//[ ,-]/_}_$v.txt" |
          summary
      done
    done ;;
  ab)
    build_base bench_train_step
    build bench_train_step || exit 1
    wait
    gpu_name
    for rep in $(seq "${AB_REPEATS:-3}"); do
      for c in ${AB_CASES:-"64: 64:--keep-bf16 256: 256:--keep-bf16"}; do
        IFS=: read -r B flags <<< "$c"
        for v in $(variants); do
          r=$(timeout 100 "$(bin_of $v bench_train_step)" --model resnet18 --precision bf16 \
              --T 4 --batch "$B" --steps 30 --no-infer ${flags//,/ } 2>&1 | grep -E "^\| train")
          echo "rep $rep $v B=$B ${flags//,/ } $r" | summary
        done
      done
    done ;;
  profile)
    [ -n "${PROFILE_BASE:-}" ] && build_base bench_train_step
    build bench_train_step || exit 1
    wait
    p=${PROFILE_PRECISION:-fp32}
    for v in $(variants); do
      log "ncu: GPU time per kernel over one training step (B = 64, T = 4, $p" \
          "${PROFILE_FLAGS:-}), $v"
      # 3 warm-up steps + 1 timed step, training only, and no batch-1 step before them
      # (--no-warmup; the tables of docs/benchmarks.md before the sixteenth session also held
      # that step's four steps at batch 1): the totals divided by 4 are one step
      timeout 500 ncu --clock-control none --metrics gpu__time_duration.sum \
        --print-summary per-kernel "$(bin_of $v bench_train_step)" --batch 64 --steps 1 \
        --no-infer --no-warmup --precision $p ${PROFILE_FLAGS:-} > "$LOGS/ncu_$v.txt" 2>&1
      python3 tools/ncu_summary.py "$LOGS/ncu_$v.txt" 4 2>&1 | tee "$OUT/profile_${p}_$v.txt" |
        summary
    done ;;
  inferprofile)
    build bench_train_step || exit 1
    gpu_name
    log "ncu: GPU time per kernel, BF16 inference at B = 64, T = 4 (11 forwards: divide by 11)"
    timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum \
      --print-summary per-kernel build-gpu/bin/bench_train_step --no-train --infer-batch 64 \
      --steps 2 --precision bf16 > "$LOGS/ncu_infer.txt" 2>&1
    python3 tools/ncu_summary.py "$LOGS/ncu_infer.txt" 11 2>&1 | tee "$OUT/profile_infer.txt" |
      summary
    grep -E "^\| infer" "$LOGS/ncu_infer.txt" | summary ;;
  launches)
    # per launch, over the last of 4 steps (3 warm-up + 1): time, DRAM bytes, bandwidth and
    # occupancy of the kernels matching LAUNCH_KERNELS, so a kernel's layer1 launch can be told
    # from its layer4 one (tools/ncu_launches.py)
    build bench_train_step || exit 1
    gpu_name
    k=${LAUNCH_KERNELS:-lif_forward|lif_bn_backward|batchnorm_|nhwc_|bits_to|round_bf16}
    log "ncu per launch: $k (B = 64, T = 4, ${LAUNCH_PRECISION:-bf16} ${LAUNCH_FLAGS:-})"
    timeout 400 ncu --clock-control none --csv --kernel-name "regex:$k" --metrics \
      gpu__time_duration.sum,dram__bytes.sum,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active \
      build-gpu/bin/bench_train_step --batch 64 --steps 1 --no-infer \
      --precision "${LAUNCH_PRECISION:-bf16}" ${LAUNCH_FLAGS:-} > "$LOGS/launches.csv" 2>&1
    python3 tools/ncu_launches.py "$LOGS/launches.csv" 0.25 ${LAUNCH_ROWS:-40} 2>&1 | summary ;;
  ncu)
    build bench_train_step || exit 1
    for kern in ${NCU_KERNELS//,/ }; do
      log "ncu --set detailed: $kern"
      timeout 200 ncu --kernel-name "regex:$kern" --launch-skip ${NCU_SKIP:-6} --launch-count 1 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
        --section LaunchStats --section SchedulerStats --section WarpStateStats \
        build-gpu/bin/bench_train_step --batch 64 --steps 1 --no-infer --precision bf16 \
        > "$LOGS/ncu_$kern.txt" 2>&1
      keys="Duration|Memory Throughput|DRAM Throughput|Registers Per|Occupancy|Block Limit"
      keys="$keys|Eligible|Issued Warp|Stall|Compute \(SM\)|L1/TEX Hit|L2 Hit|Grid Size|Waves"
      grep -E "$keys" "$LOGS/ncu_$kern.txt" | head -40 | summary
    done ;;
  sparse)
    build bench_sparse || exit 1
    gpu_name
    log "bench_sparse ${SPARSE_ARGS:-16}"
    timeout 300 build-gpu/bin/bench_sparse ${SPARSE_ARGS:-16} 2>&1 | tee "$OUT/sparse.txt" |
      summary ;;
  annsnn)
    build bench_train_step || exit 1
    gpu_name
    log "ANN against SNN: bench_train_step, ResNet-18 (width 64, fp32), median ms per step"
    rows="$LOGS/annsnn_rows.txt"; : > "$rows"
    for run in relu:1 lif:4 lif:8 stbif:4 stbif:8; do
      n=${run%:*}; t=${run#*:}
      timeout 60 build-gpu/bin/bench_train_step --device cuda --model resnet18 --neuron "$n" \
        --T "$t" --batch 32 --infer-batch 1,32 --steps 20 > "$LOGS/annsnn_${n}_$t.txt" 2>&1
      # columns found by their header names (the bench's table may gain columns)
      awk -F'|' -v n="$n" -v t="$t" '
        /^\| phase \|/ { for (i = 1; i <= NF; i++) { h = $i; gsub(/^ +| +$/, "", h); col[h] = i } }
        /^\| train \| 32 / { tr = $col["ms / step"] + 0; mb = $col["peak MB"] + 0 }
        /^\| infer \| 1 / { i1 = $col["ms / step"] + 0 }
        /^\| infer \| 32 / { i32 = $col["ms / step"] + 0 }
        END { print n, t, tr + 0, i1 + 0, i32 + 0, mb + 0 }' "$LOGS/annsnn_${n}_$t.txt" >> "$rows"
    done
    # targets: training at batch 32 at most 3x the ANN's step, inference at batch 1 at most 2x
    { printf "| neurons | T | train B=32 ms | infer B=1 ms | infer B=32 ms | train / ANN "
      echo "| infer B=1 / ANN | infer B=32 / ANN | peak MB (train) |"
      echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
      awk 'function r(a, b) { return (a > 0 && b > 0) ? sprintf("%.2fx", a / b) : "-" }
        NR == 1 { a_tr = $3; a_i1 = $4; a_i32 = $5 }
        { printf "| %s | %s | %.2f | %.2f | %.2f | %s | %s | %s | %.0f |\n", $1, $2, $3, $4, $5,
                 r($3, a_tr), r($4, a_i1), r($5, a_i32), $6
          if (NR > 1) { tr[NR] = r($3, a_tr); i1[NR] = r($4, a_i1); name[NR] = $1 " T=" $2
                        ok_tr[NR] = a_tr > 0 && $3 > 0 && $3 <= 3 * a_tr
                        ok_i1[NR] = a_i1 > 0 && $4 > 0 && $4 <= 2 * a_i1 } }
        END { for (k = 2; k <= NR; k++)
                printf "check: %s: training B=32 %s the ANN (target <= 3x): %s; " \
                       "inference B=1 %s (target <= 2x): %s\n", name[k], tr[k],
                       ok_tr[k] ? "PASS" : "MISS", i1[k], ok_i1[k] ? "PASS" : "MISS" }' "$rows"
    } | tee "$OUT/annsnn.txt" | summary ;;
  *) echo "bench.sh: unknown stage '$stage' (ops neurons conv step memory ab profile launches" \
          "ncu sparse annsnn)" >&2
     exit 2 ;;
  esac
done
