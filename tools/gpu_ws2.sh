#!/usr/bin/env bash
# The figures that need two GPUs (nvidia-h200-x2), one part a device call (each well under its 10 minutes):
#
#   tools/gpu_ws2.sh OUTDIR BIN PART
#
# BIN: tools/make_gpu_dist.sh's folder, with minivllm, minivllm-worker (tensor parallelism's worker
# processes), teacher_forced_check and lib/. NCCL is not carried: the machine's torch ships one.
# PART:
#   configs  issue 45: the five published configs of ../shared/models/configs at 2 layers, real widths,
#            teacher-forced against HF transformers at world_size 1 and 2 (tools/gpu_configs_check.sh).
#   dense32  issue 45: Qwen3-32B, dummy weights, bf16 and FP8, world_size 1 and 2: the seeds' workload
#            and batch-1 decode (the must: world_size 2 runs the workload 1.7x world_size 1).
#   dense70  issue 45: Llama-3.1-70B at world_size 2, bf16 (70 GB a GPU) and FP8.
#   moe      issue 48: Qwen3-30B-A3B, world_size 1, 2 and 2 with --enable-expert-parallel: the
#            workload (must 1.6x) and batch-1 decode, and greedy generation at world_size 2.
# Each run writes OUTDIR/<part>_<name>.json (minivllm bench --json) and prints a summary line.
# SHARED (default ../shared) holds models/configs.
set -uo pipefail
out="${1:?OUTDIR}"; bin="$(cd "${2:?BIN}" && pwd)"; part="${3:?PART}"
shared="${SHARED:-$(cd "$(dirname "$0")/.." && pwd)/../shared}"
cd "$(dirname "$0")/.."
mkdir -p "$out"
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="$bin/lib:/usr/local/cuda/lib64${nccl_dir:+:$nccl_dir}:${LD_LIBRARY_PATH:-}"
work="${MINIVLLM_GPU_WORK:-/tmp/minivllm-gpu}/ws2"
status=0

# bench NAME CONFIG ARGS...: one `minivllm bench` of CONFIG's dummy weights, its JSON kept.
bench() {
  local name="$1" config="$2"; shift 2
  local d="$work/$config"
  mkdir -p "$d" && cp "$shared/models/configs/$config.json" "$d/config.json"
  local t0=$SECONDS
  if timeout 280 "$bin/minivllm" bench --model "$d" --load-format dummy --json "$@" 2> "$out/${part}_$name.err" |
      tail -n 1 > "$out/${part}_$name.json" && [ -s "$out/${part}_$name.json" ]; then
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
keys = ("throughput_tok_s", "decode_tok_s", "world_size", "load_s")
print(sys.argv[2], {k: round(d[k], 1) if isinstance(d[k], float) else d[k] for k in keys if k in d})' \
      "$out/${part}_$name.json" "$name ($((SECONDS - t0)) s)"
  else
    echo "$name: failed ($((SECONDS - t0)) s)"; tail -n 3 "$out/${part}_$name.err"; status=1
  fi
}

case "$part" in
  configs)
    tools/gpu_configs_check.sh "$out/configs" "$bin" "$shared/models/configs" \
      "llama-3.1-8b-instruct qwen3-8b qwen3-32b llama-3.1-70b-instruct qwen3-8b-fp8" 2 "1 2" || status=1
    ;;
  dense32)
    for q in "" "--quantization fp8"; do
      tag=$([ -n "$q" ] && echo fp8 || echo bf16)
      for ws in 1 2; do
        bench "qwen3-32b_${tag}_tp${ws}" qwen3-32b --tensor-parallel-size "$ws" $q
        bench "qwen3-32b_${tag}_tp${ws}_b1" qwen3-32b --tensor-parallel-size "$ws" --num-seqs 0 --decode-tokens 128 $q
      done
    done
    ;;
  dense70)
    for q in "" "--quantization fp8"; do
      tag=$([ -n "$q" ] && echo fp8 || echo bf16)
      bench "llama-70b_${tag}_tp2" llama-3.1-70b-instruct --tensor-parallel-size 2 $q
      bench "llama-70b_${tag}_tp2_b1" llama-3.1-70b-instruct --tensor-parallel-size 2 --num-seqs 0 --decode-tokens 128 $q
    done
    ;;
  moe)
    for v in "tp1:--tensor-parallel-size 1" "tp2:--tensor-parallel-size 2" \
             "tp2_ep:--tensor-parallel-size 2 --enable-expert-parallel"; do
      name="${v%%:*}"; args="${v#*:}"
      bench "qwen3-30b-a3b_$name" qwen3-30b-a3b $args
      bench "qwen3-30b-a3b_${name}_b1" qwen3-30b-a3b $args --num-seqs 0 --decode-tokens 256
    done
    timeout 200 "$bin/minivllm" generate --model "$work/qwen3-30b-a3b" --load-format dummy --tensor-parallel-size 2 \
      --prompt-ids '[[1,2,3,4]]' --max-tokens 8 > "$out/moe_generate_tp2.txt" 2>&1 ||
      { echo "generate at world_size 2: failed"; status=1; }
    tail -n 2 "$out/moe_generate_tp2.txt"
    ;;
  *) echo "gpu_ws2: unknown part $part (configs, dense32, dense70, moe)" >&2; exit 2 ;;
esac
exit $status
