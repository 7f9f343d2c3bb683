#!/usr/bin/env python3
"""Serving benchmark for `minivllm serve`, reporting what vLLM's `bench serve` reports: request
throughput, output tokens/s, and TTFT, TPOT, ITL and end-to-end latency at p50, p90 and p99.

Prompts are random token ids (exact lengths, no tokenizer round trip) sent to /v1/completions with
ignore_eos, so every request generates exactly its output length. Requests arrive at --request-rate
(Poisson; inf sends all at once) with at most --max-concurrency in flight.

  tools/bench_serve.py --model M --max-concurrency 16               # starts build/cpu/minivllm serve
  tools/bench_serve.py --base-url http://127.0.0.1:8000 --served-model-name M --max-concurrency 256
  tools/bench_serve.py ... --offline                                  # also offline `minivllm bench`
                                                                      # on the same prompts: the ratio

The offline run gets --max-num-seqs equal to --max-concurrency (unless the engine flags after -- set
it): the server never holds more sequences than the client keeps in flight, so that is the offline
run to compare with. --client-processes P splits the requests over P client processes (each with
its own event loop and 1/P of the concurrency), so that the Python client is not what limits the
figure at hundreds of streams; timestamps are CLOCK_MONOTONIC, comparable across processes.

--workload seeds draws nano-vllm's bench.py distribution (input and output lengths uniform in
[100, 1024]); --input-len/--output-len fix them instead. --save-workload FILE writes the prompts in
the JSON that `minivllm bench --workload FILE` reads.
"""
import argparse
import asyncio
import json
import multiprocessing
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_client as sc  # noqa: E402


def make_workload(args):
    rng = random.Random(args.seed)
    if args.workload == "seeds":
        lens = [rng.randint(100, 1024) for _ in range(args.num_prompts)]
        outs = [rng.randint(100, 1024) for _ in range(args.num_prompts)]
    else:
        lens = [args.input_len] * args.num_prompts
        outs = [args.output_len] * args.num_prompts
    prompts = [[rng.randint(0, args.max_token_id) for _ in range(n)] for n in lens]
    return prompts, outs


async def run(args, host, port, prompts, outs, indexes, concurrency, t_start):
    """Sends prompts[i] for i in indexes, at most `concurrency` at a time; request arrivals follow
    --request-rate from t_start (shared by every client process)."""
    sem = asyncio.Semaphore(concurrency)
    rng = random.Random(args.seed + 1)
    arrivals, t = [], t_start
    for _ in range(len(prompts)):
        arrivals.append(t)
        if args.request_rate != float("inf"):
            t += rng.expovariate(args.request_rate)

    async def one(i):
        delay = arrivals[i] - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        async with sem:
            body = {"model": args.served_model_name, "prompt": prompts[i], "max_tokens": outs[i],
                    "temperature": args.temperature, "ignore_eos": True, "stream": True,
                    "stream_options": {"include_usage": True}}
            if args.schema is not None:  # structured outputs: every request under the same JSON schema
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "bench", "schema": args.schema}}
            return await sc.post(host, port, "/v1/completions", body, api_key=args.api_key, stream=True)

    return await asyncio.gather(*[one(i) for i in indexes])


def client_process(args, host, port, prompts, outs, indexes, concurrency, t_start):
    return asyncio.run(run(args, host, port, prompts, outs, indexes, concurrency, t_start))


def run_clients(args, host, port, prompts, outs):
    """(results in request order, duration): one event loop, or --client-processes of them."""
    p = max(1, min(args.client_processes, args.max_concurrency))
    t0 = time.perf_counter() + (0.5 if p > 1 else 0.0)  # processes start before the first arrival
    if p == 1:
        results = client_process(args, host, port, prompts, outs, list(range(len(prompts))), args.max_concurrency, t0)
    else:
        shares = [list(range(k, len(prompts), p)) for k in range(p)]
        conc = [args.max_concurrency // p + (1 if k < args.max_concurrency % p else 0) for k in range(p)]
        with multiprocessing.get_context("fork").Pool(p) as pool:
            parts = pool.starmap(client_process, [(args, host, port, prompts, outs, shares[k], conc[k], t0)
                                                  for k in range(p)])
        results = [None] * len(prompts)
        for k in range(p):
            for i, r in zip(shares[k], parts[k]):
                results[i] = r
    return results, max(r.end for r in results) - t0


def report(results, duration, args):
    ok = [r for r in results if r.ok]
    out_tokens = sum(r.completion_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens for r in ok)
    ttft = [r.ttft for r in ok if r.ttft is not None]
    tpot = [(r.e2e - r.ttft) / (r.completion_tokens - 1) for r in ok if r.ttft is not None and r.completion_tokens > 1]
    itl = [b - a for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:])]
    e2e = [r.e2e for r in ok]
    fig = {
        "successful_requests": len(ok),
        "failed_requests": len(results) - len(ok),
        "max_concurrency": args.max_concurrency,
        "client_processes": args.client_processes,
        "request_rate": args.request_rate if args.request_rate != float("inf") else "inf",
        "duration_s": duration,
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "request_throughput": len(ok) / duration,
        "output_throughput": out_tokens / duration,
        "total_token_throughput": (in_tokens + out_tokens) / duration,
    }
    for name, values in (("ttft_ms", ttft), ("tpot_ms", tpot), ("itl_ms", itl), ("e2el_ms", e2e)):
        fig[f"mean_{name}"] = 1000 * sum(values) / len(values) if values else float("nan")
        for p in (50, 90, 99):
            fig[f"p{p}_{name}"] = 1000 * sc.percentile(values, p)
    errors = sorted({r.error for r in results if not r.ok})[:5]
    if errors:
        fig["errors"] = errors
    return fig


