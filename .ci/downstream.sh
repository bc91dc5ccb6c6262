#!/usr/bin/env bash
# .ci/downstream.sh - snn.c as a library others build on: installs a build tree into a fresh
# prefix (cmake --install), then builds examples/downstream from its own folder against that
# prefix twice, with find_package(snn) and with pkg-config, and runs each program (a few dozen
# training steps on made-up data, a checkpoint saved and loaded back; it exits non-zero unless
# it learned and the reloaded model agrees). Then twice more for the CPU only, with
# snn::snn_cpu and snn-cpu.pc: ldd must name no CUDA library, and the program runs with
# LD_LIBRARY_PATH empty. In a CUDA build it also checks that the snn.pc program does name
# libcudart, so that the CPU-only check is known to see the difference.
#
#   .ci/downstream.sh [BUILD_DIR]     # default build/ (what `make test` built, CUDA or not)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
# the headers land under include/snn/ and nowhere else in include/
[ -f "$prefix/include/snn/snn.h" ] && [ "$(ls "$prefix/include")" = snn ] ||
  { echo "downstream.sh: expected the headers under include/snn/ only" >&2
    ls -R "$prefix/include" >&2; exit 1; }
pcdir=$(dirname "$(find "$prefix" -name snn.pc -path '*/pkgconfig/*' | head -n 1)")
echo "downstream.sh: installed $(grep -c Installing "$work/install.log") files into a fresh prefix"

# 1. CMake: find_package(snn CONFIG REQUIRED) + target_link_libraries(... snn::snn)
cmake -S "$root/examples/downstream" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log" ||
  { cat "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/cmake" > "$work/cmake-build.log" 2>&1 ||
  { cat "$work/cmake-build.log" >&2; exit 1; }
"$work/cmake/quadrants" "$work/cmake.safetensors" | sed 's/^/  find_package: /'

# 2. pkg-config + make, from a copy of the folder (nothing is written into the source tree)
cp -r "$root/examples/downstream" "$work/pc"
PKG_CONFIG_PATH="$pcdir" make -s -C "$work/pc" > "$work/pc.log" 2>&1 ||
  { cat "$work/pc.log" >&2; exit 1; }
"$work/pc/quadrants" "$work/pc.safetensors" | sed 's/^/  pkg-config:   /'

# 3. CPU only: snn-cpu.pc and snn::snn_cpu link no CUDA library (cmake/snn_cpu.cmake)
no_cuda() {  # $1: a program built against the installed tree
  if ldd "$1" | grep -E 'libcudart|libcublas'; then
    echo "downstream.sh: $1, linked for the CPU only, needs the CUDA libraries above" >&2
    exit 1
  fi
}
if grep -q -- '-lcudart' "$pcdir/snn.pc"; then  # a CUDA build: the check must see the CUDA one
  ldd "$work/pc/quadrants" | grep libcudart > /dev/null ||
    { echo "downstream.sh: expected the snn.pc program to name libcudart" >&2; exit 1; }
fi
cp -r "$root/examples/downstream" "$work/cpu-pc"
PKG_CONFIG_PATH="$pcdir" make -s -C "$work/cpu-pc" PKG=snn-cpu > "$work/cpu-pc.log" 2>&1 ||
  { cat "$work/cpu-pc.log" >&2; exit 1; }
no_cuda "$work/cpu-pc/quadrants"
LD_LIBRARY_PATH= "$work/cpu-pc/quadrants" "$work/cpu-pc.safetensors" |
  sed 's/^/  snn-cpu.pc:   /'

mkdir "$work/cpu-cmake-src"
printf '%s\n' "cmake_minimum_required(VERSION 3.24)" "project(quadrants_cpu LANGUAGES C)" \
  "find_package(snn 0.1 CONFIG REQUIRED COMPONENTS cpu)" \
  "add_executable(quadrants \"$root/examples/downstream/quadrants.c\")" \
  "set_target_properties(quadrants PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)" \
  "target_link_libraries(quadrants PRIVATE snn::snn_cpu)" > "$work/cpu-cmake-src/CMakeLists.txt"
cmake -S "$work/cpu-cmake-src" -B "$work/cpu-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release > "$work/cpu-cmake.log" ||
  { cat "$work/cpu-cmake.log" >&2; exit 1; }
cmake --build "$work/cpu-cmake" > "$work/cpu-cmake-build.log" 2>&1 ||
  { cat "$work/cpu-cmake-build.log" >&2; exit 1; }
no_cuda "$work/cpu-cmake/quadrants"
LD_LIBRARY_PATH= "$work/cpu-cmake/quadrants" "$work/cpu-cmake.safetensors" |
  sed 's/^/  snn::snn_cpu: /'
echo "downstream.sh: ok"
