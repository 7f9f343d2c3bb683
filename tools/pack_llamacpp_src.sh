#!/usr/bin/env bash
# llama.cpp's source, trimmed to what a CUDA build of llama-bench and llama-quantize needs, as one xz
# archive small enough to carry to the GPU machine beside a dist (about 7 MB; the sdist is 50 MB,
# most of it vocabularies, docs and other backends). It is the tree vendored in the llama-cpp-python
# sdist on PyPI (bench_vs_llamacpp.py's version). On the GPU machine: `tar xJf ARCHIVE -C DIR`, then
# MINIVLLM_LLAMA_CPP=DIR/llama.cpp for `tools/gpu_run.sh --only kquant-vs-llamacpp` (PERFORMANCE.md,
# "Stop 95", builds it in about 275 s on 16 cores).
#
#   tools/pack_llamacpp_src.sh OUT.txz [SCRATCH]
# SCRATCH defaults to build_llamacpp.sh's (build/llamacpp), so a sdist fetched there is reused.
set -euo pipefail
out="${1:?usage: tools/pack_llamacpp_src.sh OUT.txz [SCRATCH]}"
src="$(MINIVLLM_LLAMACPP_SCRATCH="${2:-$(cd "$(dirname "$0")/.." && pwd)/build/llamacpp}" "$(dirname "$0")/build_llamacpp.sh" --src)"
cd "$src/.."
excludes=()
for d in models docs benches tests examples; do excludes+=(--exclude="llama.cpp/$d"); done
for b in sycl vulkan opencl metal hexagon et cann webgpu openvino zdnn musa virtgpu; do
  excludes+=(--exclude="llama.cpp/ggml/src/ggml-$b")
done
out_abs="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
XZ_OPT="-9 -T0" tar cJf "$out_abs" "${excludes[@]}" llama.cpp
ls -la "$out_abs"
