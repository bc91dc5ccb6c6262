#!/usr/bin/env bash
# temporal.sh - training through time on the GPU machine (docs/temporal.md): memory and step
# time against T for each way to train, the neuron and recurrent-layer kernels, and the
# accuracy runs. From the device tool, in the repository root, carrying .carry/ with
# .carry/fashion-mnist (lib.sh):
#
#   bash tools/gpu/temporal.sh STAGE...
#
#   memory     bench_train_step, ResNet-18 width 64, BF16, batch 32, at each T of MEMORY_T
#              (4 8 16 32): BPTT, BPTT with --time-checkpoint K for each K of TC_K (4) below T,
#              SLTT (unless NO_SLTT=1), SLTT-K (K: SLTT_K, 4);
#              with .carry/base-src.tgz the base tree's too, rows marked "(base)"; MEMORY_FLAGS
#              added (default --keep-bf16: conv outputs kept as bf16; MEMORY_FLAGS= for fp32);
#              MEMORY_PROFILE=1 adds what one SLTT time step holds, by op, at the last T;
#              MEMORY_MODES ("MODE;MODE", each bench_train_step flags) replaces the modes
#   kernels    bench_neurons (the fused LIF and ALIF kernels against the copy bandwidth), then
#              bench_recurrent (the recurrent layer) and bench/torch_recurrent.py beside it
#   online     the Fashion-MNIST CNN at T = 8, BPTT against SLTT, seeds SEEDS (0 1 2), each
#              ONLINE_EPOCHS (4) epochs, the runs side by side on the one GPU, each stopped by
#              SIGTERM at ONLINE_SECONDS (500) if not done; ONLINE_MODES (bptt sltt) picks the
#              modes, sltt-K for SLTT with backward on K steps
#   rows       rsnn on sequential Fashion-MNIST by rows (T = 28), LIF and ALIF side by side,
#              ROWS_EPOCHS (10) epochs, ROWS_FLAGS added; or ROWS_VARIANTS, runs side by side
#              separated by ';', each "NAME FLAGS..."; each stopped at ROWS_SECONDS (560)
#   pixels     rsnn by pixels (T = 784), ALIF, stopped by SIGTERM after PIXELS_SECONDS (420);
#              PIXELS_VARIANTS: runs side by side, separated by ';', each "NAME FLAGS..."
#              (default: one, "alif PIXELS_FLAGS"), PIXELS_EPOCHS (30) epochs. Each run's checkpoint comes back as
#              $OUT/pixels_NAME.safetensors; with .carry/pixels_NAME.safetensors the run resumes
#              from it (--resume), so that a run spans several calls
#
# Output: $OUT/summary.txt, a stage's table as $OUT/STAGE.txt, everything in $OUT/logs.tgz.
cd "$(dirname "$0")/../.." && . tools/gpu/lib.sh
train_log() { grep -E "^epoch|best|done|snn-train:" "$1"; }

