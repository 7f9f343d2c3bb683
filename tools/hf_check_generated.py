#!/usr/bin/env python3
"""Scores minivllm's greedy continuations with Hugging Face transformers (teacher forcing).

Usage: hf_check_generated.py --model DIR --generated generated.json --out result.json

generated.json comes from `teacher_forced_check generate`: for each run (eager, graphs, preempted,
prefix_cache) the prompts and minivllm's greedy tokens. For every generated token, HF (fp32, from
the same bf16 weights) computes the argmax given the prompt and minivllm's own previous tokens; the
agreement is the fraction of generated tokens equal to that argmax. Near-ties between bf16 and fp32
are the only expected disagreements.
"""
import argparse
import json

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--generated", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32, attn_implementation="eager")
    model.to(device).eval()
    gen = json.load(open(args.generated))
    result = {}
    for run in ("eager", "graphs", "preempted", "prefix_cache"):
        if run not in gen:
            continue
        agree = total = 0
        margins = []
        for prompt, tokens in zip(gen[run]["prompts"], gen[run]["tokens"]):
            ids = torch.tensor([prompt + tokens], device=device)
            with torch.no_grad():
                logits = model(ids).logits[0]
            rows = logits[len(prompt) - 1 : len(prompt) - 1 + len(tokens)]
            pred = rows.argmax(-1).tolist()
            agree += sum(int(a == b) for a, b in zip(pred, tokens))
            total += len(tokens)
            # How far each disagreeing token is below HF's argmax, in fp32 logits: near-ties (small
            # margins) are what bf16 arithmetic is expected to flip.
            for i, (a, b) in enumerate(zip(pred, tokens)):
                if a != b:
                    margins.append(round(float(rows[i, a] - rows[i, b]), 4))
        result[run] = {"agreement": agree / max(total, 1), "tokens": total, "mismatch_margins": sorted(margins)}
        print(f"{run}: {agree}/{total} generated tokens equal HF's argmax ({100.0 * agree / max(total, 1):.2f}%); "
              f"HF margins of the misses: {sorted(margins)}")
    json.dump(result, open(args.out, "w"), indent=2)


if __name__ == "__main__":
    main()
