#!/usr/bin/env bash
# Published configs at real widths and reduced depth against Hugging Face transformers on the GPU:
# a random bf16 checkpoint of each config (tools/hf_teacher_forced.py, --override-layers), HF's
# fp32 teacher-forced reference, then the engine's agreement with it (teacher_forced_check score)
# at each world size. One JSON per config and world size, and a summary line each.
#
#   tools/gpu_configs_check.sh OUTDIR BIN CONFIG_DIR "CONFIG..." [LAYERS] [WORLD_SIZES]
#
# BIN: the folder with teacher_forced_check (tools/make_gpu_dist.sh); CONFIG_DIR holds
# <config>.json; LAYERS default 2; WORLD_SIZES default "1". Needs python3 with torch and
# transformers. Work files in ${MINIVLLM_GPU_WORK:-/tmp/minivllm-gpu}/configs; MINIVLLM_REF_ARGS adds
# flags to hf_teacher_forced.py (e.g. --embed-gain 0.25 for Gemma's scaled embedding).
set -uo pipefail
out="${1:?OUTDIR}"; bin="${2:?BIN}"; cfgdir="${3:?CONFIG_DIR}"; configs="${4:?CONFIGS}"
layers="${5:-2}"; sizes="${6:-1}"
work="${MINIVLLM_GPU_WORK:-/tmp/minivllm-gpu}/configs"
mkdir -p "$out" "$work"
status=0
for c in $configs; do
  d="$work/$c-l$layers"
  if [ ! -f "$d/reference.json" ]; then
    python3 tools/hf_teacher_forced.py --config "$cfgdir/$c.json" --out "$d" --override-layers "$layers" \
      --num-seqs 4 --seq-len 256 --seed 0 ${MINIVLLM_REF_ARGS:-} > "$out/ref_$c.log" 2>&1 ||
      { echo "$c: reference failed"; status=1; continue; }
  fi
  for ws in $sizes; do
    "$bin/teacher_forced_check" score --model "$d/model" --reference "$d/reference.json" \
      --out "$out/score_${c}_tp$ws.json" --tensor-parallel-size "$ws" > "$out/score_${c}_tp$ws.log" 2>&1 || status=1
    python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print("%s tp%s: teacher-forced agreement %.2f%%" % (sys.argv[2], sys.argv[3], 100 * s["agreement"]))' \
      "$out/score_${c}_tp$ws.json" "$c" "$ws" || { echo "$c tp$ws: no score"; tail -n 3 "$out/score_${c}_tp$ws.log"; status=1; }
  done
done
exit $status
