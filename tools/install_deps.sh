#!/usr/bin/env bash
# Installs what snn.c needs on a Debian machine, only what is missing:
#   cmake, a C compiler, make, zlib (zlib1g-dev), and the default data set (dataset-fashion-mnist,
#   which puts Fashion-MNIST under /usr/share/datasets/fashion-mnist). clang is used for the fuzzers.
# The CUDA backend is built when nvcc is found (CUDA Toolkit with cuBLAS); it is not installed here.
set -euo pipefail
packages=(cmake gcc make zlib1g-dev dataset-fashion-mnist)
[ "${SNN_WITH_CLANG:-0}" = 1 ] && packages+=(clang)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "snn.c: installing ${missing[*]}" >&2
if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
  echo "snn.c: please install as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
