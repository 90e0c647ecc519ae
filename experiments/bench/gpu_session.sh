#!/usr/bin/env bash
# One lent GPU session's checks (issues #39 and #40), as one command on the device machine, within its
# 10-minute limit: `bash experiments/bench/gpu_session.sh [SECONDS]` from the repository root.
#
# That machine has CUDA, CMake, ninja, Python 3.12 with torch 2.x and pybind11, but none of the Debian
# -dev packages rpsim builds against. They travel as .deb files in .devroot/ (ignored by git; fetch them
# here with `cd .devroot && apt-get download libfmt-dev libfmt9 libeigen3-dev libboost1.74-dev
# libcli11-dev nlohmann-json3-dev zlib1g-dev`) and are unpacked beside the build, not into /.
#
# In $OUT (at most 8 files come back): run.log (versions, progress, the checks' output), build.log,
# report.json (experiments/bench/gpu_backend_check.py), cublas-h200.txt + sweep.log
# (sim/accumulation/fit/cublas_heuristic_table.py), heldout.json + heldout.npz
# (sim/accumulation/fit/cublas_grid_capture.py --heldout), build.tgz (build/python, to carry as
# .devbuild/python in a second call: `mkdir -p .devbuild && tar xzf build.tgz -C .devbuild`). Every stage has a deadline inside SECONDS
# (default 540), and each writes as it goes, so a stage that overruns loses only its tail.
set -u
LIMIT=${1:-540}
OUT=${OUT:-/tmp/rpsim-gpu-out}
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((LIMIT - ($(date +%s) - T0))); }
log() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a "$OUT/run.log"; }
PY=$(command -v python3)
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  "$PY" -c "import torch, numpy, pybind11; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'numpy', numpy.__version__, 'pybind11', pybind11.__version__)"
  g++ --version | head -1
  cmake --version | head -1
  nvcc --version | tail -1
  nproc
} >>"$OUT/run.log" 2>&1

# 1. The held-out cuBLAS capture (torch only), on the GPU while the CPUs build; and the heuristic table
# sweep (cuBLASLt's answers, CPU only, no GEMM run) beside everything.
CAPTURE_S=${CAPTURE_S:-150}
CAPTURE=
SWEEP=
if [ -z "${SKIP_CUBLAS:-}" ]; then
(timeout $((CAPTURE_S + 30)) "$PY" sim/accumulation/fit/cublas_grid_capture.py "$OUT" --heldout "${CAPTURE_N:-500}" \
  --seed "${CAPTURE_SEED:-40}" --name "${CAPTURE_NAME:-heldout}" --deadline "$CAPTURE_S" ${CAPTURE_ARGS:-} \
  >>"$OUT/sweep.log" 2>&1) &
CAPTURE=$!
[ -n "${SKIP_SWEEP:-}" ] || (timeout $((LIMIT - 15)) "$PY" sim/accumulation/fit/cublas_heuristic_table.py h200 --out "$OUT/cublas-h200.txt" \
  --jobs "${SWEEP_JOBS:-4}" --deadline $((LIMIT - 75)) ${SWEEP_KINDS:+--kinds $SWEEP_KINDS} >>"$OUT/sweep.log" 2>&1) &
SWEEP=$!
fi

# 2. The build: the Python module and the CUDA backend, for sm_90a only.
R=/tmp/devroot
mkdir -p $R
for f in .devroot/*.deb; do dpkg -x "$f" $R; done
# zlib: the system's shared one (the carried libz.a is not position-independent, no shared module links
# it), with the carried header only where the system has none.
rm -f $R/usr/lib/x86_64-linux-gnu/libz.a $R/usr/lib/x86_64-linux-gnu/libz.so
lib=$( (ldconfig -p | awk '/libz\.so\.1 .*x86-64/ {print $NF}'; ls /usr/lib/x86_64-linux-gnu/libz.so.1* \
  /lib/x86_64-linux-gnu/libz.so.1*) 2>/dev/null | head -1)
inc=/usr/include
[ -f /usr/include/zlib.h ] || inc=$R/usr/include
zlib=(-DZLIB_INCLUDE_DIR=$inc -DZLIB_LIBRARY="$lib" -DZLIB_LIBRARY_RELEASE="$lib")
# Warnings as errors serve CI's compilers; this host compiler and its headers are others.
sed -i 's/-Werror=all-warnings//' sim/cuda/CMakeLists.txt
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
B=/tmp/rpsim-build
BUILT=1
if [ -n "${SKIP_BUILD:-}" ]; then
  log "no build, no backend checks (SKIP_BUILD)"
elif [ -n "$(ls .devbuild/python/rpsim/_core*.so 2>/dev/null)" ]; then
  B=$PWD/.devbuild  # a build an earlier session brought back (build.tgz) and carried here
  BUILT=0
  log "using the carried build"
else
log "configure"
rm -f $B/CMakeCache.txt
timeout 120 cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DRPSIM_BUILD_TESTS=OFF \
  -DRPSIM_BUILD_BENCHMARKS=OFF -DRPSIM_CUDA_ARCHITECTURES=90a-real -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_PREFIX_PATH="$R/usr;$R/usr/share/eigen3" -DPython3_EXECUTABLE="$PY" \
  -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DCMAKE_CXX_FLAGS="-include cstdint" \
  "${zlib[@]}" >"$OUT/build.log" 2>&1
log "build"
timeout 300 ninja -C $B -j "$(nproc)" rpsim_python >>"$OUT/build.log" 2>&1
BUILT=$?
log "build exit $BUILT"
tail -5 "$OUT/build.log" >>"$OUT/run.log"
[ $BUILT -eq 0 ] && tar czf "$OUT/build.tgz" -C $B python
fi

# 3. The backend's checks, once the capture has left the GPU (the speed check times it alone).
[ -n "$CAPTURE" ] && wait $CAPTURE && log "capture exit $?"
if [ $BUILT -eq 0 ]; then
  export PYTHONPATH=$B/python LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu
  PYTHONUNBUFFERED=1 timeout $(($(left) - 20)) "$PY" experiments/bench/gpu_backend_check.py \
    --values 100663296 --shapes 20 --out "$OUT" --only "${CHECKS:-speed,gemm,block,torch,round}" \
    >>"$OUT/run.log" 2>&1
  log "checks exit $?"
fi
if [ $BUILT -eq 0 ] && [ -n "${PROFILE:-}" ]; then
  # The tc kernel under Nsight Compute (Firecracker machines read the counters; --clock-control none as
  # the device notes ask): where its time goes, for issue #39's speed.
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout $(($(left) - 10)) "$NCU" --clock-control none --kernel-name regex:tc_gemm_kernel --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section LaunchStats --section Occupancy --section SourceCounters \
    --section InstructionStats --section SchedulerStats \
    "$PY" experiments/bench/gpu_profile_tc.py 1024 >"$OUT/profile.txt" 2>&1
  log "profile exit $?"
  # The kernel's machine code for sm_90a (instructions per step: where a product's time goes).
  obj=$B/sim/cuda/CMakeFiles/rpsim_cuda_backend.dir/src/backend_tc.cu.o
  [ -f "$obj" ] && cuobjdump --dump-sass "$obj" 2>&1 | gzip >"$OUT/sass-tc.txt.gz"
  log "sass exit $?"
fi
[ -n "$SWEEP" ] && wait $SWEEP && log "sweep exit $?"
ls -la "$OUT" >>"$OUT/run.log"
