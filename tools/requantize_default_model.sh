#!/usr/bin/env bash
# Requantises the default model (SmolLM2-135M-Instruct Q4_1, tools/fetch_default_model.sh) to Q4_K_M
# with llama.cpp's llama-quantize: Q6_K / Q4_K where a row is whole 256-element super-blocks (the
# 1536-wide ffn_down), Q5_0 / Q8_0 elsewhere (576 is not a multiple of 256), as users' files are.
# tests/golden/gguf_kquant_test.cc checks it against tests/goldens/smollm2-q4_k_m/goldens.json, whose
# float64 reference was made on the bytes llama.cpp 0.3.36's vendored copy writes (another
# llama-quantize may write others, and the test then skips).
#   tools/requantize_default_model.sh [/path/to/llama-quantize]
# Without a path it builds llama-quantize (tools/build_llamacpp.sh: CPU-only, from the
# llama-cpp-python sdist on PyPI, into build/llamacpp; ~3.5 min on 2 cores, once).
# tools/run_tests.sh runs it so that the test runs in CI. Prints the file's path; does nothing when
# the file is there. Exit status 3: llama-quantize wrote bytes other than the goldens' (no file).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${MINIVLLM_MODELS_DIR:-models}"
out="$dest/SmolLM2-135M-Instruct.Q4_K_M.gguf"
[ -f "$out" ] && { echo "$out"; exit 0; }
src=$(tools/fetch_default_model.sh)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# The build's and llama-quantize's logs (a warning a tensor) are shown only when they fail.
quantize="${1:-}"
if [ -z "$quantize" ]; then
  bin="$(tools/build_llamacpp.sh llama-quantize 2> "$log")" || { cat "$log" >&2; exit 1; }
  quantize="$bin/llama-quantize"
fi
"$quantize" --allow-requantize "$src" "$out.part" Q4_K_M > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
# The goldens' reference was run on one file's bytes: another file is left out, loudly, and the test
# skips, rather than judged against a reference of other weights.
want="$(sed -n 's/.*"sha256": "\([0-9a-f]*\)".*/\1/p' "$root/tests/goldens/smollm2-q4_k_m/goldens.json" | head -n 1)"
got="$(sha256sum "$out.part" | cut -d' ' -f1)"
if [ "$got" != "$want" ]; then
  rm -f "$out.part"
  echo "requantize_default_model: $quantize wrote other bytes (sha256 $got, the goldens' $want): not kept" >&2
  exit 3
fi
mv "$out.part" "$out"
echo "$out"
