#!/usr/bin/env bash
# llama.cpp as a user would build it here: the tree vendored in the llama-cpp-python sdist on PyPI
# (the version is bench_vs_llamacpp.py's VERSION), fetched and unpacked once into SCRATCH
# ($MINIVLLM_LLAMACPP_SCRATCH, else build/llamacpp), built CPU-only for this machine's ISA
# (GGML_NATIVE), no network at run time, into SCRATCH/build. One place for the three tools that need
# it: bench_vs_llamacpp.py (llama-bench and friends), requantize_default_model.sh (llama-quantize),
# pack_llamacpp_src.sh (the source alone). Progress goes to stderr; stdout is the one path asked for.
# MINIVLLM_LLAMACPP_NO_AMX=1 builds it without AMX, for hosts where llama.cpp's AMX GEMM dies of SIGILL
# (docs/PERFORMANCE.md, "Stop 114"). Give such a build its own MINIVLLM_LLAMACPP_SCRATCH: the flags
# apply to a first configure only.
#   tools/build_llamacpp.sh --src             prints the source tree
#   tools/build_llamacpp.sh [-jN] TARGET...   builds the targets not built yet, prints the bin folder
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="$(sed -n 's/^VERSION = "\(.*\)"$/\1/p' "$root/tools/bench_vs_llamacpp.py")"
[ -n "$version" ] || { echo "build_llamacpp: no VERSION in bench_vs_llamacpp.py" >&2; exit 1; }
case "${1:-}" in
  --src) ;;
  -j*) [ $# -ge 2 ] || { echo "usage: $0 --src | [-jN] TARGET..." >&2; exit 2; } ;;
  "") echo "usage: $0 --src | [-jN] TARGET..." >&2; exit 2 ;;
esac
scratch="${MINIVLLM_LLAMACPP_SCRATCH:-$root/build/llamacpp}"
src="$scratch/llama_cpp_python-$version/vendor/llama.cpp"
if [ ! -d "$src" ]; then
  mkdir -p "$scratch"
  sdist="$scratch/llama_cpp_python-$version.tar.gz"
  [ -f "$sdist" ] || python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$scratch" >&2
  tar xzf "$sdist" -C "$scratch"
fi
if [ "${1:-}" = --src ]; then echo "$src"; exit 0; fi
jobs=()
case "$1" in -j*) jobs=("$1"); shift ;; esac
bin="$scratch/build/bin"
missing=()
for t in "$@"; do [ -x "$bin/$t" ] || missing+=("$t"); done
extra=()
# GCC keeps an explicit -mno-* over -march=native's defaults; ggml's AMX code needs __AMX_INT8__.
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
[ "${MINIVLLM_LLAMACPP_NO_AMX:-0}" = 1 ] && extra=("-DCMAKE_C_FLAGS=$no_amx" "-DCMAKE_CXX_FLAGS=$no_amx")
if [ ${#missing[@]} -gt 0 ]; then
  cmake -S "$src" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_CCACHE=OFF "${extra[@]}" >&2
  ninja -C "$scratch/build" "${jobs[@]}" "${missing[@]}" >&2
fi
echo "$bin"
