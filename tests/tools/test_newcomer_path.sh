#!/usr/bin/env bash
# The newcomer's path (issue 52): the quickstart installs only what running needs (no GoogleTest,
# no clang/llvm 16 or libFuzzer runtimes, which the full install keeps for the tests and fuzzers),
# and building minivllm builds minivllm-worker beside it, so --tensor-parallel-size works after it.
# Usage: test_newcomer_path.sh BINARY_DIR (where minivllm was built).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin_dir="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }

run_only=$("$root/tools/install_deps.sh" --run-only --print)
full=$("$root/tools/install_deps.sh" --print)
for p in libgtest-dev clang-16 libclang-rt-16-dev libomp-16-dev llvm-16 python3-venv; do
  grep -qx "$p" <<<"$run_only" && fail "--run-only installs $p, which only the tests or fuzzers need"
  grep -qx "$p" <<<"$full" || fail "the full install lost $p (tools/run_tests.sh and CI need it)"
done
for p in cmake g++ libopenblas-dev libcpp-httplib-dev nlohmann-json3-dev python3-pip; do
  grep -qx "$p" <<<"$run_only" || fail "--run-only misses $p, which building or running needs"
done
grep -q 'install_deps.sh --run-only' "$root/tools/quickstart.sh" || fail "tools/quickstart.sh does not install with --run-only"
for s in run_tests.sh run_asan_tests.sh run_fuzzers.sh; do
  grep -qE 'tools/install_deps.sh *$' "$root/tools/$s" || fail "tools/$s no longer installs everything"
done
# The build system's rule, not this build's history: minivllm depends on minivllm-worker.
if [ -f "$bin_dir/build.ninja" ]; then  # the presets' generator
  deps=$(ninja -C "$bin_dir" -t query minivllm)
  grep -q 'minivllm-worker' <<<"$deps" || fail "building minivllm does not build minivllm-worker"
fi
[ -x "$bin_dir/minivllm-worker" ] || fail "no minivllm-worker beside $bin_dir/minivllm"
echo "ok"