def print_report(fig):
    print("============ Serving Benchmark Result ============")
    for k in ("successful_requests", "failed_requests", "max_concurrency", "client_processes", "request_rate", "duration_s",
              "total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput",
              "total_token_throughput"):
        v = fig[k]
        print(f"{k:<40}{v:.2f}" if isinstance(v, float) else f"{k:<40}{v}")
    for name, label in (("ttft_ms", "Time to First Token"), ("tpot_ms", "Time per Output Token (excl. 1st)"),
                        ("itl_ms", "Inter-token Latency"), ("e2el_ms", "End-to-end Latency")):
        print(f"{'-' * 15}{label}{'-' * 15}")
        for stat in ("mean", "p50", "p90", "p99"):
            print(f"{stat + ' ' + name:<40}{fig[f'{stat}_{name}']:.2f}")
    if "offline_output_throughput" in fig:
        print("-" * 50)
        print(f"{'offline_output_throughput':<40}{fig['offline_output_throughput']:.2f}")
        print(f"{'server / offline':<40}{fig['server_over_offline']:.3f}")
    if fig.get("errors"):
        print("errors:", fig["errors"])
    print("=" * 50)


def offline_throughput(args, prompts, outs):
    """`minivllm bench` on the same prompts and output lengths (temperature as here)."""
    path = args.save_workload or "/tmp/minivllm_bench_serve_workload.json"
    cmd = [args.binary, "bench", "--model", args.model, "--workload", path, "--decode-tokens", "0",
           "--temperature", str(args.temperature), "--json"] + args.engine_args
    if "--max-num-seqs" not in args.engine_args:
        cmd += ["--max-num-seqs", str(args.max_concurrency)]  # as many in flight as the server had
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["throughput_tok_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", help="a running server; without it --model starts one")
    ap.add_argument("--model", help="model to serve (and to run offline with --offline)")
    ap.add_argument("--served-model-name", help="the model's name in requests (default --model)")
    ap.add_argument("--binary", default="build/cpu/minivllm")
    ap.add_argument("--api-key")
    ap.add_argument("--num-prompts", type=int, default=256)
    ap.add_argument("--workload", choices=["seeds", "fixed"], default="seeds")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--max-token-id", type=int, default=10000)
    ap.add_argument("--request-rate", type=float, default=float("inf"))
    ap.add_argument("--max-concurrency", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--client-processes", type=int, default=1, help="client processes sharing the requests")
    ap.add_argument("--save-workload", help="write the prompts as a `minivllm bench --workload` file")
    ap.add_argument("--offline", action="store_true", help="also run `minivllm bench` on the same prompts")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--json-schema", metavar="FILE",
                    help="send every request with this JSON schema as its response_format (structured outputs; "
                         "an open-ended one, e.g. an array of integers, keeps the output lengths comparable)")
    ap.add_argument("engine_args", nargs="*", help="after --: engine flags for the server and the offline run")
    args = ap.parse_args()
    args.schema = None
    if args.json_schema:
        with open(args.json_schema) as f:
            args.schema = json.load(f)
    if not args.base_url and not args.model:
        ap.error("give --base-url or --model")
    args.served_model_name = args.served_model_name or args.model

    prompts, outs = make_workload(args)
    if args.save_workload or args.offline:
        path = args.save_workload or "/tmp/minivllm_bench_serve_workload.json"
        with open(path, "w") as f:
            json.dump({"prompt_token_ids": prompts, "max_tokens": outs}, f)

    proc = None
    base = args.base_url
    if not base:
        proc, base = sc.start_server(args.binary, args.model, args.engine_args)
    try:
        host, port = sc.split_base(base)
        # Warm-up: one short request, as vLLM's benchmark does.
        asyncio.run(sc.post(host, port, "/v1/completions", {"model": args.served_model_name, "prompt": prompts[0][:16],
                                                            "max_tokens": 4}, api_key=args.api_key))
        results, duration = run_clients(args, host, port, prompts, outs)
    finally:
        if proc:
            proc.terminate()
            proc.wait()
    fig = report(results, duration, args)
    if args.offline:
        fig["offline_output_throughput"] = offline_throughput(args, prompts, outs)
        fig["server_over_offline"] = fig["output_throughput"] / fig["offline_output_throughput"]
    print_report(fig)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(fig, f, indent=1)
    return 0 if fig["failed_requests"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
