#!/usr/bin/env python3
"""Soak test for `minivllm serve`: many requests of mixed lengths, streamed or not, some cancelled
mid-stream, some invalid, some with n > 1 or stop strings, at a fixed concurrency. Pass means: the
server never crashed; every valid request completed (n choices for n > 1, no stop string in any
text), every invalid one got its 4xx; /metrics ends with no request running and every KV block
free; and the server's resident memory (VmRSS from /proc/<pid>/status), sampled --rss-samples
times over the run (at least every tenth of what follows the warm-up, itself a check), grew by at
most --rss-tolerance after warm-up (--warmup-fraction of the run).

  tools/soak_serve.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf            # 10,000 requests
  tools/soak_serve.py --model M --num-requests 500 --concurrency 16 -- --max-num-seqs 32

Prints one line per sample and a JSON summary; exits 1 when any check fails, 77 (ctest's skip) when
the --model file is missing. CI runs a short soak
(tests/CMakeLists.txt, server_soak).
"""
import argparse
import asyncio
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_client as sc  # noqa: E402

WORDS = ("the a cat dog story river mountain light dark quick slow old new house tree bird sings "
         "runs walks under over and or but because when where why how").split()


def rss_kib(pid):
    """The process's resident memory; 0 once it is gone (a crash is the "no crash" check's)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


STOP = "e"  # a stop string most English completions reach within a few tokens


def make_request(i, rng, args):
    """(kind, path, body or raw bytes, expected status, cancel_after). Kinds: valid, cancel,
    invalid, n (n > 1 choices), stop (stop strings)."""
    r = rng.random()
    if r < args.invalid_fraction:
        choice = rng.randrange(5)
        if choice == 0:
            return "invalid", "/v1/completions", {"model": args.name, "prompt": "x", "temperature": -1}, 400, None
        if choice == 1:
            return "invalid", "/v1/completions", b'{"prompt": [1, 2', 400, None
        if choice == 2:
            return "invalid", "/v1/completions", {"model": "no-such-model", "prompt": "x"}, 404, None
        if choice == 3:
            return "invalid", "/v1/completions", {"model": args.name, "prompt": [7] * (args.max_model_len + 5)}, 400, None
        return "invalid", "/v1/chat/completions", {"model": args.name, "messages": []}, 400, None
    n_words = rng.choice(args.prompt_words)
    prompt = " ".join(rng.choice(WORDS) for _ in range(n_words))
    max_tokens = rng.choice(args.max_tokens)
    chat = rng.random() < args.chat_fraction
    stream = rng.random() < 0.7
    cancel = None
    if rng.random() < args.cancel_fraction / (1 - args.invalid_fraction):
        stream, max_tokens, cancel = True, 4 * max(args.max_tokens), rng.randint(1, 3)
    body = {"model": args.name, "max_tokens": max_tokens, "temperature": rng.choice([0, 0.8]), "stream": stream}
    kind = "cancel" if cancel else "valid"
    if not cancel and rng.random() < args.n_fraction:
        kind, body["n"], body["temperature"] = "n", rng.choice([2, 3]), 0.8
    elif not cancel and rng.random() < args.stop_fraction:
        kind, body["stop"] = "stop", [STOP, "\n\n"]
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = prompt
        path = "/v1/completions"
    return kind, path, body, 200, cancel


def answered_as_expected(kind, body, expect, res):
    """Whether the server's answer is right for the request's kind."""
    if kind == "invalid":
        return res.status == expect
    if kind == "cancel":
        return res.status == 200 and (res.cancelled or res.ok)
    if res.status != 200 or not res.ok or res.error:
        return False
    n = body.get("n", 1)
    if sorted(res.finish_reasons) != list(range(n)) or None in res.finish_reasons.values():
        return False
    if kind == "stop":
        return not any(STOP in t for t in res.texts.values())
    return True


async def soak(args, host, port, pid):
    rng = random.Random(args.seed)
    sem = asyncio.Semaphore(args.concurrency)
    counts = {"valid": 0, "cancel": 0, "invalid": 0, "n": 0, "stop": 0, "failed": 0}
    failures = []
    rss = []
    done = 0
    rss_every = args.rss_every or max(1, args.num_requests // args.rss_samples)

    async def one(i):
        nonlocal done
        kind, path, body, expect, cancel = make_request(i, rng, args)
        async with sem:
            raw = body if isinstance(body, bytes) else None
            res = await sc.post(host, port, path, None if raw else body, raw=raw, api_key=args.api_key,
                                stream=isinstance(body, dict) and body.get("stream", False), cancel_after=cancel)
        counts[kind] += 1
        if not answered_as_expected(kind, body if isinstance(body, dict) else {}, expect, res):
            counts["failed"] += 1
            if len(failures) < 10:
                failures.append({"kind": kind, "status": res.status, "error": res.error[:200],
                                 "finish_reasons": res.finish_reasons, "texts": {k: v[:80] for k, v in res.texts.items()}})
        done += 1
        if done % rss_every == 0:
            rss.append((done, rss_kib(pid)))
            print(f"{done:>6} requests  rss {rss[-1][1] / 1024:.1f} MiB  failed {counts['failed']}", flush=True)

    await asyncio.gather(*(one(i) for i in range(args.num_requests)))
    return counts, failures, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="start `minivllm serve` with this model")
    ap.add_argument("--base-url", help="a running server instead (with --pid)")
    ap.add_argument("--pid", type=int, help="the running server's pid (for its memory)")
    ap.add_argument("--served-model-name")
    ap.add_argument("--binary", default="build/cpu/minivllm")
    ap.add_argument("--api-key")
    ap.add_argument("--num-requests", type=int, default=10000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--cancel-fraction", type=float, default=0.10)
    ap.add_argument("--invalid-fraction", type=float, default=0.05)
    ap.add_argument("--chat-fraction", type=float, default=0.3,
                    help="share of valid requests sent as chat (0 for a model without a chat template)")
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--n-fraction", type=float, default=0.10, help="share of requests with n = 2 or 3")
    ap.add_argument("--stop-fraction", type=float, default=0.10, help="share of requests with stop strings")
    ap.add_argument("--rss-samples", type=int, default=20,
                    help="memory samples over the run (with a warm-up fifth, >= 13: at least every tenth of the rest)")
    ap.add_argument("--warmup-fraction", type=float, default=0.2,
                    help="share of the run before the RSS baseline (the sample that ends it)")
    ap.add_argument("--rss-every", type=int, help="sample memory every N requests instead (older runs' flag)")
    ap.add_argument("--rss-tolerance", type=float, default=0.10,
                    help="allowed growth of the peak after warm-up over the sample that ends it")
    ap.add_argument("--max-tokens", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32, 96],
                    help="max_tokens drawn from this list (comma-separated)")
    ap.add_argument("--prompt-words", type=lambda s: [int(x) for x in s.split(",")], default=[3, 10, 40, 150],
                    help="prompt lengths in words drawn from this list")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the summary to this file")
    ap.add_argument("engine_args", nargs="*", help="after --: engine flags for the server")
    args = ap.parse_args()
    args.name = args.served_model_name or args.model
    if args.model and not args.base_url and not os.path.exists(args.model):
        print(f"SKIP: {args.model} not found (tools/fetch_default_model.sh)")
        return 77  # ctest's skip
    proc = None
    if args.model and not args.base_url:
        proc, base = sc.start_server(args.binary, args.model, ["--max-model-len", str(args.max_model_len)]
                                     + args.engine_args)
        pid = proc.pid
    else:
        base, pid = args.base_url, args.pid
    host, port = sc.split_base(base)
    t0 = time.time()
    try:
        counts, failures, rss = asyncio.run(soak(args, host, port, pid))
        alive = proc is None or proc.poll() is None
        time.sleep(1.0)  # aborted requests leave at the next step
        m = sc.metrics(base) if alive else {}
    finally:
        code = None
        if proc:
            proc.terminate()
            code = proc.wait(timeout=60)
    # Warm-up: the first --warmup-fraction of the samples (allocator pools, thread stacks, the KV
    # cache's pages as the block allocator first hands them out).
    first_after = int(len(rss) * args.warmup_fraction)
    warm = rss[first_after][1] if first_after < len(rss) else 0
    after = rss[first_after:]
    peak_after = max((v for _, v in after), default=0)
    # The largest gap between samples after warm-up, in requests, and the run's length after it.
    gaps = [b[0] - a[0] for a, b in zip(after, after[1:])] + ([args.num_requests - after[-1][0]] if after else [])
    span = args.num_requests - (after[0][0] if after else 0)
    final = rss[-1][1] if rss else 0
    summary = {
        "requests": args.num_requests, "concurrency": args.concurrency, "seconds": round(time.time() - t0, 1),
        "counts": counts, "failures": failures, "server_alive": alive, "exit_code": code,
        "running_at_end": m.get("minivllm:num_requests_running"),
        "in_flight_at_end": m.get("minivllm:num_requests_in_flight"),
        "kv_blocks_free": m.get("minivllm:kv_cache_blocks_free"), "kv_blocks_total": m.get("minivllm:kv_cache_blocks_total"),
        "rss_mib_after_warmup": round(warm / 1024, 1), "rss_mib_peak_after_warmup": round(peak_after / 1024, 1),
        "rss_mib_final": round(final / 1024, 1), "rss_samples_mib": [(n, round(v / 1024, 1)) for n, v in rss],
    }
    checks = {
        "no crash": alive and (code in (None, 0)),
        "every request answered as expected": counts["failed"] == 0,
        "no request running at the end": summary["running_at_end"] == 0 and summary["in_flight_at_end"] == 0,
        "every KV block free": summary["kv_blocks_free"] is not None and summary["kv_blocks_free"] == summary["kv_blocks_total"],
        "rss sampled at least every tenth of the run after warm-up":
            len(after) >= 2 and max(gaps, default=span) * 10 <= span,
        "rss flat after warm-up": warm > 0 and peak_after <= warm * (1 + args.rss_tolerance),
    }
    summary["checks"] = checks
    summary["pass"] = all(checks.values())
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if summary["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
