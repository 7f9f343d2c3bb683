#!/usr/bin/env bash
# The README's main command: installs what running needs (not the tests' and fuzzers' packages),
# builds the CPU engine (minivllm, and minivllm-worker beside it for --tensor-parallel-size), fetches
# the default model and asks it a question. Usage: tools/quickstart.sh ["your question"]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh --run-only
# Without the tests, which need GoogleTest; `cmake --preset cpu` turns them back on.
cmake --preset cpu -DMINIVLLM_TESTS=OFF >/dev/null
cmake --build --preset cpu --target minivllm_cli  # minivllm_worker comes with it (src/cli/CMakeLists.txt)
tools/fetch_default_model.sh >/dev/null
question="${1:-What is the capital of France?}"
echo "> $question"
build/cpu/minivllm generate --model SmolLM2-135M-Instruct --chat "$question" --temperature 0 --max-tokens 96
