#!/usr/bin/env python3
"""Inter-token latency of running streams while a long prompt arrives, with and without chunked
prefill, against `minivllm serve` (started here, once per configuration).

K streams decode (greedy, eos ignored); --arrive-after seconds later one request with a --long-prompt-token prompt arrives. Without chunking its whole prefill is one step and
every stream waits for it; with chunking (--max-num-batched-tokens B) each step gives the streams
their token and the prompt at most B minus K tokens. Reported per configuration: the streams'
inter-token gaps while the long prompt is being prefilled (from its arrival to its first token:
max, p50, p99), their gaps outside that window (p50), and the long prompt's time to first token.

  python3 tools/bench_chunked_prefill.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --long-prompt 1024 --chunk 128 --streams 4 -- --device cpu --max-num-seqs 8
"""
import argparse
import asyncio
import json
import random
import sys
import time

import serve_client as sc


async def scenario(host, port, args):
    rng = random.Random(args.seed)
    streams = [[rng.randrange(100, args.max_token_id) for _ in range(args.stream_prompt_len)] for _ in range(args.streams)]
    long_prompt = [rng.randrange(100, args.max_token_id) for _ in range(args.long_prompt)]

    def body(prompt, max_tokens):
        # logprobs 0 (the chosen token's only): every token is a chunk even when it has no text, as
        # with a model served without a tokenizer (random weights), so each gap is seen.
        return {"model": args.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                "ignore_eos": True, "stream": True, "logprobs": 0}

    tasks = [asyncio.create_task(sc.post(host, port, "/v1/completions", body(p, args.stream_tokens), stream=True))
             for p in streams]
    # sc.post returns only when a request ends: give the streams --arrive-after seconds to be
    # decoding (the figures below check they were: gaps before the arrival count as "otherwise").
    t0 = time.perf_counter()
    await asyncio.sleep(args.arrive_after)
    sent = time.perf_counter()
    long_result = await sc.post(host, port, "/v1/completions", body(long_prompt, 1), stream=True)
    results = await asyncio.gather(*tasks)
    return results, long_result, sent - t0, sent


def figures(results, long_result, sent):
    first = long_result.chunk_times[0] if long_result.chunk_times else long_result.end
    inside, outside = [], []
    for r in results:
        for a, b in zip(r.chunk_times, r.chunk_times[1:]):
            # A gap overlapping the prefill window counts as inside: that is the stall a client sees.
            (inside if b > sent and a < first else outside).append(b - a)
    return {
        "ok": all(r.ok for r in results) and long_result.ok,
        "long_prompt_ttft_s": first - sent,
        "itl_during_prefill_max_ms": 1e3 * max(inside) if inside else float("nan"),
        "itl_during_prefill_p50_ms": 1e3 * sc.percentile(inside, 50),
        "itl_during_prefill_p99_ms": 1e3 * sc.percentile(inside, 99),
        "itl_outside_p50_ms": 1e3 * sc.percentile(outside, 50),
        "gaps_during_prefill": len(inside),
    }


def run_config(args, name, extra):
    proc, base = sc.start_server(args.binary, args.model,
                                 args.engine_args + ["--max-model-len", str(args.long_prompt + 64)] + extra)
    try:
        host, port = sc.split_base(base)
        asyncio.run(sc.post(host, port, "/v1/completions", {"model": args.model, "prompt": [1, 2, 3], "max_tokens": 2}))
        results, long_result, waited, sent = asyncio.run(scenario(host, port, args))
    finally:
        proc.terminate()
        proc.wait()
    fig = figures(results, long_result, sent)
    fig["config"] = name
    fig["engine_flags"] = " ".join(extra)
    return fig


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--binary", default="build/cpu/minivllm")
    ap.add_argument("--streams", type=int, default=8, help="running streams (default 8)")
    ap.add_argument("--stream-prompt-len", type=int, default=32)
    ap.add_argument("--stream-tokens", type=int, default=256, help="tokens each stream generates")
    ap.add_argument("--long-prompt", type=int, default=4096, help="tokens of the arriving prompt (default 4096)")
    ap.add_argument("--chunk", type=int, default=512, help="max_num_batched_tokens with chunking (default 512)")
    ap.add_argument("--arrive-after", type=float, default=2.0, help="seconds after the streams start (default 2)")
    ap.add_argument("--max-token-id", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("engine_args", nargs="*", help="after --: engine flags for both servers")
    args = ap.parse_args()

    figs = [run_config(args, "whole prompts", ["--no-enable-chunked-prefill"]),
            run_config(args, f"chunked, budget {args.chunk}", ["--max-num-batched-tokens", str(args.chunk)])]
    print(f"{args.streams} streams; a {args.long_prompt}-token prompt arrives after {args.arrive_after} s")
    print(f"{'config':<26} {'ITL during prefill: max':>24} {'p50':>8} {'p99':>8} {'ITL otherwise p50':>18} "
          f"{'long TTFT':>10}")
    for f in figs:
        print(f"{f['config']:<26} {f['itl_during_prefill_max_ms']:>21.1f} ms {f['itl_during_prefill_p50_ms']:>5.1f} ms "
              f"{f['itl_during_prefill_p99_ms']:>5.1f} ms {f['itl_outside_p50_ms']:>15.1f} ms "
              f"{f['long_prompt_ttft_s']:>8.2f} s" + ("" if f["ok"] else "  (FAILED requests)"))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "figures": figs}, fh, indent=1)
    return 0 if all(f["ok"] for f in figs) else 1


if __name__ == "__main__":
    sys.exit(main())
