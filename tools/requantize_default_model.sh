#!/usr/bin/env bash
# Requantises the default model (SmolLM2-135M-Instruct Q4_1, tools/fetch_default_model.sh) to Q4_K_M
# with llama.cpp's llama-quantize: Q6_K / Q4_K where a row is whole 256-element super-blocks (the
# 1536-wide ffn_down), Q5_0 / Q8_0 elsewhere (576 is not a multiple of 256), as users' files are.
# tests/golden/gguf_kquant_test.cc checks it against tests/goldens/smollm2-q4_k_m/goldens.json, whose
# float64 reference was made on the bytes llama.cpp 0.3.36's vendored copy writes (another
# llama-quantize may write others, and the test then skips).
#   tools/requantize_default_model.sh [/path/to/llama-quantize]
# Without a path it builds llama-quantize, CPU-only, from the llama-cpp-python sdist on PyPI
# (bench_vs_llamacpp.py's version and scratch folder, build/llamacpp; ~3.5 min on 2 cores, once).
# tools/run_tests.sh runs it so that the test runs in CI. Prints the file's path; does nothing when
# the file is there. Exit status 3: llama-quantize wrote bytes other than the goldens' (no file).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${MINIVLLM_MODELS_DIR:-models}"
out="$dest/SmolLM2-135M-Instruct.Q4_K_M.gguf"
[ -f "$out" ] && { echo "$out"; exit 0; }
src=$(tools/fetch_default_model.sh)
quantize="${1:-}"
if [ -z "$quantize" ]; then
  version="$(sed -n 's/^VERSION = "\(.*\)"$/\1/p' "$root/tools/bench_vs_llamacpp.py")"
  [ -n "$version" ] || { echo "requantize_default_model: no VERSION in bench_vs_llamacpp.py" >&2; exit 1; }
  scratch="$root/build/llamacpp"
  quantize="$scratch/build/bin/llama-quantize"
  if [ ! -x "$quantize" ]; then
    mkdir -p "$scratch"
    sdist="$scratch/llama_cpp_python-$version.tar.gz"
    [ -f "$sdist" ] || python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" \
      -d "$scratch" >&2
    [ -d "$scratch/llama_cpp_python-$version" ] || tar xzf "$sdist" -C "$scratch"
    # The flags bench_vs_llamacpp.py builds with, so that both share one build folder.
    cmake -S "$scratch/llama_cpp_python-$version/vendor/llama.cpp" -B "$scratch/build" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DGGML_CCACHE=OFF > /dev/null
    ninja -C "$scratch/build" llama-quantize > /dev/null
  fi
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# Its log (a warning a tensor) is shown only when it fails.
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
