#!/usr/bin/env bash
# Installs the Debian packages minivllm builds with (see README: Dependencies). Idempotent.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libgtest-dev nlohmann-json3-dev libpcre2-dev libicu-dev libopenblas-dev python3 python3-pip)
# minivllm serve: cpp-httplib (Debian ships it as a header plus a shared library); python3-venv for
# the server test's client environment below.
pkgs+=(libcpp-httplib-dev python3-venv)
# The fuzzers (tools/run_fuzzers.sh): clang 16 with its libFuzzer / sanitizer runtimes and OpenMP;
# llvm-16 for llvm-symbolizer (readable sanitizer stacks, in tools/run_asan_tests.sh too).
pkgs+=(clang-16 libclang-rt-16-dev libomp-16-dev llvm-16)
# tools/bench_vs_llamacpp.py: /usr/bin/time -v for peak resident memory.
pkgs+=(time)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

# The server test drives `minivllm serve` with OpenAI's official Python client (PyPI `openai`),
# installed into a virtual environment of its own (Debian's python3 is externally managed).
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/build/venv"
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
"$venv/bin/python3" -c "import openai" 2>/dev/null || "$venv/bin/python3" -m pip install --quiet openai
# The structured-output tests check each reply against its schema with `jsonschema` (pydantic, for
# client.chat.completions.parse, comes with openai).
"$venv/bin/python3" -c "import jsonschema" 2>/dev/null || "$venv/bin/python3" -m pip install --quiet jsonschema

# xgrammar, the grammar engine of structured outputs: built from its pinned PyPI sdist.
"$root/tools/install_xgrammar.sh"
