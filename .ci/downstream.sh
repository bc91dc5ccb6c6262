#!/usr/bin/env bash
# .ci/downstream.sh - snn.c as a library others build on: installs a build tree into a fresh
# prefix (cmake --install), then builds examples/downstream from its own folder against that
# prefix twice, with find_package(snn) and with pkg-config, and runs each program (a few dozen
# training steps on made-up data, a checkpoint saved and loaded back; it exits non-zero unless
# it learned and the reloaded model agrees).
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
echo "downstream.sh: ok"
