#!/usr/bin/env bash
# Builds the CUDA backend and its tests (Release) and runs test_cuda on a GPU machine.
#   tools/gpu_kernels.sh OUTDIR
# Everything is logged under OUTDIR: configure.log, build.log, test_cuda.log and the GoogleTest
# report test_cuda.xml. The bench tests print "[bench]" lines with the decode-attention GB/s.
# Environment: BUILD_DIR (default build/gpu), JOBS (default nproc), GTEST_FILTER (default all),
# CMAKE_ARGS (extra configure arguments, e.g. where a carried nlohmann-json or PCRE2 lives).
set -euo pipefail

OUT=${1:?usage: tools/gpu_kernels.sh OUTDIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build/gpu}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

{
  echo "== $(date -u +%FT%TZ) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  nvcc --version 2>&1 | tail -1 || true
  cmake --version | head -1
} | tee "$OUT/environment.log"

# CUDA_ARCHITECTURES OFF: the backend's own -gencode (sm_90a) is the only target; CMake's default
# architecture would add a pre-sm_80 pass that rejects cp.async / bf16 mma.
# The CUDA20 options: CMake < 3.26 does not know nvcc's C++20 flag (harmless on newer CMake).
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINIVLLM_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=OFF \
  -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20 \
  ${CMAKE_ARGS:-} >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
ninja -C "$BUILD" -j "$JOBS" test_cuda >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }

export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
set +e
"$BUILD/tests/test_cuda" --gtest_output="xml:$OUT/test_cuda.xml" ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} \
  >"$OUT/test_cuda.log" 2>&1
rc=$?
set -e
grep -E "^\[bench\]|^\[  (PASSED|FAILED)|^\[  FAILED|tests ran" "$OUT/test_cuda.log" || true
echo "test_cuda exit code $rc (log: $OUT/test_cuda.log)"
exit $rc
