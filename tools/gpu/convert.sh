#!/usr/bin/env bash
# convert.sh - models turned into other models on the GPU machine: a quantized ANN into an
# ST-BIF SNN (snn-ann2snn, docs/ann2snn.md) and snn.c nets into NIR files run by PyTorch
# (snn-export-nir, tools/nir_check.py, docs/nir.md). From the device tool, in the repository
# root, carrying .carry/ with .carry/fashion-mnist (lib.sh):
#
#   bash tools/gpu/convert.sh STAGE...
#
#   ann2snn      the conversion tests (ctest -V -R 'ann2snn|cuda_sparse'), the ANN-against-SNN
#                table (bench.sh annsnn), then snn-ann2snn --device cuda on the Fashion-MNIST CNN
#                (QANN and a ReLU baseline, 4 epochs each) and on a ResNet-18 (CIFAR-format, 2
#                epochs of 30,000 images, T* = 51); pass / fail: docs/ann2snn.md, section 8
#   ann2snn-oom  the converted ResNet-18 evaluated at T = 51 and 64 and sparsified at T* = 51,
#                the run that once ran out of device memory, with the memory sampled by
#                nvidia-smi, after the CUDA memory-estimate, sparse and ann2snn tests
#   nir          a CNN (2 epochs, T = 4) and a SEW-ResNet-18 (width 16, 1 epoch) trained here,
#                exported with snn-export-nir, run by tools/nir_check.py against snn-eval
#   nircheck     NIR files exported elsewhere (.carry/nir/NAME.nir and NAME_pred.txt, snn-eval's
#                predictions), each run by tools/nir_check.py on this GPU
#
# Output: $OUT/summary.txt, the accuracy-against-T plots and CSVs, $OUT/logs.tgz.
cd "$(dirname "$0")/../.." && . tools/gpu/lib.sh

# ann2snn_run NAME TIMEOUT FLAGS...: snn-ann2snn --device cuda, its table and check: lines
ann2snn_run() {
  local name=$1 t=$2; shift 2
  timeout "$t" build-gpu/bin/snn-ann2snn --device cuda "$@" --out "$LOGS/ann2snn_$name" \
    > "$LOGS/ann2snn_$name.txt" 2> "$LOGS/ann2snn_$name.err"
  echo "exit $?" | summary
  summary < "$LOGS/ann2snn_$name.txt"
  grep -E "epoch|snn-ann2snn:|hint:" "$LOGS/ann2snn_$name.err" | tail -12 | summary
}

for stage in "$@"; do
  case "$stage" in
  ann2snn)
    build || exit 1
    gpu_name
    log "ctest -V -R 'ann2snn|cuda_sparse' (CPU and CUDA conversion tests, signed spikes)"
    timeout 180 ctest --test-dir build-gpu -R 'ann2snn|cuda_sparse' -V \
      > "$LOGS/ctest_ann2snn.log" 2>&1
    keys="tests passed|tests failed|Failed|Skipped|FAIL|differs|beyond|dstep|max \|"
    grep -E "$keys|step gradient|checks, " "$LOGS/ctest_ann2snn.log" | head -40 | summary
    bash tools/gpu/bench.sh annsnn
    cifar
    log "snn-ann2snn: Fashion-MNIST CNN, 4 levels; QANN and ReLU ANN, 4 epochs each"
    ann2snn_run fmnist 150 --relu-baseline
    log "snn-ann2snn: ResNet-18, CIFAR-format Fashion-MNIST, 2 epochs of 30000, 2000 test images"
    ann2snn_run resnet 200 --model resnet18 --dataset cifar10 --data /tmp/fmcifar --epochs 2 \
      --batch-size 64 --limit-train 30000 --limit-test 2000
    for n in fmnist resnet; do
      cp "$LOGS/ann2snn_$n/accuracy_vs_T.svg" "$OUT/ann2snn_$n.svg" 2>/dev/null
      cp "$LOGS/ann2snn_$n/results.csv" "$OUT/ann2snn_$n.csv" 2>/dev/null
    done ;;
  ann2snn-oom)
    build snn-ann2snn snn-make-cifar test_cuda_sparse test_cuda_ann2snn test_cuda_memory_estimate ||
      exit 1
    gpu_name
    log "ctest: the CUDA memory estimate (a converted ResNet-18 at T = 51 among its cases)," \
        "sparse, ann2snn"
    timeout 120 ctest --test-dir build-gpu -R 'cuda_memory_estimate|cuda_sparse|cuda_ann2snn' -V \
      > "$LOGS/ctest_oom.log" 2>&1
    grep -E "tests passed|tests failed|Failed|FAIL|CHECK failed|converted resnet18" \
      "$LOGS/ctest_oom.log" | head -30 | summary
    cifar
    log "snn-ann2snn: ResNet-18 at T = 51 and 64, then the sparse pass at T* = 51"
    nvidia-smi -i "${CUDA_VISIBLE_DEVICES:-0}" --query-gpu=memory.used \
      --format=csv,noheader,nounits -lms 250 > "$LOGS/oom_memory_used.txt" 2>&1 &
    sampler=$!
    ann2snn_run oom 200 --model resnet18 --dataset cifar10 --data /tmp/fmcifar --epochs 2 \
      --batch-size 64 --limit-train 30000 --limit-test 2000 --steps 64
    kill "$sampler" 2>/dev/null
    most=$(sort -n "$LOGS/oom_memory_used.txt" | tail -1)
    echo "device memory used, most nvidia-smi saw: $most MiB" | summary ;;
  nir)
    build || exit 1
    [ -x build-gpu/bin/snn-export-nir ] ||
      { log "nir: snn-export-nir not built (no HDF5: apt-get install libhdf5-dev)"; continue; }
    for net in cnn sew; do
      flags="--epochs 2 --T 4"
      [ $net = sew ] && flags="--model sew-resnet18 --width 16 --epochs 1 --T 2 --limit-train 20000"
      log "nir: $net trained on CUDA ($flags), exported, run in PyTorch"
      build-gpu/bin/snn-train --device cuda --lr 1e-3 $flags --out "$LOGS/nir_$net" 2>&1 |
        grep -E "^epoch|done" | summary
      ckpt="$LOGS/nir_$net/checkpoint.safetensors"
      build-gpu/bin/snn-export-nir --checkpoint "$ckpt" -o "$LOGS/$net.nir" 2>&1 | summary
      pred="$LOGS/${net}_pred.txt"
      build-gpu/bin/snn-eval --checkpoint "$ckpt" --device cuda --predictions "$pred" 2>&1 |
        grep -E "accuracy" | summary
      timeout 300 python3 tools/nir_check.py "$LOGS/$net.nir" --predictions "$pred" \
        --device cuda 2>&1 | summary
    done
    cp "$LOGS/cnn.nir" "$OUT/" 2>/dev/null ;;
  nircheck)
    for f in .carry/nir/*.nir; do
      [ -f "$f" ] || { log "nircheck: no .carry/nir/*.nir"; break; }
      log "nir_check.py $(basename "$f")"
      timeout 240 python3 tools/nir_check.py "$f" --predictions "${f%.nir}_pred.txt" \
        --data .carry/fashion-mnist --device cuda 2>&1 | summary
    done ;;
  *) echo "convert.sh: unknown stage '$stage' (ann2snn ann2snn-oom nir nircheck)" >&2; exit 2 ;;
  esac
done
