#!/usr/bin/env bash
# train.sh - training runs on the GPU machine (snn-train --device cuda), and what is measured on
# the nets they train: accuracy, sparse against dense. From the device tool, in the repository
# root, carrying .carry/ with .carry/fashion-mnist (lib.sh):
#
#   bash tools/gpu/train.sh STAGE...
#
#   cnn          Fashion-MNIST spiking CNN, width 128, T = 4, IF + ATan, MSE rate loss, 5 epochs
#   resnet       spiking ResNet-18 (T = 4) on the CIFAR-format Fashion-MNIST, 2 epochs
#   precision    5-epoch accuracy in fp32 / TF32 / BF16, a model's runs side by side
#                (PRECISION_MODELS: "cnn resnet"; PRECISIONS: "fp32 tf32 bf16"; SEEDS: "0");
#                PRECISION_SECONDS stops them (checkpoint saved), the next call resumes them
#   recipe       one recipe run of the CNN (docs/results.md): RECIPE_T (8), RECIPE_EPOCHS (60),
#                RECIPE_DROPOUT (0.3), RECIPE_NAME (cnn_t8); SIGTERM at RECIPE_SECONDS (570)
#                saves a checkpoint and keeps the finished epochs
#   jobs         single-GPU runs side by side, the k-th line of JOBS_FILE on GPU k mod the GPUs
#                (after the lines before it there), all stopped by SIGTERM at JOBS_SECONDS (540)
#                and resumed by the next call on a warm machine
#   jobsparse    snn-sparse on the finished jobs named in JOBS_SPARSE: GPU, then this host's CPU
#   sparse       ResNet-18 (width 64, T = 4, TF32, SPARSE_EPOCHS: 1) at each LAMBDA of
#                SPARSE_LAMBDAS (0), then snn-sparse dense against sparse on SPARSE_DEVICES
#                (cuda cpu); the CSV and the trade-off plot (docs/sparse.md, section 7)
#   threads      ResNet-18 one epoch at LAMBDA 0.5, then bench_sparse_threads at 1-16 threads
#
# ANN -> SNN conversion and NIR have their own script, convert.sh.
# Runs that used the program's former default learning rate pass --lr 1e-3, so they repeat.
# Output: $OUT/summary.txt (epochs, accuracies, tables), a stage's CSV / SVG files,
# $OUT/logs.tgz. A device call lasts at most 10 minutes: one or two stages a call.
cd "$(dirname "$0")/../.." && . tools/gpu/lib.sh
train() { build-gpu/bin/snn-train --device cuda "$@" 2>&1 | grep -E "^epoch|best|done|snn-train:"; }
R18="--model resnet18 --dataset cifar10 --data /tmp/fmcifar --T 4"

