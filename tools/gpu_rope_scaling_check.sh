#!/usr/bin/env bash
# yarn rope scaling on the GPU against Hugging Face transformers: greedy continuations of the
# head_dim-64 tiny Qwen3 with and without Qwen's yarn recipe (tools/make_hf_goldens.py's GPU models,
# made here: needs python3 with torch and transformers), from its config, and from the plain model
# with the scaling given as --hf-overrides; then the yarn model with the scaling taken off again,
# which must disagree. Prints, per run, the sequences equal to HF's fp32 greedy ones and, where one
# differs, the first differing step and HF's top-1 margin there (bf16 on the GPU parts from fp32 at
# near-ties; the model without scaling is the baseline for how often).
#
#   tools/gpu_rope_scaling_check.sh BIN     (BIN: the folder with minivllm, tools/make_gpu_dist.sh)
set -uo pipefail
B="${1:?BIN}/minivllm"
G="${MINIVLLM_GPU_WORK:-/tmp/minivllm-gpu}/rope-scaling"
mkdir -p "$G"
python3 tools/make_hf_goldens.py "$G" --models qwen3-tiny-hd64 qwen3-tiny-hd64-yarn > "$G/make_goldens.log" 2>&1 || { tail -5 "$G/make_goldens.log"; exit 1; }
check() { tools/gpu_greedy_vs_hf.sh "${B%/minivllm}" "$@"; }  # label goldens-folder model [flags...]
Y='{"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 128}}'
OFF='{"rope_parameters": {"rope_type": "default", "factor": null, "original_max_position_embeddings": null}}'
check "qwen3-tiny-hd64 (no scaling: the baseline)" "$G/qwen3-tiny-hd64" "$G/qwen3-tiny-hd64"
check "qwen3-tiny-hd64-yarn" "$G/qwen3-tiny-hd64-yarn" "$G/qwen3-tiny-hd64-yarn"
check "qwen3-tiny-hd64 + --hf-overrides yarn" "$G/qwen3-tiny-hd64-yarn" "$G/qwen3-tiny-hd64" --hf-overrides "$Y"
check "qwen3-tiny-hd64-yarn, the scaling taken off (must differ)" "$G/qwen3-tiny-hd64-yarn" "$G/qwen3-tiny-hd64-yarn" \
  --hf-overrides "$OFF"
