#!/usr/bin/env bash
# Granite, SmolLM3, GLM-4, OLMo 2 / 3, EXAONE 4, GraniteMoE, OLMoE, Qwen2-MoE, GLM-4.5 and ERNIE 4.5 MoE on the
# GPU against Hugging Face transformers: greedy continuations of their head_dim-64 tiny checkpoints
# (tools/make_hf_goldens.py's GPU models, made here: needs python3 with torch and transformers), with
# qwen3-tiny-hd64 as the bf16 baseline for how often bf16 parts from fp32 at near-ties; then each with
# its feature taken off through --hf-overrides, which must disagree.
#
#   tools/gpu_family_check.sh BIN     (BIN: the folder with minivllm, tools/make_gpu_dist.sh)
set -uo pipefail
BIN="${1:?BIN}"
G="${MINIVLLM_GPU_WORK:-/tmp/minivllm-gpu}/families"
mkdir -p "$G"
python3 tools/make_hf_goldens.py "$G" --models qwen3-tiny-hd64 granite-tiny-hd64 smollm3-tiny-hd64 smollm3-tiny-hd64-all-rope glm4-tiny-hd64 olmo2-tiny-hd64 olmo3-tiny-hd64 exaone4-tiny-hd64 granitemoe-tiny-hd64 olmoe-tiny-hd64 \
  qwen2moe-tiny-hd64 glm4moe-tiny-hd64 ernie45moe-tiny-hd64 \
  > "$G/make_goldens.log" 2>&1 || { tail -5 "$G/make_goldens.log"; exit 1; }
check() { tools/gpu_greedy_vs_hf.sh "$BIN" "$@"; }  # label goldens-folder model [flags...]
check "qwen3-tiny-hd64 (the baseline)" "$G/qwen3-tiny-hd64" "$G/qwen3-tiny-hd64"
check "granite-tiny-hd64" "$G/granite-tiny-hd64" "$G/granite-tiny-hd64"
check "granite-tiny-hd64, residual_multiplier 1 (must differ)" "$G/granite-tiny-hd64" "$G/granite-tiny-hd64" \
  --hf-overrides '{"residual_multiplier": 1.0}'
check "smollm3-tiny-hd64" "$G/smollm3-tiny-hd64" "$G/smollm3-tiny-hd64"
check "smollm3-tiny-hd64-all-rope (its weights, every layer rotating: the depth's bf16 baseline)" \
  "$G/smollm3-tiny-hd64-all-rope" "$G/smollm3-tiny-hd64-all-rope"
check "smollm3-tiny-hd64, every layer rotating (must differ)" "$G/smollm3-tiny-hd64" "$G/smollm3-tiny-hd64" \
  --hf-overrides '{"no_rope_layers": [1, 1, 1, 1]}'
check "glm4-tiny-hd64" "$G/glm4-tiny-hd64" "$G/glm4-tiny-hd64"
check "glm4-tiny-hd64, the whole head rotating (must differ)" "$G/glm4-tiny-hd64" "$G/glm4-tiny-hd64" \
  --hf-overrides '{"partial_rotary_factor": 1.0, "rope_parameters": {"partial_rotary_factor": 1.0}}'
check "olmo2-tiny-hd64" "$G/olmo2-tiny-hd64" "$G/olmo2-tiny-hd64"
check "olmo3-tiny-hd64" "$G/olmo3-tiny-hd64" "$G/olmo3-tiny-hd64"
check "olmo3-tiny-hd64, no sliding window (must differ)" "$G/olmo3-tiny-hd64" "$G/olmo3-tiny-hd64" \
  --hf-overrides '{"sliding_window": 4096}'
check "exaone4-tiny-hd64" "$G/exaone4-tiny-hd64" "$G/exaone4-tiny-hd64"
check "exaone4-tiny-hd64, no sliding window (must differ: every layer full, rotating)" "$G/exaone4-tiny-hd64" \
  "$G/exaone4-tiny-hd64" --hf-overrides '{"sliding_window": null}'
check "granitemoe-tiny-hd64" "$G/granitemoe-tiny-hd64" "$G/granitemoe-tiny-hd64"
check "granitemoe-tiny-hd64, top-1 routing (must differ)" "$G/granitemoe-tiny-hd64" "$G/granitemoe-tiny-hd64" \
  --hf-overrides '{"num_experts_per_tok": 1}'
check "olmoe-tiny-hd64" "$G/olmoe-tiny-hd64" "$G/olmoe-tiny-hd64"
check "olmoe-tiny-hd64, the top-k renormalised (must differ)" "$G/olmoe-tiny-hd64" "$G/olmoe-tiny-hd64" \
  --hf-overrides '{"norm_topk_prob": true}'
check "qwen2moe-tiny-hd64" "$G/qwen2moe-tiny-hd64" "$G/qwen2moe-tiny-hd64"
check "qwen2moe-tiny-hd64, no shared expert (must differ)" "$G/qwen2moe-tiny-hd64" "$G/qwen2moe-tiny-hd64" \
  --hf-overrides '{"shared_expert_intermediate_size": 0}'
check "glm4moe-tiny-hd64" "$G/glm4moe-tiny-hd64" "$G/glm4moe-tiny-hd64"
check "glm4moe-tiny-hd64, routed_scaling_factor 1 (must differ)" "$G/glm4moe-tiny-hd64" "$G/glm4moe-tiny-hd64" \
  --hf-overrides '{"routed_scaling_factor": 1.0}'
check "ernie45moe-tiny-hd64" "$G/ernie45moe-tiny-hd64" "$G/ernie45moe-tiny-hd64"
check "ernie45moe-tiny-hd64, no shared expert (must differ)" "$G/ernie45moe-tiny-hd64" "$G/ernie45moe-tiny-hd64" \
  --hf-overrides '{"moe_num_shared_experts": 0}'
