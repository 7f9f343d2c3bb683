#!/usr/bin/env bash
# Builds tools/kernel_profile/kernel_profile.cc into OUT_DIR/libkernel_profile.so and copies CUPTI's
# library beside it. CUPTI comes from NVIDIA's nvidia-cuda-cupti wheel (PyPI), matching the CUDA 13.0
# toolkit; the GPU machine needs no install. Usage: tools/kernel_profile/build.sh OUT_DIR
set -euo pipefail
out="${1:?output dir}"
here="$(cd "$(dirname "$0")" && pwd)"
work="${TMPDIR:-/tmp}/minivllm-cupti"
if [ ! -f "$work/nvidia/cu13/include/cupti.h" ]; then
  mkdir -p "$work"
  python3 -m pip download --no-deps -d "$work" "nvidia-cuda-cupti==13.0.*"
  python3 -m zipfile -e "$work"/nvidia_cuda_cupti-*.whl "$work"
fi
mkdir -p "$out"
cp "$work/nvidia/cu13/lib/libcupti.so.13" "$out/"
g++ -std=c++20 -O2 -fPIC -shared -Wall -Wextra -I"$work/nvidia/cu13/include" -I/usr/local/cuda/include \
  "$here/kernel_profile.cc" -o "$out/libkernel_profile.so" -L"$out" -l:libcupti.so.13 -Wl,-rpath,'$ORIGIN'
echo "built $out/libkernel_profile.so"
