#!/usr/bin/env python3
"""Last-token embeddings of tests/goldens' tiny checkpoints, from Hugging Face transformers: the
reference of the engine's pooling (SamplingParams::pooling, the server's /v1/embeddings).

Usage (the venv of tools/requirements-goldens.txt):
    python3 tools/make_embedding_goldens.py tests/goldens/qwen3-tiny tests/goldens/llama3-tiny

Writes DIR/embeddings.json: {"transformers_version", "torch_version", "command", "cases":
[{"prompt_ids", "embedding"}]}, the embedding being the final-normed hidden state of the prompt's
last token (transformers' last_hidden_state, which the final norm ends), computed in float32 with
eager attention from the checkpoint's bf16 weights, before any L2 normalisation; 6 significant
digits. Prompts are seeded (lengths 1, 7, 33, 100) and cover a block boundary of 16.
"""
import argparse
import json
import os
import random

import torch
import transformers
from transformers import AutoModelForCausalLM

SEED = 20261201
LENGTHS = (1, 7, 33, 100)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for d in args.dirs:
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        rng = random.Random(SEED)
        cases = []
        for n in LENGTHS:
            ids = [rng.randrange(model.config.vocab_size) for _ in range(n)]
            with torch.no_grad():
                h = model.model(torch.tensor([ids])).last_hidden_state[0, -1]
            cases.append({"prompt_ids": ids, "embedding": [float(f"{x:.6g}") for x in h.tolist()]})
        out = {"transformers_version": transformers.__version__, "torch_version": torch.__version__,
               "command": "python3 tools/make_embedding_goldens.py " + " ".join(args.dirs), "cases": cases}
        with open(os.path.join(d, "embeddings.json"), "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        print(f"{d}: {len(cases)} embeddings of {model.config.hidden_size}")


if __name__ == "__main__":
    main()
