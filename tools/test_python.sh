#!/usr/bin/env bash
# The Python package's tests: `pip install .` into a fresh virtual environment (build/pytest-venv),
# as a user would, then `pytest tests/python`, which compares the package with the CLI
# ($MINIVLLM_CLI, default build/release/minivllm: run after the build of tools/run_tests.sh).
# The extension is built CPU-only here: the CUDA sources are compiled by the main build already.
# pyproject.toml keeps the pip build folder (build/pip/), so a second run rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/pytest-venv
rm -rf "$venv"
python3 -m venv "$venv"
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  "$venv/bin/python" -m pip install --quiet . -C cmake.define.MINIVLLM_CUDA=OFF
echo "pip install . (CPU-only): $(( $(date +%s) - start )) s"
"$venv/bin/python" -m pip install --quiet pytest
# From outside the source tree's python/ folder: the installed package is the one under test.
MINIVLLM_CLI="${MINIVLLM_CLI:-$PWD/build/release/minivllm}" "$venv/bin/python" -m pytest tests/python -q "$@"
