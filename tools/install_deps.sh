#!/usr/bin/env bash
# Installs what snn.c needs on a Debian machine, only what is missing:
#   cmake, a C compiler, make, zlib (zlib1g-dev), the HDF5 C library (libhdf5-dev: NIR export and
#   import; optional, the build leaves NIR out without it), and the default data set
#   (dataset-fashion-mnist, which puts Fashion-MNIST under /usr/share/datasets/fashion-mnist).
#   With SNN_WITH_CLANG=1 also clang and its runtime libraries (libFuzzer, sanitizers) for the
#   fuzzers of .ci/fuzz.sh; with SNN_WITH_DOCS=1 doxygen (the API reference, docs/Doxyfile);
#   with SNN_WITH_PKGCONFIG=1 pkg-config (building examples/downstream against an installed
#   snn.c, .ci/downstream.sh); with SNN_WITH_NIR_CHECK=1 python3-numpy and python3-h5py, which
#   the reference nir package at ../shared/vendor needs to check snn.c's NIR files both ways
#   (tests/test_nir_interop.c; it skips without them).
# The CUDA backend is built when nvcc is found (CUDA Toolkit with cuBLAS); it is not installed here.
set -euo pipefail

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

install() {
  [ $# -eq 0 ] && return 0
  echo "snn.c: installing $*" >&2
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "snn.c: please install as root: apt-get install -y $*" >&2; exit 1; }
    sudo="sudo"
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

packages=(cmake gcc make zlib1g-dev libhdf5-dev dataset-fashion-mnist)
[ "${SNN_WITH_CLANG:-0}" = 1 ] && packages+=(clang)
[ "${SNN_WITH_DOCS:-0}" = 1 ] && packages+=(doxygen)
[ "${SNN_WITH_PKGCONFIG:-0}" = 1 ] && packages+=(pkg-config)
[ "${SNN_WITH_NIR_CHECK:-0}" = 1 ] && packages+=(python3-numpy python3-h5py)
missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
install "${missing[@]+"${missing[@]}"}"

# clang's runtime libraries are packaged per clang version: known only once clang is there
if [ "${SNN_WITH_CLANG:-0}" = 1 ]; then
  rt="libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
  installed "$rt" || install "$rt"
fi
