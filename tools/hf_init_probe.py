#!/usr/bin/env python3
"""How well-conditioned is a random init for the teacher-forced check? For each --out-gain of
hf_teacher_forced.py's scaled init, builds the model from a real config, rounds its weights to
bf16 (as the checkpoint stores them) and reports, over random token sequences:
  - hf_bf16_agreement: transformers in bf16 vs transformers in fp32 (the best a bf16 engine can
    expect: below it, the network amplifies bf16 rounding into coin flips);
  - broken_rope_agreement: fp32 with every position id 0 vs fp32 (a bug the check must catch:
    it must stay far below 99%);
  - argmax_is_input: how often the next-token argmax is just the current token (a network too
    close to the identity would make the check trivial);
  - margin_over_0.1, distinct_argmax, logit_std.

Usage (GPU machine): hf_init_probe.py --config shared/models/qwen3-0.6b --gains 1 0.5 0.25
"""
import argparse
import json
import os
import random
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_teacher_forced import init_scaled  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="folder holding config.json")
    ap.add_argument("--gains", type=float, nargs="+", default=[1.0])
    ap.add_argument("--num-seqs", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    config = AutoConfig.from_pretrained(args.config)
    rng = random.Random(args.seed + 1)
    ids = torch.tensor([[rng.randrange(config.vocab_size) for _ in range(args.seq_len)]
                        for _ in range(args.num_seqs)], device=device)
    for gain in args.gains:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
        init_scaled(model, config, args.seed, 1.0, gain)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).float())
        model.to(device).eval()
        with torch.no_grad():
            ref, bf16, broken = [], [], []
            for i in range(0, args.num_seqs, 4):
                x = ids[i:i + 4]
                ref.append(model(x, use_cache=False).logits.float())
                zeros = torch.zeros_like(x)
                broken.append(model(x, position_ids=zeros, use_cache=False).logits.float().argmax(-1))
            model.to(torch.bfloat16)
            for i in range(0, args.num_seqs, 4):
                bf16.append(model(ids[i:i + 4], use_cache=False).logits.float().argmax(-1))
        ref = torch.cat(ref)
        top2 = torch.topk(ref, 2, dim=-1).values
        a = ref.argmax(-1)
        print(json.dumps({
            "config": os.path.basename(os.path.abspath(args.config)), "out_gain": gain,
            "hf_bf16_agreement": round((torch.cat(bf16) == a).float().mean().item(), 4),
            "broken_rope_agreement": round((torch.cat(broken) == a).float().mean().item(), 4),
            "argmax_is_input": round((a == ids).float().mean().item(), 4),
            "margin_over_0.1": round(((top2[..., 0] - top2[..., 1]) > 0.1).float().mean().item(), 4),
            "distinct_argmax": len(set(a.flatten().tolist())),
            "logit_std": round(ref.std().item(), 3),
        }), flush=True)
        del model


if __name__ == "__main__":
    main()
