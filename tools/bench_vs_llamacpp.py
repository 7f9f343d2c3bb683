#!/usr/bin/env python3
"""minivllm's CPU backend against llama.cpp, side by side, on the same GGUF and thread count.

llama.cpp is built from the llama-cpp-python 0.3.36 sdist (PyPI) into a scratch folder outside the
source tree (default build/llamacpp, ignored by git); none of its code enters the repository.
Three workloads, each run by both engines, interleaved run by run so that load from other work on
the machine falls on both alike; medians are reported:

  tg128   batch-1 decode of 128 tokens at the same depth for both (--depth, default 128 tokens of
          context before the first: llama-bench -p 0 -n 128 -d DEPTH; minivllm bench --decode-tokens
          128 --decode-context DEPTH, which times the decode steps only)
  pp512   prompt processing of one 512-token prompt (llama-bench -p 512; minivllm bench on a
          one-sequence workload, max_tokens 1: prompt tokens / time)
  b16     16 parallel sequences, 128 prompt + 128 output tokens each: output tokens / total time
          (llama-batched-bench -npp 128 -ntg 128 -npl 16; minivllm bench on a 16-sequence workload)

and, once, the peak resident memory (/usr/bin/time -v) of a chat prompt + 64 greedy tokens at the
same context length (--ctx tokens: llama.cpp -c, minivllm --max-model-len and a KV cache of exactly
that many tokens).

usage: tools/bench_vs_llamacpp.py [--runs 12] [--threads 2] [--depth 128] [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
                                  [--scratch build/llamacpp] [--minivllm build/cpu/minivllm] [--only tg128,pp512,b16,mem]
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERSION = "0.3.36"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def build_llamacpp(scratch, jobs):
    """llama-bench, llama-batched-bench and llama-completion (tools/build_llamacpp.sh)."""
    tools = ["llama-bench", "llama-batched-bench", "llama-completion"]
    env = dict(os.environ, MINIVLLM_LLAMACPP_SCRATCH=scratch)
    return subprocess.run([os.path.join(ROOT, "tools", "build_llamacpp.sh"), f"-j{jobs}"] + tools, check=True,
                          text=True, stdout=subprocess.PIPE, env=env).stdout.strip()


def workload(path, n, prompt_len, max_tokens, seed):
    rng = random.Random(seed)
    ids = [[rng.randrange(100, 40000) for _ in range(prompt_len)] for _ in range(n)]
    with open(path, "w") as f:
        json.dump({"prompt_token_ids": ids, "max_tokens": [max_tokens] * n}, f)


def minivllm_bench(exe, model, threads, extra):
    out = run([exe, "bench", "--model", model, "--num-threads", str(threads), "--json"] + extra).stdout
    return json.loads(out.strip().splitlines()[-1])


def llama_bench(bin_dir, model, threads, args):
    out = run([os.path.join(bin_dir, "llama-bench"), "-m", model, "-t", str(threads), "-r", "1", "-o", "json"] + args)
    return json.loads(out.stdout)[0]["avg_ts"]


def measure(name, a, bin_dir, tmp):
    model, t = a.model, a.threads
    if name == "tg128":
        llama = llama_bench(bin_dir, model, t, ["-p", "0", "-n", "128", "-d", str(a.depth)])
        mini = minivllm_bench(a.minivllm, model, t, ["--num-seqs", "0", "--decode-tokens", "128", "--decode-context",
                                                     str(a.depth)])["decode_tok_s"]
    elif name == "pp512":
        llama = llama_bench(bin_dir, model, t, ["-p", "512", "-n", "0"])
        r = minivllm_bench(a.minivllm, model, t, ["--workload", os.path.join(tmp, "pp512.json"), "--decode-tokens",
                                                  "0"])
        mini = r["prompt_tokens"] / r["time_s"]
    else:  # b16
        out = run([os.path.join(bin_dir, "llama-batched-bench"), "-m", model, "-t", str(t), "-tb", str(t), "-c",
                   "4096", "-npp", "128", "-ntg", "128", "-npl", "16", "--output-format", "jsonl"]).stdout
        row = [json.loads(l) for l in out.splitlines() if l.startswith("{")][-1]
        llama = row["pl"] * row["tg"] / row["t"]
        r = minivllm_bench(a.minivllm, model, t, ["--workload", os.path.join(tmp, "b16.json"), "--decode-tokens", "0",
                                                  "--temperature", "0"])
        mini = r["output_tokens"] / r["time_s"]
    return llama, mini


def peak_rss_mib(cmd):
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, text=True, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {p.stderr[-2000:]}")
    kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    return kb / 1024, p.stdout


def memory(a, bin_dir):
    question = "What is the capital of France?"
    # SmolLM2's chat template, written out for llama-completion (which would otherwise chat).
    prompt = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
              f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
    llama_mib, llama_out = peak_rss_mib([os.path.join(bin_dir, "llama-completion"), "-m", a.model, "-t",
                                         str(a.threads), "-c", str(a.ctx), "-n", "64", "--temp", "0", "-no-cnv",
                                         "-p", prompt])
    blocks = a.ctx // 256
    mini_mib, mini_out = peak_rss_mib([a.minivllm, "generate", "--model", a.model, "--num-threads", str(a.threads),
                                       "--chat", question, "--temperature", "0", "--max-tokens", "64",
                                       "--max-model-len", str(a.ctx), "--block-size", "256",
                                       "--num-kvcache-blocks", str(blocks)])
    return llama_mib, mini_mib, llama_out.strip()[-200:], mini_out.strip()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=12)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--depth", type=int, default=128,
                   help="tg128: tokens of context before the first decoded one, the same for both engines "
                        "(llama-bench's -d; minivllm's prompt, so at least 1)")
    p.add_argument("--jobs", type=int, default=2, help="parallel compile jobs for llama.cpp")
    p.add_argument("--ctx", type=int, default=2048, help="context length of the memory comparison")
    p.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--scratch", default=os.path.join(ROOT, "build", "llamacpp"))
    p.add_argument("--minivllm", default=os.path.join(ROOT, "build", "cpu", "minivllm"))
    p.add_argument("--only", default="tg128,pp512,b16,mem")
    a = p.parse_args()
    if a.depth < 1:
        p.error("--depth must be at least 1 (minivllm decodes after a prompt of that many tokens)")
    which = a.only.split(",")
    bin_dir = build_llamacpp(a.scratch, a.jobs)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"{a.threads} threads, tg128 depth {a.depth}, {os.path.basename(a.model)}, "
          f"load before: {os.getloadavg()}", flush=True)
    tmp = tempfile.mkdtemp(prefix="bench_vs_llamacpp_")
    workload(os.path.join(tmp, "pp512.json"), 1, 512, 1, 1)
    workload(os.path.join(tmp, "b16.json"), 16, 128, 128, 2)
    results = {w: ([], []) for w in which if w != "mem"}
    for i in range(a.runs):
        for w in results:
            llama, mini = measure(w, a, bin_dir, tmp)
            results[w][0].append(llama)
            results[w][1].append(mini)
            print(f"run {i + 1:2d} {w:6s} llama.cpp {llama:8.1f} tok/s  minivllm {mini:8.1f} tok/s  "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"# load after: {os.getloadavg()}")
    print("| figure | llama.cpp | minivllm | ratio |")
    print("|---|---|---|---|")
    for w, (llama, mini) in results.items():
        ml, mm = statistics.median(llama), statistics.median(mini)
        print(f"| {w} (median of {len(llama)}) | {ml:.1f} tok/s | {mm:.1f} tok/s | {mm / ml:.2f}x |")
    if "mem" in which:
        llama_mib, mini_mib, llama_text, mini_text = memory(a, bin_dir)
        print(f"| peak RSS, chat + 64 tokens, context {a.ctx} | {llama_mib:.0f} MiB | {mini_mib:.0f} MiB | "
              f"{mini_mib / llama_mib:.2f}x |")
        print(f"# llama.cpp said: ...{llama_text!r}\n# minivllm said: {mini_text!r}")


if __name__ == "__main__":
    main()
