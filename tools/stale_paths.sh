#!/usr/bin/env bash
# stale_paths.sh - every place where a comment, a doc or a build file names a file of this tree
# that is not there (renamed, moved, or never written), one line each as
#   FILE:LINE: names PATH, which is not in the tree
# and exit status 1 if there is any, 0 if none. CI runs it before it builds (.ci/run).
#
#   tools/stale_paths.sh
#
# A name counts when it begins with one of the tree's top folders (or a folder name that was one
# once: dist, ref, cli, programs) right after a character that cannot be part of a path, and ends
# in .c, .h, .cu, .cuh, .md, .sh or .py. The files searched are the tracked ones of those kinds
# and .txt / .cmake. The name is checked as a path from the repository's root.
set -u
cd "$(dirname "$0")/.." || exit 2
folders='tensor|autograd|nn|neurons|sparse|data|examples|tests|docs|bench|tools|dist|distributed'
folders="$folders|nir|fuzz|cmake|app|kernels|ref|cli|programs"
name="(^|[^A-Za-z0-9_./<-])($folders)/[A-Za-z0-9_./-]*\.(c|h|cu|cuh|md|sh|py)\b"
stale=0
while IFS=: read -r file line path; do
  [ -e "$path" ] && continue
  echo "$file:$line: names $path, which is not in the tree"
  stale=1
done < <(git ls-files -- '*.c' '*.h' '*.cu' '*.cuh' '*.md' '*.txt' '*.cmake' '*.sh' '*.py' |
         xargs -r grep -n -o -E "$name" 2>/dev/null |
         sed -E 's/^([^:]+):([0-9]+):[^A-Za-z]*/\1:\2:/' | sort -u)
exit $stale
