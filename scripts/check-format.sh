#!/usr/bin/env bash
# Fails when a C/C++ source differs from what .clang-format asks for.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.c')
if ((${#files[@]})); then
  clang-format --dry-run -Werror "${files[@]}"
fi
echo "check-format: ${#files[@]} files clean"
