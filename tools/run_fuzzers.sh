#!/usr/bin/env bash
# tools/run_fuzzers.sh [SECONDS] [NAME...]
# Builds the libFuzzer harnesses of fuzz/ (clang, -fsanitize=fuzzer,address,undefined; build/fuzz)
# and runs each for SECONDS (default 60) on a copy of its seed corpus fuzz/corpus/<name>/ (the
# seeds are never modified). NAMEs (e.g. gguf chat_template) pick some; default: all.
# A crash, a sanitizer report, a timeout (-timeout=10 per input), running out of memory
# (-rss_limit_mb=2048) or a leak fails the script: it prints the reproducer's path and the command
# that replays it. Work files: build/fuzz/run/<name>/ (corpus/, artifacts/, log, rc).
# Environment: MINIVLLM_JOBS (build parallelism, and fuzzers run at a time; default 2), MINIVLLM_FUZZ_TOKENIZER (the
# tokenizer.json of tokenizer_encode; default ../shared/models/qwen3-0.6b/tokenizer.json),
# MINIVLLM_FUZZ_CC / MINIVLLM_FUZZ_CXX (default clang-16 / clang++-16: clang 14 and 15 cannot
# compile the sources, which capture structured bindings in lambdas).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds="${1:-60}"
shift || true
case "$seconds" in '' | *[!0-9]*) echo "usage: $0 [SECONDS] [NAME...]" >&2; exit 2 ;; esac
tools/install_deps.sh
jobs="${MINIVLLM_JOBS:-2}"
build=build/fuzz

# name:max_len. Inputs past max_len are not generated (seeds are read up to it).
declare -A max_len=(
  [gguf]=32768
  [safetensors]=8192
  [tokenizer_json]=16384
  [chat_template]=8192
  [tokenizer_encode]=4096
  [openai_request]=4096
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(gguf safetensors tokenizer_json chat_template tokenizer_encode openai_request)

t0=$(date +%s)
cc="${MINIVLLM_FUZZ_CC:-clang-16}"
cxx="${MINIVLLM_FUZZ_CXX:-clang++-16}"
CC="$cc" CXX="$cxx" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMINIVLLM_FUZZ=ON \
  -DMINIVLLM_CUDA=OFF -DMINIVLLM_TESTS=OFF >/dev/null
targets=()
for n in "${names[@]}"; do
  [ -n "${max_len[$n]:-}" ] || { echo "run_fuzzers: unknown fuzzer '$n' (${!max_len[*]})" >&2; exit 2; }
  targets+=("${n}_fuzz")
done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
t1=$(date +%s)
echo "run_fuzzers: build $((t1 - t0)) s"

# UB and the first ASan report end the process; leaks are reported (libFuzzer's -detect_leaks=1).
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in /usr/lib/llvm-16/bin/llvm-symbolizer "$(command -v llvm-symbolizer || true)"; do
    if [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH="$s"; break; fi
  done
fi
tokenizer="${MINIVLLM_FUZZ_TOKENIZER:-$root/../shared/models/qwen3-0.6b/tokenizer.json}"

# One fuzzer in build/fuzz/run/<name>: its exit code goes to rc there. They run MINIVLLM_JOBS at a
# time (each is one process on one core), so every one still fuzzes for SECONDS.
fuzz_one() {
  local n=$1 work="$build/run/$1" rc dict=()
  [ -f "fuzz/dicts/$n.dict" ] && dict=(-dict="$root/fuzz/dicts/$n.dict")
  (cd "$work" && MINIVLLM_FUZZ_TOKENIZER="$tokenizer" "$root/$build/${n}_fuzz" \
     -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="${max_len[$n]}" \
     -artifact_prefix=artifacts/ -print_final_stats=1 -print_funcs=0 "${dict[@]}" corpus >log 2>&1) && rc=0 || rc=$?
  echo "$rc" > "$work/rc"
}

ran=()
running=0
for n in "${names[@]}"; do
  if [ "$n" = tokenizer_encode ] && [ ! -f "$tokenizer" ]; then
    echo "run_fuzzers: SKIP $n: no tokenizer at $tokenizer (set MINIVLLM_FUZZ_TOKENIZER)"
    continue
  fi
  work="$build/run/$n"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp -R "fuzz/corpus/$n/." "$work/corpus/"
  echo "run_fuzzers: $n for ${seconds} s (max_len ${max_len[$n]})"
  fuzz_one "$n" &
  ran+=("$n")
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=()
for n in "${ran[@]}"; do
  work="$build/run/$n"
  rc=$(cat "$work/rc" 2>/dev/null || echo 1)
  artifacts=$(find "$work/artifacts" -type f | sort)
  if [ "$rc" -ne 0 ] || [ -n "$artifacts" ]; then
    echo "run_fuzzers: FAIL $n (exit $rc); the end of $work/log:"
    tail -n 60 "$work/log" | sed 's/^/    /'
    for a in $artifacts; do
      echo "run_fuzzers: reproducer: $root/$a"
      echo "run_fuzzers:   replay:   $root/$build/${n}_fuzz $root/$a"
    done
    failed+=("$n")
  else
    grep -E '^(stat::number_of_executed_units|stat::new_units_added)|DONE' "$work/log" | sed "s/^/    $n: /" || true
  fi
done
t2=$(date +%s)
echo "run_fuzzers: fuzzing $((t2 - t1)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_fuzzers: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "run_fuzzers: all passed"
