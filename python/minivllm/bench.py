"""python -m minivllm.bench: nano-vllm's bench.py through the Python API, on the workload that
`minivllm bench` draws (the same generator, compiled into the extension), with the same warm-up,
output lines and single-sequence decode run, so that the two figures compare directly.

    python -m minivllm.bench --model M [--num-seqs N] [--workload FILE] [--temperature T]
                             [--decode-tokens N] [--repeat N] [--json] [engine flags: --max-num-seqs 64 ...]

Engine flags are spelled as the CLI's (--max-model-len 1024, --enforce-eager ...) and are passed
to LLM(model, **config) as keys (max_model_len=1024, ...): the engine checks them.
"""
import argparse
import json
import sys
import time

from . import _minivllm
from .llm import LLM
from .sampling_params import SamplingParams


def _engine_config(rest):
    """`--some-key V` / `--flag` pairs -> {"some_key": V (JSON when it parses), "flag": True}."""
    config = {}
    i = 0
    while i < len(rest):
        arg = rest[i]
        if not arg.startswith("--") or len(arg) == 2:
            raise SystemExit(f"error: unexpected argument '{arg}'")
        key, eq, value = arg[2:].partition("=")
        key = key.replace("-", "_")
        if not eq:
            if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
                value = rest[i + 1]
                i += 1
            else:
                value = "true"
        try:
            config[key] = json.loads(value)
        except ValueError:
            config[key] = value
        i += 1
    return config


def _decode_run(llm, prompt0, decode_tokens):
    """Greedy decode of one 128-token prompt, timing only the decode steps (as `minivllm bench`)."""
    prompt = [prompt0[i % len(prompt0)] for i in range(128)]
    llm.add_request(prompt, SamplingParams(temperature=0, ignore_eos=True, max_tokens=decode_tokens))
    tokens, seconds = 0, 0.0
    while not llm.is_finished():
        t = time.perf_counter()
        _, num_tokens = llm.step()
        dt = time.perf_counter() - t
        if num_tokens < 0:
            seconds += dt
            tokens += -num_tokens
    return tokens, seconds


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m minivllm.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--workload", help='{"prompt_token_ids", "max_tokens"} from FILE instead')
    p.add_argument("--num-seqs", type=int, help="the first N sequences of the workload; 0 skips the throughput run")
    p.add_argument("--temperature", type=float, default=0.6)
    p.add_argument("--decode-tokens", type=int, default=256, help="greedy tokens of the decode run; 0 skips it")
    p.add_argument("--repeat", type=int, default=1,
                   help="run the workload N times, the prefix cache emptied before each, and report the median run")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args, rest = p.parse_known_args(argv)
    config = _engine_config(rest)
    if not 1 <= args.repeat <= 1000:
        raise SystemExit(f"error: --repeat {args.repeat} must be from 1 to 1000")

    prompts, max_tokens = _minivllm.bench_workload(args.workload)
    num_seqs = len(prompts) if args.num_seqs is None else args.num_seqs
    if not 0 <= num_seqs <= len(prompts):
        raise SystemExit(f"error: --num-seqs {num_seqs} exceeds the workload's {len(prompts)} sequences")

    llm = LLM(args.model, **config)
    report = {"model": args.model, "world_size": llm.tensor_parallel_size,
              "num_kvcache_blocks": llm.num_kvcache_blocks}
    # bench.py's warm-up.
    if llm.tokenizer.vocab_size > 0:
        llm.generate(["Benchmark: "], SamplingParams(), use_tqdm=False)
    else:
        llm.generate([prompts[0][:16]], SamplingParams(), use_tqdm=False)

    if num_seqs > 0:
        prompt_token_ids = prompts[:num_seqs]
        sampling_params = [SamplingParams(temperature=args.temperature, ignore_eos=True, max_tokens=m)
                           for m in max_tokens[:num_seqs]]
        runs = []  # (seconds, output tokens)
        for i in range(args.repeat):
            # Each run starts from an empty prefix cache, as `minivllm bench --repeat`: a repeated
            # workload would otherwise find every prompt cached and skip its prefill.
            if not llm.reset_prefix_cache():
                raise SystemExit(f"error: the prefix cache could not be emptied before run {i + 1}")
            t = time.time()
            outputs = llm.generate(prompt_token_ids, sampling_params, use_tqdm=False)
            t = time.time() - t
            runs.append((t, sum(len(o["token_ids"]) for o in outputs)))
            if not args.json:
                print(f"Total: {runs[-1][1]}tok, Time: {t:.2f}s, Throughput: {runs[-1][1] / t:.2f}tok/s", flush=True)
        # The median run (the slower middle one for an even count), as the CLI reports it.
        ordered = sorted(runs, key=lambda r: -r[0])
        t, total_tokens = ordered[(len(ordered) - 1) // 2]
        throughput = total_tokens / t
        report.update({"num_seqs": num_seqs, "prompt_tokens": sum(len(x) for x in prompt_token_ids),
                       "output_tokens": total_tokens, "time_s": t, "throughput_tok_s": throughput})
        if args.repeat > 1:
            report["throughput_runs_tok_s"] = [n / s for s, n in runs]
            if not args.json:
                print(f"Median of {args.repeat} runs: {throughput:.2f}tok/s "
                      f"(slowest {ordered[0][1] / ordered[0][0]:.2f})", flush=True)
    if args.decode_tokens > 0:
        tokens, seconds = _decode_run(llm, prompts[0], args.decode_tokens)
        tok_s = tokens / seconds if seconds > 0 else 0.0
        report.update({"decode_tokens": tokens, "decode_time_s": seconds, "decode_tok_s": tok_s})
        if not args.json:
            print(f"Decode: {tokens}tok, Time: {seconds:.2f}s, Throughput: {tok_s:.2f}tok/s "
                  "(batch 1, 128-token prompt)", flush=True)
    if args.json:
        print(json.dumps(report))
    llm.exit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
