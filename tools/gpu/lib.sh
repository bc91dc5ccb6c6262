# shellcheck shell=bash
# lib.sh - what the GPU machine's scripts beside this file (test.sh, bench.sh, train.sh,
# convert.sh, dist.sh) share: the output in $OUT, the build in build-gpu/, the tree to compare
# against, the data.
# Sourced by them, never run alone. The device tool runs a script in the repository root with
# $OUT set to an empty folder whose files come back (at most 8): each script writes
# $OUT/summary.txt (what it measured, in order, with the seconds since it began) and packs its
# full logs into $OUT/logs.tgz when it ends. Data travel in the git-ignored folder .carry/
# (name it in the tool's `carry`): .carry/fashion-mnist/*.gz, and optionally
# .carry/base-src.tgz, a tree to compare against, made here with
#   git archive --prefix=base-src/ -o .carry/base-src.tgz COMMIT
set -uo pipefail
OUT=${OUT:-/tmp/snn-out}
LOGS=/tmp/snn-logs
mkdir -p "$OUT" "$LOGS"
trap 'tar -C /tmp -czf "$OUT/logs.tgz" snn-logs 2>/dev/null' EXIT
export PATH="/usr/local/cuda/bin:$PATH"
[ -d .carry ] && export SNN_DATA_DIR=$PWD/.carry

log() { echo "== $* [${SECONDS}s]" | tee -a "$OUT/summary.txt"; }
summary() { tee -a "$OUT/summary.txt"; }
gpu_name() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | summary
}

# build [TARGET...]: this tree for sm_90 in Release, incremental (a warm machine keeps build-gpu/
# between calls); every target by default. Compiler errors go to the summary.
build() {
  log "build (sm_90, Release)${1:+: $*}"
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        > "$LOGS/cmake.log" 2>&1 || { tail -20 "$LOGS/cmake.log" | summary; return 1; }
  cmake --build build-gpu -j "$(nproc)" ${1:+--target "$@"} -- -k > "$LOGS/build.log" 2>&1 ||
    { grep -E "error" "$LOGS/build.log" | head -30 | summary; return 1; }
}

# build_base [TARGET...]: the tree in .carry/base-src.tgz (if any) in /tmp/base-build, in the
# background: `wait` before using /tmp/base-build/bin. bench_train_step by default.
build_base() {
  [ -f .carry/base-src.tgz ] || return 0
  rm -rf /tmp/base-src && tar -xzf .carry/base-src.tgz -C /tmp
  ( cmake -S /tmp/base-src -B /tmp/base-build -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES=90 > "$LOGS/base_cmake.log" 2>&1 &&
    cmake --build /tmp/base-build -j 8 --target "${@:-bench_train_step}" \
      > "$LOGS/base_build.log" 2>&1 ) &
}

# The binaries to time: this tree's, then the base tree's where it was built ("new", "base").
variants() { echo new; [ -d /tmp/base-build/bin ] && echo base; }
bin_of() { [ "$1" = base ] && echo /tmp/base-build/bin/$2 || echo build-gpu/bin/$2; }

# cifar: the CIFAR-format Fashion-MNIST (snn-make-cifar) in /tmp/fmcifar, made once a machine.
cifar() {
  mkdir -p /tmp/fmcifar
  [ -f /tmp/fmcifar/cifar-10-binary.tar.gz ] ||
    build-gpu/bin/snn-make-cifar -i .carry/fashion-mnist \
      -o /tmp/fmcifar/cifar-10-binary.tar.gz > /dev/null
}
