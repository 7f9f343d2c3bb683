#!/usr/bin/env bash
# The figures that need two or four GPUs (nvidia-h200-x2, nvidia-h200-x4), one part a device call (each
# well under its 10 minutes):
#
#   tools/gpu_ws2.sh OUTDIR BIN PART
#
# BIN: tools/make_gpu_dist.sh's folder, with minivllm, minivllm-worker (tensor parallelism's worker
# processes), teacher_forced_check and lib/. PART:
#   configs  issue 45: the five published configs of ../shared/models/configs at 2 layers, real widths,
#            teacher-forced against HF transformers at world_size 1 and 2 (tools/gpu_configs_check.sh).
#   dense32  issue 45: Qwen3-32B, dummy weights, bf16 and FP8, world_size 1 and 2 (the must: world_size
#            2 runs the seeds' workload 1.7x world_size 1).
#   dense70  issue 45: Llama-3.1-70B at world_size 2, bf16 (70 GB a GPU) and FP8.
#   moe      issue 48: Qwen3-30B-A3B at world_size 1, 2 and 2 with --enable-expert-parallel (must 1.6x),
#            and greedy generation at world_size 2.
#   Four GPUs (issue 51):
#   70x4-bf16, 70x4-fp8  Llama-3.1-70B at world_size 2 and 4 in one call (the ratios' musts: batch-1
#            latency 0.6x, workload 1.7x), then greedy generation at world_size 4.
#   configs4 the published configs (all have heads that divide by 4) at world_sizes 1 and 4, then graph
#            replay against eager at world_size 4 (MINIVLLM_CONFIGS4 picks the configs).
#   comm4    the communicator's tests over every visible GPU (CudaComm.*: the one-shot all-reduce and its
#            NCCL fallback with four peers), then the worker-fault tests on the GPUs at world_size 4.
#   ar4      the all-reduce bench at four ranks (one-shot, two-shot, NCCL), then Llama-3.1-70B's seeds'
#            workload at world_size 4, bf16 and FP8, with and without the two-shot all-reduce from 8 MiB
#            (MINIVLLM_CUSTOM_AR_TWO_SHOT_BYTES, off by default: unmeasured at four GPUs), interleaved.
# Each bench is tools/gpu_run.sh's models step (`minivllm bench --load-format dummy`: the seeds'
# workload, then batch-1 decode) under one setting, into OUTDIR/<name>/bench_dummy_<config>.json,
# with a summary line here. SHARED (default ../shared) holds models/configs.
set -uo pipefail
out="${1:?OUTDIR}"; part="${3:?PART}"
cd "$(dirname "$0")/.."
. tools/gpu_env.sh "${2:?BIN}"
bin="$gpu_bin"
shared="${SHARED:-$PWD/../shared}"
mkdir -p "$out"
status=0

# bench NAME CONFIG ARGS...: one config's dummy-weight bench under ARGS.
bench() {
  local name="$1" config="$2"; shift 2
  local t0=$SECONDS
  MINIVLLM_MODEL_CONFIGS="$config" MINIVLLM_MODEL_BENCH_ARGS="$*" \
    tools/gpu_run.sh "$out/$name" --prebuilt "$bin" --shared "$shared" --only models > "$out/$name.log" 2>&1
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
keys = ("throughput_tok_s", "decode_tok_s", "world_size", "load_s")
print(sys.argv[2], {k: round(d[k], 1) if isinstance(d[k], float) else d[k] for k in keys if k in d})' \
    "$out/$name/bench_dummy_$config.json" "$name ($((SECONDS - t0)) s)" 2>/dev/null ||
    { echo "$name: failed ($((SECONDS - t0)) s)"; tail -n 3 "$out/$name.log"; status=1; }
}

