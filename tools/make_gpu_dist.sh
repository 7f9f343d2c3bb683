#!/usr/bin/env bash
# Packs a CUDA build made on this machine for a GPU machine that lacks the Debian -dev packages:
# the binaries plus the shared libraries they need that are not part of the CUDA driver/toolkit
# there (OpenBLAS, PCRE2, gfortran runtime, ...).
#
#   tools/make_gpu_dist.sh BUILD_DIR OUT_DIR [ARCHIVE.txz]
#
# With ARCHIVE, the binaries are stripped and packed into one xz archive (unpack with
# `tar xJf ARCHIVE`) whose dictionary spans several binaries: they share most of their code (the
# engine and its kernels), so four of them pack into about 30 MB instead of about 60 MB apart, which
# keeps a device call's carry under its 64 MiB. Other binaries (e.g. a second build to compare
# against) may be copied into OUT_DIR first and go in the same archive.
set -euo pipefail
build="${1:?build dir}"; out="${2:?output dir}"; archive="${3:-}"
bins="minivllm minivllm-worker test_cuda test_golden test_tp teacher_forced_check"
# This build's binaries and libraries replace any earlier ones; other files already in OUT_DIR (a
# second build's binary to compare against) stay and go into the archive.
mkdir -p "$out"; rm -rf "$out/lib"; mkdir -p "$out/lib"
for b in $bins; do rm -f "$out/$b"; done
for b in $bins; do
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
if [ -n "$archive" ]; then
  archive="$(realpath -m "$archive")"
  find "$out" -maxdepth 1 -type f -exec strip {} +
  # Binaries side by side (sorted names: a twin such as minivllm.old follows minivllm), each within
  # the dictionary's reach of the one it shares code with.
  ( cd "$(dirname "$out")" && base="$(basename "$out")" &&
    XZ_OPT="-9e -T1 --lzma2=dict=192MiB" tar cJf "$archive" $(ls -d "$base"/* | sort) )
  ls -l "$archive"
fi
