#!/usr/bin/env python3
"""How close can a bf16 engine get? Runs transformers itself in bf16 on the sequences of a
reference.json (tools/hf_teacher_forced.py) and reports its next-token agreement with the fp32
reference: the yardstick for minivllm's own agreement on the same model.

Usage: hf_bf16_baseline.py --model OUT/model --reference OUT/reference.json
"""
import argparse
import json

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--reference", required=True)
    args = ap.parse_args()
    ref = json.load(open(args.reference))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16).to(device).eval()
    agree = total = clear_agree = clear_total = 0
    for seq, argmax, margin in zip(ref["sequences"], ref["argmax"], ref["margin"]):
        with torch.no_grad():
            pred = model(torch.tensor([seq], device=device)).logits[0].float().argmax(-1).tolist()
        for p, a, m in zip(pred, argmax, margin):
            agree += p == a
            total += 1
            if m > 0.1:
                clear_agree += p == a
                clear_total += 1
    print(json.dumps({"hf_bf16_agreement": agree / total, "positions": total,
                      "hf_bf16_agreement_margin_over_0.1": clear_agree / max(clear_total, 1)}))


if __name__ == "__main__":
    main()
