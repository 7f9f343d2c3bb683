#!/usr/bin/env bash
# The README's test command: installs what is needed, builds everything (the CUDA sources too when
# nvcc is present, so CI compiles them), fetches the default model, and runs the whole test suite.
# GPU tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/fetch_default_model.sh >/dev/null  # SmolLM2-135M-Instruct: its tests (and the server's) run, not skip
# SmolLM2 requantised to Q4_K_M by llama.cpp's llama-quantize (built here once, ~3.5 min): the GGUF
# K-quant test against its float64 reference (issue 47) runs, not skips.
status=0
tools/requantize_default_model.sh >/dev/null || status=$?
[ "$status" -eq 0 ] || [ "$status" -eq 3 ] || exit "$status"
cmake --preset release
cmake --build --preset release
ctest --preset release -j2
# The Python package: `pip install .` into a fresh virtual environment, then pytest tests/python
# (which compares it with the CLI just built).
MINIVLLM_CLI="$PWD/build/release/minivllm" tools/test_python.sh
