#!/usr/bin/env bash
# Packs a CUDA build made on this machine for a GPU machine that lacks the Debian -dev packages:
# the binaries plus the shared libraries they need that are not part of the CUDA driver/toolkit
# there (OpenBLAS, PCRE2, gfortran runtime, ...). Usage: tools/make_gpu_dist.sh BUILD_DIR OUT_DIR
set -euo pipefail
build="${1:?build dir}"; out="${2:?output dir}"
rm -rf "$out"; mkdir -p "$out/lib"
for b in minivllm minivllm-worker test_cuda test_golden test_tp teacher_forced_check; do
  f=$(find "$build" -maxdepth 3 -type f -name "$b" | head -n 1)
  [ -n "$f" ] && cp "$f" "$out/"
done
for bin in "$out"/*; do
  [ -f "$bin" ] || continue
  ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$lib" in
      */libcuda.so*|*/libc.so*|*/libm.so*|*/libpthread.so*|*/libdl.so*|*/librt.so*|*/ld-linux*) ;;
      */libcudart*|*/libcublas*) ;;  # the toolkit on the GPU machine has them
      */libnccl*) ;;  # 218 MB: the GPU machine's own (torch's nvidia-nccl wheel; see gpu_run.sh)
      *) cp -Ln "$lib" "$out/lib/" ;;
    esac
  done
done
du -sh "$out"
