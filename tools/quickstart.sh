#!/usr/bin/env bash
# The README's main command: installs what is needed, builds the CPU engine, fetches the default
# model and asks it a question. Usage: tools/quickstart.sh ["your question"]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
cmake --preset cpu >/dev/null
cmake --build --preset cpu --target minivllm_cli
tools/fetch_default_model.sh >/dev/null
question="${1:-What is the capital of France?}"
echo "> $question"
build/cpu/minivllm generate --model SmolLM2-135M-Instruct --chat "$question" --temperature 0 --max-tokens 96
