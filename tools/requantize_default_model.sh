#!/usr/bin/env bash
# Requantises the default model (SmolLM2-135M-Instruct Q4_1, tools/fetch_default_model.sh) to Q4_K_M
# with llama.cpp's llama-quantize: Q6_K / Q4_K where a row is whole 256-element super-blocks (the
# 1536-wide ffn_down), Q5_0 / Q8_0 elsewhere (576 is not a multiple of 256), as users' files are.
# tests/golden/gguf_kquant_test.cc checks it against tests/goldens/smollm2-q4_k_m/goldens.json when
# present (made by llama.cpp 0.3.36's vendored copy; another llama-quantize may write other bytes,
# and the test then skips). Usage: tools/requantize_default_model.sh /path/to/llama-quantize
set -euo pipefail
quantize="${1:?usage: $0 /path/to/llama-quantize}"
dest="${MINIVLLM_MODELS_DIR:-models}"
src=$(tools/fetch_default_model.sh)
out="$dest/SmolLM2-135M-Instruct.Q4_K_M.gguf"
"$quantize" --allow-requantize "$src" "$out" Q4_K_M > /dev/null
echo "$out"
