#!/usr/bin/env bash
# Builds the host-only Debug build with AddressSanitizer + UndefinedBehaviorSanitizer (the `asan`
# preset: build/asan, g++, no CUDA) and runs the whole host test suite under it. Any sanitizer report
# (a memory error, a leak, undefined behaviour) ends the process that made it and so fails its test
# and this script. The tensor-parallel tests spawn build/asan/minivllm-worker, which the default
# build target includes and which inherits the same options.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
jobs="${MINIVLLM_JOBS:-2}"

# halt_on_error: the first report ends the process (UBSan would otherwise print and go on).
# Options already in the environment come last, so they win.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:check_initialization_order=1:strict_init_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in /usr/lib/llvm-16/bin/llvm-symbolizer "$(command -v llvm-symbolizer || true)"; do
    if [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH="$s"; break; fi
  done
fi

# Left out: tests that bound wall-clock time for speed (not correctness), which Debug code under
# ASan cannot meet; the release suite (tools/run_tests.sh) runs them. Override with
# MINIVLLM_ASAN_EXCLUDE (a ctest -E regex; "" runs everything).
exclude="${MINIVLLM_ASAN_EXCLUDE-^Sampler\.BatchMatchesRowsAndStaysFast\$}"

t0=$(date +%s)
cmake --preset asan
cmake --build --preset asan -j "$jobs"
t1=$(date +%s)
ctest --preset asan -j "$jobs" ${exclude:+-E "$exclude"}
t2=$(date +%s)
echo "run_asan_tests: build $((t1 - t0)) s, tests $((t2 - t1)) s"
