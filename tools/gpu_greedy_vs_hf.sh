#!/usr/bin/env bash
# One greedy run on the GPU against Hugging Face's fp32 goldens (tools/make_hf_goldens.py's
# goldens.json): prints the sequences equal to HF's and, where one differs, the first differing step
# and HF's top-1 margin there (bf16 on the GPU parts from fp32 at near-ties).
#
#   tools/gpu_greedy_vs_hf.sh BIN LABEL GOLDENS_DIR MODEL [minivllm generate flags...]
#   (BIN: the folder with minivllm, tools/make_gpu_dist.sh; MINIVLLM_GPU_WORK: scratch, /tmp/minivllm-gpu)
set -uo pipefail
B="${1:?BIN}/minivllm" label="${2:?LABEL}" gold="${3:?GOLDENS_DIR}" model="${4:?MODEL}"
shift 4
W="${MINIVLLM_GPU_WORK:-/tmp/minivllm-gpu}"
mkdir -p "$W"
ids=$(python3 -c "import json;print(json.dumps([c['prompt_ids'] for c in json.load(open('$gold/goldens.json'))['cases']]))")
if ! "$B" generate --model "$model" --device cuda --prompt-ids "$ids" --max-tokens 16 --temperature 0 --json \
    --ignore-eos --max-model-len 256 "$@" > "$W/out.json" 2> "$W/err.txt"; then
  echo "$label: FAILED"; tail -3 "$W/err.txt"; exit 1
fi
python3 - "$label" "$gold" "$W/out.json" <<'PY'
import json, sys
label, gold, out = sys.argv[1:4]
cases = json.load(open(gold + "/goldens.json"))["cases"]
outs = json.load(open(out))
full = tok = total = 0
notes = []
for c, o in zip(cases, outs):
    g, t = c["greedy_ids"], o["token_ids"]
    n = next((i for i, (a, b) in enumerate(zip(g, t)) if a != b), len(g))
    full += n == len(g); tok += n; total += len(g)
    if n < len(g): notes.append(f"prompt {len(c['prompt_ids'])}: first diff at {n} (HF margin {c['greedy_margins'][n]:.3g})")
print(f"{label}: {full}/{len(cases)} sequences equal, {tok}/{total} tokens before the first difference; " + "; ".join(notes))
PY