case "$part" in
  configs)
    tools/gpu_configs_check.sh "$out/configs" "$bin" "$shared/models/configs" \
      "llama-3.1-8b-instruct qwen3-8b qwen3-32b llama-3.1-70b-instruct qwen3-8b-fp8" 2 "1 2" || status=1
    ;;
  dense32)
    for q in "" "--quantization fp8"; do
      tag=$([ -n "$q" ] && echo fp8 || echo bf16)
      for ws in 1 2; do bench "qwen3-32b_${tag}_tp$ws" qwen3-32b --tensor-parallel-size "$ws" $q; done
    done
    ;;
  dense70)
    for q in "" "--quantization fp8"; do
      tag=$([ -n "$q" ] && echo fp8 || echo bf16)
      bench "llama-70b_${tag}_tp2" llama-3.1-70b-instruct --tensor-parallel-size 2 $q
    done
    ;;
  moe)
    bench qwen3-30b-a3b_tp1 qwen3-30b-a3b --tensor-parallel-size 1
    bench qwen3-30b-a3b_tp2 qwen3-30b-a3b --tensor-parallel-size 2
    bench qwen3-30b-a3b_tp2_ep qwen3-30b-a3b --tensor-parallel-size 2 --enable-expert-parallel
    d="$out/generate"; mkdir -p "$d" && cp "$shared/models/configs/qwen3-30b-a3b.json" "$d/config.json"
    timeout 200 "$bin/minivllm" generate --model "$d" --load-format dummy --tensor-parallel-size 2 \
      --prompt-ids '[[1,2,3,4]]' --max-tokens 8 > "$out/moe_generate_tp2.txt" 2>&1 ||
      { echo "generate at world_size 2: failed"; status=1; }
    tail -n 2 "$out/moe_generate_tp2.txt"
    ;;
  70x4-bf16|70x4-fp8)
    q=$([ "$part" = 70x4-fp8 ] && echo "--quantization fp8" || echo "")
    for ws in 2 4; do bench "llama-70b_${part#70x4-}_tp$ws" llama-3.1-70b-instruct --tensor-parallel-size "$ws" $q; done
    d="$out/generate70"; mkdir -p "$d" && cp "$shared/models/configs/llama-3.1-70b-instruct.json" "$d/config.json"
    timeout 300 "$bin/minivllm" generate --model "$d" --load-format dummy --tensor-parallel-size 4 $q \
      --prompt-ids '[[1,2,3,4]]' --max-tokens 8 > "$out/70b_generate_tp4.txt" 2>&1 ||
      { echo "generate at world_size 4: failed"; status=1; }
    tail -n 2 "$out/70b_generate_tp4.txt"
    ;;
  configs4)
    # MINIVLLM_CONFIGS4 picks the configs (one call holds about three of them). Then graph replay
    # against eager at world_size 4 on each one's checkpoint (teacher_forced_check generate).
    c4="${MINIVLLM_CONFIGS4:-llama-3.1-70b-instruct qwen3-32b qwen3-8b-fp8 llama-3.1-8b-instruct qwen3-8b}"
    tools/gpu_configs_check.sh "$out/configs4" "$bin" "$shared/models/configs" "$c4" 2 "1 4" || status=1
    for c in $c4; do
      d="${MINIVLLM_GPU_WORK:-/tmp/minivllm-gpu}/configs/$c-l2"
      timeout 200 "$bin/teacher_forced_check" generate --model "$d/model" --prompts "$d/reference.json" \
        --tensor-parallel-size 4 --out "$out/configs4/generate_${c}_tp4.json" > "$out/configs4/generate_${c}_tp4.log" 2>&1 ||
        status=1
      echo "$c tp4: $(tail -n 1 "$out/configs4/generate_${c}_tp4.log")"
    done
    ;;
  comm4)
    timeout 300 "$bin/test_cuda" --gtest_filter='CudaComm.*' > "$out/comm4.txt" 2>&1 || status=1
    grep -E "PASSED|FAILED|SKIPPED" "$out/comm4.txt" | tail -n 12
    # The worker-fault tests on the GPUs at four ranks (tests/tp/tp_faults_test.cc's device and world knobs).
    MINIVLLM_TP_TEST_DEVICE=cuda MINIVLLM_TP_TEST_WORLD=4 timeout 200 "$bin/test_tp" \
      --gtest_filter='TensorParallel.*:Signals/*' > "$out/faults4.txt" 2>&1 || status=1
    grep -E "PASSED|FAILED" "$out/faults4.txt" | tail -n 12
    ;;
  ar4)
    MINIVLLM_COMM_BENCH_WORLD=4 timeout 120 "$bin/test_cuda" --gtest_filter='CudaCommBench.AllReduce' \
      > "$out/ar4_bench.txt" 2>&1 || status=1
    grep -vE "^\[ *(RUN|==|--)" "$out/ar4_bench.txt" | tail -n 20
    export MINIVLLM_WORKER="$bin/minivllm-worker"  # (as gpu_run.sh does)
    d="$out/model70"; mkdir -p "$d" && cp "$shared/models/configs/llama-3.1-70b-instruct.json" "$d/config.json"
    for q in "" "--quantization fp8"; do
      tools/bench_ab.sh --bin "$bin/minivllm" --model "$d" --rounds 1 \
        --args "--load-format dummy --tensor-parallel-size 4 --decode-tokens 0 $q" \
        base two_shot_8m:MINIVLLM_CUSTOM_AR_TWO_SHOT_BYTES=8388608 || status=1
    done
    ;;
  *) echo "gpu_ws2: unknown part $part (configs, dense32, dense70, moe, 70x4-bf16, 70x4-fp8, configs4, comm4, ar4)" >&2; exit 2 ;;
esac
exit $status
