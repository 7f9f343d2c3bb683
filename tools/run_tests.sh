#!/usr/bin/env bash
# The README's test command: installs what is needed, builds everything (the CUDA sources too when
# nvcc is present, so CI compiles them), and runs the whole test suite. GPU tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
cmake --preset release
cmake --build --preset release
ctest --preset release -j2