for stage in "$@"; do
  case "$stage" in
  memory)
    build_base bench_train_step
    build bench_train_step || exit 1
    wait
    gpu_name
    log "ResNet-18, BF16, batch 32: memory and step time against T, for each train mode"
    for T in ${MEMORY_T:-4 8 16 32}; do
      modes=("--train-mode bptt")
      [ "${NO_SLTT:-0}" = 1 ] || modes+=("--train-mode sltt")
      modes+=("--train-mode sltt --sltt-k ${SLTT_K:-4}")
      for K in ${TC_K:-4}; do [ "$T" -gt "$K" ] && modes+=("--time-checkpoint $K"); done
      [ -z "${MEMORY_MODES:-}" ] || IFS=';' read -ra modes <<< "$MEMORY_MODES"
      for mode in "${modes[@]}"; do
        for v in $(variants); do
          echo "-- T=$T $mode ($v)"
          timeout 200 "$(bin_of $v bench_train_step)" --model resnet18 --precision bf16 \
            --batch 32 --T "$T" --steps 5 --no-infer $mode ${MEMORY_FLAGS---keep-bf16} 2>&1 |
            grep -E "\| train|error|bad"
        done
      done
    done | tee "$OUT/memory.txt" | summary
    if [ "${MEMORY_PROFILE:-0}" = 1 ]; then
      T=${MEMORY_T:-32}; T=${T##* } # the last T
      log "what one SLTT time step holds before its backward, by op (T = $T)"
      timeout 200 build-gpu/bin/bench_train_step --model resnet18 --precision bf16 --batch 32 \
        --T "$T" --steps 2 --no-infer --train-mode sltt --memory ${MEMORY_FLAGS---keep-bf16} \
        2>&1 | sed -n '/memory held/,$p' | tee "$OUT/memory_profile.txt" | summary
    fi ;;
  kernels)
    build bench_neurons bench_recurrent || exit 1
    gpu_name
    log "bench_neurons: fused neuron kernels against the copy bandwidth"
    timeout 240 build-gpu/bin/bench_neurons 2>&1 | tee "$OUT/neurons.txt" | summary
    log "bench_recurrent: the recurrent layer (snn.c), then the same layer as a PyTorch loop"
    { timeout 240 build-gpu/bin/bench_recurrent --device cuda
      timeout 240 python3 bench/torch_recurrent.py --device cuda; } 2>&1 |
      tee "$OUT/recurrent.txt" | summary ;;
  online)
    build snn-train || exit 1
    gpu_name
    modes=${ONLINE_MODES:-bptt sltt}
    log "Fashion-MNIST CNN, T = 8, $modes, seeds ${SEEDS:-0 1 2}, ${ONLINE_EPOCHS:-4} epochs"
    for s in ${SEEDS:-0 1 2}; do
      for mode in $modes; do
        flags=(--train-mode "${mode%%-*}")
        [ "$mode" = "${mode%%-*}" ] || flags+=(--sltt-k "${mode#*-}")
        rm -rf "$LOGS/online_${mode}_$s" # a warm machine keeps the last call's runs
        timeout -s TERM "${ONLINE_SECONDS:-500}" \
        build-gpu/bin/snn-train --device cuda --T 8 --epochs "${ONLINE_EPOCHS:-4}" --seed "$s" \
          "${flags[@]}" --out "$LOGS/online_${mode}_$s" > "$LOGS/online_${mode}_$s.log" 2>&1 &
      done
    done
    wait
    for s in ${SEEDS:-0 1 2}; do
      for mode in $modes; do echo "-- $mode seed $s"; train_log "$LOGS/online_${mode}_$s.log"; done
    done | tee "$OUT/online.txt" | summary ;;
  rows)
    build snn-train || exit 1
    gpu_name
    # ROWS_VARIANTS: runs side by side, separated by ';', each "NAME FLAGS..." (default: LIF and
    # ALIF with ROWS_FLAGS)
    variants=${ROWS_VARIANTS:-"lif --neuron lif ${ROWS_FLAGS:-};alif --neuron alif ${ROWS_FLAGS:-}"}
    log "rsnn, sequential Fashion-MNIST by rows (T = 28), ${ROWS_EPOCHS:-10} epochs: $variants"
    IFS=';' read -ra runs <<< "$variants"
    for run in "${runs[@]}"; do
      read -r name flags <<< "$run"
      # shellcheck disable=SC2086
      timeout -s TERM "${ROWS_SECONDS:-560}" build-gpu/bin/snn-train --device cuda --model rsnn \
        --sequence rows --epochs "${ROWS_EPOCHS:-10}" $flags --out "$LOGS/rows_$name" \
        > "$LOGS/rows_$name.log" 2>&1 &
    done
    wait
    for run in "${runs[@]}"; do
      read -r name flags <<< "$run"
      echo "-- $name: $flags"; train_log "$LOGS/rows_$name.log" | tail -4
    done | tee "$OUT/rows.txt" | summary ;;
  pixels)
    build snn-train || exit 1
    gpu_name
    variants=${PIXELS_VARIANTS:-"alif ${PIXELS_FLAGS:-}"}
    log "rsnn, sequential Fashion-MNIST by pixels (T = 784), ${PIXELS_SECONDS:-420} s: $variants"
    IFS=';' read -ra runs <<< "$variants"
    for run in "${runs[@]}"; do
      read -r name flags <<< "$run"
      from=.carry/pixels_$name.safetensors
      if [ -f "$from" ]; then
        start=(--resume "$from")
      else
        # shellcheck disable=SC2206
        start=(--model rsnn --sequence pixels --neuron alif --epochs "${PIXELS_EPOCHS:-30}" $flags)
      fi
      timeout -s TERM "${PIXELS_SECONDS:-420}" build-gpu/bin/snn-train --device cuda \
        "${start[@]}" --out "$LOGS/pixels_$name" > "$LOGS/pixels_$name.log" 2>&1 &
    done
    wait
    for run in "${runs[@]}"; do
      read -r name flags <<< "$run"
      echo "-- $name: $flags$([ -f ".carry/pixels_$name.safetensors" ] && echo " (resumed)")"
      train_log "$LOGS/pixels_$name.log"
      grep -E "batch" "$LOGS/pixels_$name.log" | tail -2
      cp "$LOGS/pixels_$name/checkpoint.safetensors" "$OUT/pixels_$name.safetensors" 2>/dev/null
    done | tee "$OUT/pixels.txt" | summary ;;
  *) echo "temporal.sh: unknown stage '$stage'" | summary; exit 2 ;;
  esac
done