for stage in "$@"; do
  case "$stage" in
  cnn)
    build snn-train || exit 1
    log "spiking CNN, width 128, T = 4, batch 128, Adam 1e-3, IF + ATan, MSE rate loss, 5 epochs"
    train --width 128 --T 4 --batch-size 128 --optimizer adam --lr 1e-3 --neuron if \
      --surrogate atan --loss mse --epochs 5 --out "$LOGS/cnn" | summary ;;
  resnet)
    build snn-train snn-make-cifar || exit 1
    cifar
    log "spiking ResNet-18 on the CIFAR-format Fashion-MNIST, 2 epochs"
    train --lr 1e-3 $R18 --epochs 2 --batch-size 128 --out "$LOGS/resnet" | summary ;;
  precision)
    # every run of a model side by side on one GPU; with PRECISION_SECONDS each is stopped by
    # SIGTERM then (checkpoint saved) and the next call on a warm machine resumes it from
    # build-gpu/precision/NAME
    build snn-train snn-make-cifar || exit 1
    cifar
    deadline=$(( $(date +%s) + ${PRECISION_SECONDS:-100000} ))
    for m in ${PRECISION_MODELS:-cnn resnet}; do
      flags="--width 128 --T 4"; [ "$m" = resnet ] && flags=$R18
      runs=""
      for s in ${SEEDS:-${SEED:-0}}; do
        for p in ${PRECISIONS:-fp32 tf32 bf16}; do runs="$runs ${m}_${p}_s$s"; done
      done
      log "$m, 5 epochs, side by side:$runs"
      for name in $runs; do
        p=${name#${m}_}; p=${p%_s*}; s=${name##*_s}; dir=build-gpu/precision/$name
        mkdir -p "$dir"; [ -f "$dir/done" ] && continue
        resume=""; [ -f "$dir/out/checkpoint.safetensors" ] && resume="--resume $dir/out/checkpoint.safetensors"
        echo "== segment $(date -u +%FT%TZ)${resume:+, resumed}" >> "$dir/log"
        ( timeout -s TERM $(( deadline - $(date +%s) )) build-gpu/bin/snn-train --device cuda \
            --lr 1e-3 $flags --epochs 5 --precision $p --seed $s --out "$dir/out" $resume \
            < /dev/null >> "$dir/log" 2>&1 && touch "$dir/done" ) &
      done
      wait
      for name in $runs; do
        dir=build-gpu/precision/$name
        echo "-- $name$([ -f "$dir/done" ] || echo ' (not finished)')"
        grep -E "^epoch|done" "$dir/log"; cp "$dir/log" "$LOGS/$name.log"
      done | summary
    done ;;
  recipe)
    build snn-train || exit 1
    name=${RECIPE_NAME:-cnn_t8}
    recipe="--precision tf32 --model cnn --neuron plif --width 128 --hidden 2048
      --T ${RECIPE_T:-8} --epochs ${RECIPE_EPOCHS:-60} --batch-size 128 --optimizer adamw
      --lr 1e-3 --weight-decay 0.01 --schedule cosine --loss tet --label-smoothing 0.1
      --dropout ${RECIPE_DROPOUT:-0.3} --augment 1 --crop-padding 2 --ema 0.999 --seed 0"
    log "recipe $name: snn-train --device cuda" $recipe
    timeout -s TERM ${RECIPE_SECONDS:-570} build-gpu/bin/snn-train --device cuda $recipe \
      --out "$LOGS/$name" > "$LOGS/$name.log" 2>&1
    echo "exit $?" | summary
    grep -E "^epoch|best|done|snn-train:" "$LOGS/$name.log" | summary
    cp "$LOGS/$name/metrics.csv" "$OUT/${name}_metrics.csv" 2>/dev/null
    cp "$LOGS/$name/accuracy.svg" "$OUT/${name}_accuracy.svg" 2>/dev/null ;;
  jobs)
    # JOBS_FILE lines: "name | snn-train flags" (# comments); state in build-gpu/jobs/NAME/
    build snn-train snn-make-cifar || exit 1
    cifar
    deadline=$(( $(date +%s) + ${JOBS_SECONDS:-540} ))
    ngpu=$(nvidia-smi -L | wc -l); threads=$(( $(nproc) / ngpu )); (( threads < 1 )) && threads=1
    # job k of the file runs on GPU k mod ngpu, after the jobs before it on that GPU: each GPU's
    # jobs are one chain in the background, each job given the time left to the deadline
    names=(); flagss=()
    while IFS='|' read -r name flags; do
      name=$(echo $name)  # trimmed
      [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
      names+=("$name"); flagss+=("$flags")
    done < "${JOBS_FILE:-tools/jobs/recipes_x4.jobs}"
    run_job() { # run_job GPU NAME FLAGS: one job, resumed from its checkpoint where it has one
      local gpu=$1 name=$2 flags=$3 dir=build-gpu/jobs/$2 left resume ck
      mkdir -p "$dir"; left=$(( deadline - $(date +%s) ))
      if [ -f "$dir/done" ] || (( left < 30 )); then
        echo "   $name: finished or under 30 s left" | summary; return; fi
      resume=""; ck=$dir/out/checkpoint.safetensors; [ -f "$ck" ] && resume="--resume $ck"
      log "job $name on GPU $gpu, $threads threads, $left s: snn-train $flags $resume"
      echo "== segment $(date -u +%FT%TZ), $left s${resume:+, resumed}" >> "$dir/log"
      CUDA_VISIBLE_DEVICES=$gpu timeout -s TERM $left build-gpu/bin/snn-train --device cuda \
        $flags --threads $threads --out "$dir/out" $resume < /dev/null >> "$dir/log" 2>&1 &&
        touch "$dir/done"
    }
    for (( gpu = 0; gpu < ngpu && gpu < ${#names[@]}; gpu++ )); do
      ( for (( k = gpu; k < ${#names[@]}; k += ngpu )); do
          run_job $gpu "${names[k]}" "${flagss[k]}"
        done ) &
    done
    wait
    for dir in build-gpu/jobs/*/; do
      name=$(basename "$dir")
      log "job $name: $([ -f "$dir/done" ] && echo finished || echo 'not finished')"
      grep -E "^epoch|best|snn-train:" "$dir/log" | tail -6 | cut -c1-300 | summary
      cp "$dir/out/metrics.csv" "$OUT/${name}_metrics.csv" 2>/dev/null
    done ;;
  jobsparse|sparse)
    build snn-train snn-sparse snn-make-cifar snn-sparse-plot || exit 1
    cifar
    CSV="$OUT/$stage.csv"; rm -f "$CSV" "$LOGS"/sp_*.csv
    nets=""
    if [ "$stage" = sparse ]; then
      for lam in ${SPARSE_LAMBDAS:-0}; do
        log "ResNet-18 (T = 4, ${SPARSE_EPOCHS:-1} epoch(s), TF32) with --activity-penalty $lam"
        train --lr 1e-3 --precision tf32 $R18 --epochs ${SPARSE_EPOCHS:-1} --batch-size 128 \
          --activity-penalty $lam --out /tmp/sparse_$lam | cut -c1-300 | summary
        nets="$nets /tmp/sparse_$lam/checkpoint.safetensors"
      done
    else
      for name in ${JOBS_SPARSE:-r18_e50 r18_e50_pen1}; do
        [ -f build-gpu/jobs/$name/done ] && nets="$nets build-gpu/jobs/$name/out/best.safetensors"
      done
    fi
    for ck in $nets; do
      for dev in ${SPARSE_DEVICES:-cuda cpu}; do
        cpu_flags="--threads 16 --limit-test 256 --calib-batches 4 --passes 1 --reps 5"
        flags="--limit-test 2000 --passes 3"; [ $dev = cpu ] && flags=$cpu_flags
        log "snn-sparse --device $dev, $ck"
        timeout 200 build-gpu/bin/snn-sparse --checkpoint "$ck" --data /tmp/fmcifar --device $dev \
          $flags --csv "$LOGS/sp_$dev.csv" > "$LOGS/snn_sparse.txt" 2>&1
        grep -E "accuracy|identical|swapped|latency|throughput|test set|snn-sparse:" \
          "$LOGS/snn_sparse.txt" | summary
      done
    done
    # one CSV: the header once, then every run's line; then the trade-off plot
    head -1 -q "$LOGS"/sp_*.csv 2>/dev/null | head -1 > "$CSV"
    tail -q -n +2 "$LOGS"/sp_*.csv >> "$CSV" 2>/dev/null
    summary < "$CSV"
    build-gpu/bin/snn-sparse-plot "$CSV" "$OUT/${stage}_tradeoff.svg" resnet18 2>&1 | summary ;;
  threads)
    build snn-train snn-make-cifar bench_sparse_threads || exit 1
    cifar
    log "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) CPUs"
    train --lr 1e-3 --precision tf32 $R18 --epochs 1 --batch-size 128 --activity-penalty 0.5 \
      --out /tmp/threads | cut -c1-200 | summary
    log "bench_sparse_threads, batch 1"
    timeout 300 build-gpu/bin/bench_sparse_threads --data /tmp/fmcifar --reps 20 \
      --checkpoint /tmp/threads/checkpoint.safetensors --threads 1,2,4,8,16 2>&1 |
      tee "$OUT/threads.txt" | summary ;;
  *) echo "train.sh: unknown stage '$stage' (see the list at the top)" >&2; exit 2 ;;
  esac
done
