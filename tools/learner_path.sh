#!/usr/bin/env bash
# learner_path.sh - measures the learner's path through snn.c: which library files one training
# step of the main job's CNN executes, how many lines they hold, and how many of those lines run.
#
#   tools/learner_path.sh              # the reference kernels (--kernels ref): what a student reads
#   tools/learner_path.sh fast         # the same step on the fast CPU kernels, for comparison
#   tools/learner_path.sh ref --check  # exit 1 if the path is over its bars (DESIGN.md section 1)
#
# How: a CPU-only build with gcov instrumentation (-O0 --coverage, build-coverage/), one run of
# tools/learner_step.c (forward, cross-entropy, backward, Adam on a random batch: no data files,
# no checkpoints), then gcov over every object. A file counts when at least one of its lines ran;
# its lines are all the lines in the file (wc -l), its executed lines those gcov saw run.
# Headers count too (the inline neuron equations run from them). The program itself does not.
set -euo pipefail
cd "$(dirname "$0")/.."
kernels=${1:-ref}
check=${2:-}
max_lines=5000     # the bars of DESIGN.md section 1, for --kernels ref
max_executed=1400
build=build-coverage

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DSNN_CUDA=OFF -DSNN_NCCL=OFF -DSNN_NATIVE=OFF \
      -DSNN_COVERAGE=ON -DSNN_BUILD_TESTS=OFF > /dev/null
cmake --build "$build" -j "$(nproc)" --target learner-step > /dev/null
find "$build" -name '*.gcda' -delete
"$build/bin/learner-step" --kernels "$kernels"

root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# gcov writes one .gcov file per (object, source or header): -l names it after both, so two
# objects that include the same header do not overwrite each other's counts, and -p keeps their
# folders in the name, so that sources of one name in two folders (nn/optim.c and
# kernels/ref/optim.c) do not either.
find "$root/$build" -name '*.gcda' | while read -r gcda; do
  (cd "$work" && gcov -l -p -o "$(dirname "$gcda")" "$gcda" > /dev/null 2>&1 || true)
done

# Per source file: the lines gcov saw run in any object (a header's line runs if it ran anywhere).
awk -v root="$root/" '
  FNR == 1 { file = "" }
  /^ *-: *0:Source:/ {
    path = $0; sub(/^ *-: *0:Source:/, "", path)
    if (index(path, root) == 1) path = substr(path, length(root) + 1)
    file = (path ~ /^\// || path ~ /^tools\//) ? "" : path
    next
  }
  file != "" {
    split($0, col, ":"); count = col[1]; gsub(/ /, "", count); line = col[2] + 0
    if (count ~ /^[0-9]+\*?$/ && count + 0 > 0) ran[file SUBSEP line] = 1
  }
  END { for (k in ran) { split(k, p, SUBSEP); n[p[1]]++ } for (name in n) print name, n[name] }
' "$work"/*.gcov | sort > "$work/executed"

printf '\nLibrary files one training step runs on the %s kernels (tools/learner_step.c):\n\n' "$kernels"
printf '%-44s %7s %9s\n' file lines executed
files=0 lines=0 executed=0
while read -r file ran; do
  total=$(wc -l < "$file")
  printf '%-44s %7d %9d\n' "$file" "$total" "$ran"
  files=$((files + 1)) lines=$((lines + total)) executed=$((executed + ran))
done < "$work/executed"
printf '%-44s %7d %9d\n' "in all: $files files" "$lines" "$executed"

if [ "$check" = --check ]; then
  if [ "$lines" -gt "$max_lines" ] || [ "$executed" -gt "$max_executed" ]; then
    echo "learner_path: over the bars (at most $max_lines lines in the files, $max_executed executed)" >&2
    exit 1
  fi
  echo "learner_path: within the bars (at most $max_lines lines in the files, $max_executed executed)"
fi
