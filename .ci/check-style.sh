#!/usr/bin/env bash
# CI: the house rules a reviewer would otherwise check by hand. Every C++ and
# CUDA file formatted by .clang-format, no source file over 400 lines and no
# function over 80 (.ci/check-structure.py). Fails naming each offender.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
files=$(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')
if ! clang-format --dry-run --Werror $files; then
  echo "check-style: run clang-format -i on the files above" >&2
  status=1
fi
python3 .ci/check-structure.py || status=1
exit $status
