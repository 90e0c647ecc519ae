#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each from its
# committed seed corpus for a bounded time. Exits non-zero on a crash, a
# sanitizer report or a differential mismatch (the input is left as
# crash-<hash> in the working directory and the case is printed).
#
#   .ci/fuzz.sh                      ~60 s in all (CI)
#   .ci/fuzz.sh --seconds 3600       a longer run: SECONDS per target
#   .ci/fuzz.sh --target formats_vs_mpfr --seconds 3600
# New inputs go to build-fuzz/corpus/<target> (the committed corpus stays
# read-only); merge the useful ones with
#   build-fuzz/tests/fuzz/fuzz_T -merge=1 tests/fuzz/corpus/T build-fuzz/corpus/T
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-fuzz
seconds=""
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --target) only=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--target NAME] [--build DIR]" >&2; exit 2 ;;
  esac
done

# Line tables only (-gline-tables-only, not -g): a report still names file and
# line, and a file compiles in about 10% less CPU (sim/train/src/config_loader.cpp
# with the fuzz flags: 12.1 s against 13.5 s). The instrumented library copies
# are unity-built (RPSIM_UNITY_BUILD, cmake/RpsimLibrary.cmake).
debug="-O2 -gline-tables-only -DNDEBUG"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRPSIM_FUZZ=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$debug" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$debug" \
  -DRPSIM_BUILD_BENCHMARKS=OFF -DRPSIM_CUDA=OFF -DRPSIM_WERROR=ON -DRPSIM_UNITY_BUILD=ON >/dev/null
ninja -C "$build" -j "${RPSIM_JOBS:-$(nproc)}" fuzzers

targets=$(cd tests/fuzz/corpus && ls)
[ -n "$only" ] && targets=$only
# Default budget: 60 s across the targets, most of it for the differential one.
budget() {
  if [ -n "$seconds" ]; then echo "$seconds"; return; fi
  case "$1" in formats_vs_mpfr) echo 20 ;; *) echo 8 ;; esac
}
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# One target per core at a time (each libFuzzer run is one thread): every
# target gets its full budget, the bounded run takes about half as long.
# Longest budget first, so the others fill the second core beside it.
lanes=${RPSIM_JOBS:-$(nproc)}
targets=$(for t in $targets; do echo "$(budget "$t") $t"; done | sort -rn -k1,1 | cut -d' ' -f2)
fuzz_one() {
  local t=$1 bin="$build/tests/fuzz/fuzz_$1"
  [ -x "$bin" ] || { echo "fuzz: no target $bin" >&2; return 1; }
  mkdir -p "$build/corpus/$t"
  # A fixed seed in CI: the bounded run explores the same inputs every time,
  # so a landing never fails on a finding that depends on the draw (the long
  # runs, --seconds, take a random seed unless RPSIM_FUZZ_SEED is set).
  local seed=${RPSIM_FUZZ_SEED:-$([ -z "$seconds" ] && echo 1 || echo 0)}
  if ! "$bin" -seed="$seed" -max_total_time="$(budget "$t")" -print_final_stats=1 -timeout=20 \
       "$build/corpus/$t" "tests/fuzz/corpus/$t" 2>"$build/fuzz_$t.log"; then
    tail -n 40 "$build/fuzz_$t.log" >&2
    echo "fuzz: fuzz_$t FAILED (log: $build/fuzz_$t.log)" >&2
    return 1
  fi
  echo "== fuzz_$t: $(budget "$t") s"
  grep -E '^(Done|stat::number_of_executed_units|differential:|formats_vs_mpfr:)' "$build/fuzz_$t.log" | tail -n 3 || true
}
status=0
running=0
for t in $targets; do
  if [ "$running" -ge "$lanes" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
