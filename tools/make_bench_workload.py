#!/usr/bin/env python3
"""Writes nano-vllm's bench.py workload as JSON, with the Python standard library only.

Usage:
    python3 tools/make_bench_workload.py OUT.json

bench.py draws, after random.seed(0), first every prompt and then every output length:
    prompt_token_ids = [[randint(0, 10000) for _ in range(randint(100, 1024))] for _ in range(256)]
    max_tokens       = [randint(100, 1024) for _ in range(256)]
and generates with SamplingParams(temperature=0.6, ignore_eos=True, max_tokens=...) on an engine
with max_model_len=4096. The totals are checked (142,827 prompt tokens, 133,966 output tokens) so
that a changed random module cannot silently change the benchmark.

Output: {"prompt_token_ids": [[...], ...], "max_tokens": [...], "ignore_eos": true,
         "temperature": 0.6, "max_model_len": 4096}
"""
import json
import random
import sys

NUM_SEQS = 256
MAX_INPUT_LEN = 1024
MAX_OUTPUT_LEN = 1024
EXPECTED_PROMPT_TOKENS = 142827
EXPECTED_OUTPUT_TOKENS = 133966


def make_workload():
    random.seed(0)
    prompts = [[random.randint(0, 10000) for _ in range(random.randint(100, MAX_INPUT_LEN))]
               for _ in range(NUM_SEQS)]
    max_tokens = [random.randint(100, MAX_OUTPUT_LEN) for _ in range(NUM_SEQS)]
    return {"prompt_token_ids": prompts, "max_tokens": max_tokens, "ignore_eos": True,
            "temperature": 0.6, "max_model_len": 4096}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    workload = make_workload()
    prompt_tokens = sum(len(p) for p in workload["prompt_token_ids"])
    output_tokens = sum(workload["max_tokens"])
    print(f"{NUM_SEQS} sequences, {prompt_tokens} prompt tokens, {output_tokens} output tokens")
    if (prompt_tokens, output_tokens) != (EXPECTED_PROMPT_TOKENS, EXPECTED_OUTPUT_TOKENS):
        sys.exit(f"totals differ from bench.py's: expected {EXPECTED_PROMPT_TOKENS} prompt and "
                 f"{EXPECTED_OUTPUT_TOKENS} output tokens")
    with open(sys.argv[1], "w") as f:
        json.dump(workload, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
