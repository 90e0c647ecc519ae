#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the rpsim binary and
# the test programs, then every ctest test except the `long`, `gpu` and
# `pipeline` labels (the notebooks, rendered by Python: nothing sanitized
# beyond the quick study run the study tests share).
# Built with clang (as the fuzz tree is), not GCC: on 2 cores, from a fresh
# clone, the same targets took 965 s with GCC 12 and 562 s with clang 14, at
# -O1 with line tables either way (reports still name file and line). A second
# compiler also checks the code: clang's left-to-right argument evaluation
# exposed a tied-embedding gradient that GCC's order happened to hide
# (sim/train/src/layers/embedding.cpp). Only rpsim and the test programs are
# built (no benchmarks, no CUDA kernels: the `gpu` label is not run here).
# The test programs' shared headers are precompiled (no compiler launcher
# here: RPSIM_TEST_PCH defaults on), and the libraries are unity-built
# (RPSIM_UNITY_BUILD, cmake/RpsimLibrary.cmake). The quick study the CLI
# cases share trains the fixed-point study on 200 images here (every policy's
# path instrumented, 1/10 of its steps); its Gupta et al. facts are checked by
# the release run (tests/experiments/cli/test_cli_study.cpp). LLVM's OpenMP
# runtime has no GOMP_SPINCOUNT, so the wait-policy test skips here (visibly);
# the release run checks it against libgomp.
#
#   .ci/sanitize.sh [BUILD_DIR]      (default: build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
jobs=${RPSIM_JOBS:-$(nproc)}

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DRPSIM_SANITIZE=ON -DRPSIM_UNITY_BUILD=ON \
  -DRPSIM_BUILD_BENCHMARKS=OFF -DRPSIM_CUDA=OFF -DRPSIM_WERROR=ON >/dev/null
# The programs ctest runs: rpsim (driven by the CLI tests) and test_<area>.
targets=$(ninja -C "$build" -t targets all | sed -n 's/^\(rpsim\|test_[a-z_]*\): .*/\1/p' | sort -u)
ninja -C "$build" -j "$jobs" $targets

# halt_on_error: the first report fails the test. detect_leaks stays on.
# OpenMP: LLVM's runtime is not instrumented; no suppression is needed
# (checked: the whole suite with no report).
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Tests that run the rpsim binary inherit these, so the CLI is checked too.
# ctest runs one test per core, so each test's OpenMP team is one thread (as
# `make test`): the suite took 483 s with OpenMP's default of two threads a
# test on two cores, 433 s with one (fresh study fixture both times).
OMP_NUM_THREADS=1 ctest --test-dir "$build" -LE 'long|gpu|pipeline' --output-on-failure -j "$jobs"
