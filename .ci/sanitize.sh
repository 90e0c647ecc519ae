#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the rpsim binary and
# the test programs, then every ctest test except the `long`, `gpu` and
# `pipeline` labels (the notebooks, rendered by Python: nothing sanitized
# beyond the quick study run the study tests share).
# Budget: ~12 minutes on 2 cores: builds only rpsim and the test programs (no
# benchmarks, no CUDA kernels: the `gpu` label is not run here), at -O1 with
# line tables (-g1): half the compile time of -O2 -g, and reports still name
# file and line. The test programs' shared headers are precompiled (no
# compiler launcher here: RPSIM_TEST_PCH defaults on), and the libraries are
# unity-built (RPSIM_UNITY_BUILD, cmake/RpsimLibrary.cmake). The quick study the CLI
# cases share trains the fixed-point study on 200 images here (every policy's
# path instrumented, 1/10 of its steps); its Gupta et al. facts are checked by
# the release run (tests/experiments/cli/test_cli_study.cpp).
#
#   .ci/sanitize.sh [BUILD_DIR]      (default: build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
jobs=${RPSIM_JOBS:-$(nproc)}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DRPSIM_SANITIZE=ON -DRPSIM_UNITY_BUILD=ON \
  -DRPSIM_BUILD_BENCHMARKS=OFF -DRPSIM_CUDA=OFF -DRPSIM_WERROR=ON >/dev/null
# The programs ctest runs: rpsim (driven by the CLI tests) and test_<area>.
targets=$(ninja -C "$build" -t targets all | sed -n 's/^\(rpsim\|test_[a-z_]*\): .*/\1/p' | sort -u)
ninja -C "$build" -j "$jobs" $targets

# halt_on_error: the first report fails the test. detect_leaks stays on.
# OpenMP: libgomp's worker threads are not instrumented but do not touch
# instrumented memory unsafely; no suppression is needed (checked: no report).
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Tests that run the rpsim binary inherit these, so the CLI is checked too.
# ctest runs one test per core, so each test's OpenMP team is one thread (as
# `make test`): the suite took 483 s with OpenMP's default of two threads a
# test on two cores, 433 s with one (fresh study fixture both times).
OMP_NUM_THREADS=1 ctest --test-dir "$build" -LE 'long|gpu|pipeline' --output-on-failure -j "$jobs"
