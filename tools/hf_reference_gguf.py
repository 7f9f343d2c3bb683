#!/usr/bin/env python3
"""Transformers' teacher-forced reference for a real, trained GGUF checkpoint on natural text.

hf_teacher_forced.py scores random-weight checkpoints of the target architectures on random tokens;
their logits have small top-2 margins, so any noise (a bf16 or fp8 KV cache) flips many argmaxes.
This script gives the same reference files for a trained model on English text, where margins are
those a user meets: transformers loads the GGUF (dequantised to fp32: the same weights minivllm's
CPU backend computes with), tokenises --text, cuts it into --num-seqs sequences of --seq-len
tokens, and writes OUT/reference.json and OUT/last_logits.f32 in hf_teacher_forced.py's format, so
that `teacher_forced_check score --model FILE.gguf --reference OUT/reference.json` scores it.

Usage (needs torch, transformers, gguf and accelerate; CPU is enough for SmolLM2-135M):
    python3 tools/hf_reference_gguf.py --gguf models/SmolLM2-135M-Instruct.Q4_1.gguf --out /tmp/ref-smol
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_teacher_forced import run_reference  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gguf", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--text", default=os.path.join(ROOT, "docs", "DESIGN.md"), help="English text to score")
    p.add_argument("--num-seqs", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    args = p.parse_args()
    torch.set_float32_matmul_precision("highest")
    t0 = time.time()
    folder, name = os.path.split(os.path.abspath(args.gguf))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    ids = tok(open(args.text, encoding="utf-8").read(), add_special_tokens=False).input_ids
    need = args.num_seqs * args.seq_len
    if len(ids) < need:
        sys.exit(f"{args.text}: {len(ids)} tokens, {need} needed")
    seqs = [ids[i * args.seq_len:(i + 1) * args.seq_len] for i in range(args.num_seqs)]
    argmax, margin, _, last_logits, last_top = run_reference(model, seqs, "cpu", 1)
    os.makedirs(args.out, exist_ok=True)
    last_logits.astype("<f4").tofile(os.path.join(args.out, "last_logits.f32"))
    doc = {
        "checkpoint": os.path.abspath(args.gguf),
        "text": os.path.abspath(args.text),
        "vocab_size": model.config.vocab_size,
        "num_seqs": args.num_seqs,
        "seq_len": args.seq_len,
        "reference": "transformers AutoModelForCausalLM from the GGUF (dequantised to float32), eager attention, "
                     "CPU; teacher-forced, no KV cache",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "sequences": seqs,
        "argmax": argmax,
        "margin": margin,
        "last_top": last_top,
        "seconds": round(time.time() - t0, 1),
    }
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    flat = [m for row in margin for m in row]
    print(f"{name}: {args.num_seqs}x{args.seq_len} tokens of {os.path.basename(args.text)}, median margin "
          f"{np.median(flat):.3g}, margins < 0.1: {sum(m < 0.1 for m in flat)}; {doc['seconds']} s")


if __name__ == "__main__":
    main()
