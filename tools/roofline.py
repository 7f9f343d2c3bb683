#!/usr/bin/env python3
"""Rooflines of a model from its config.json alone: the ceilings docs/PERFORMANCE.md measures against.

Usage:
    python3 tools/roofline.py CONFIG.json [--world-size N] [--weight-dtype auto|bf16|fp16|fp32|fp8|BITS]
        [--kv-cache-dtype bf16|fp8] [--bandwidth-tbs 4.3] [--bf16-tflops 790] [--fp8-tflops 1580]
        [--workload FILE.json] [--num-seqs N] [--prefill-len L] [--prefill-seqs N] [--json]
        [--measured-decode-tok-s X] [--measured-workload-tok-s X] [--measured-prefill-tok-s X]

CONFIG.json: a Hugging Face config of a family Shape lists (dense or MoE). BITS: bits per weight,
GGUF-style with the block scales (4.5 for Q4_0, 5 for Q4_1, 8.5 for Q8_0). Standard library only.

Every figure is per GPU, the ranks in parallel, and leaves out the all-reduces, the sampler and
the launches: a ceiling, not a prediction. Each figure's assumptions are printed with it.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_bench_workload  # noqa: E402  (the seeds' workload is drawn in one place)

# Bytes per weight of the named dtypes; a number is bits per weight.
DTYPE_BYTES = {"fp32": 4.0, "f32": 4.0, "bf16": 2.0, "fp16": 2.0, "f16": 2.0, "fp8": 1.0}
BENCH_DECODE_PROMPT = 128  # cmd_bench.cc run_decode: a 128-token prompt, then 256 greedy tokens,
BENCH_DECODE_STEPS = 255   # the first from the prefill step, which the bench does not time
GIB = 1 << 30


def dtype_bytes(name):
    if name in DTYPE_BYTES:
        return DTYPE_BYTES[name]
    try:
        bits = float(name)
    except ValueError:
        raise ValueError(f"weight dtype '{name}' is neither one of {sorted(DTYPE_BYTES)} nor a number of bits "
                         f"per weight") from None
    if not 1 <= bits <= 32:
        raise ValueError(f"bits per weight must be in [1, 32], got {bits}")
    return bits / 8


def config_weight_dtype(cfg):
    """The weights' dtype a checkpoint's config.json implies: fp8 for an FP8 quantization_config (Qwen's
    128 x 128 blocks, llm-compressor's compressed-tensors with 8-bit float weights), else bf16."""
    q = cfg.get("quantization_config") or {}
    method = q.get("quant_method")
    if method == "fp8":
        return "fp8"
    if method == "compressed-tensors":
        for group in (q.get("config_groups") or {}).values():
            w = (group or {}).get("weights") or {}
            if w.get("type") == "float" and w.get("num_bits") == 8:
                return "fp8"
    return "bf16"


def default_head_dtype(weight_dtype):
    # FP8 checkpoints (Qwen's, DeepSeek's, llm-compressor's) and online fp8 keep the embedding and
    # the LM head in bf16; a GGUF quantizes them like the other weights.
    return "bf16" if weight_dtype == "fp8" else weight_dtype


class Shape:
    """The sizes that set bytes and FLOPs, read from a Hugging Face config."""

    def __init__(self, cfg):
        arch = cfg.get("model_type", "")
        families = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gemma2", "gemma3_text", "granite",
                    "smollm3", "glm4", "glm", "ernie4_5", "seed_oss", "olmo2", "olmo3", "exaone4", "granitemoe", "olmoe",
                    "qwen2_moe", "glm4_moe", "ernie4_5_moe")
        if arch not in families:
            raise ValueError(f"model_type '{arch}' is not one of {', '.join(families)}")
        self.arch = arch
        self.hidden = cfg["hidden_size"]
        self.layers = cfg["num_hidden_layers"]
        self.q_heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.q_heads)
        self.head_dim = cfg.get("head_dim") or self.hidden // self.q_heads
        self.vocab = cfg["vocab_size"]
        gemma = arch.startswith("gemma")
        # Gemma's configs leave tie_word_embeddings out: tied, transformers' default for them.
        self.tied = bool(cfg.get("tie_word_embeddings", gemma))
        # Gemma 2 and 3, and GLM-4, also norm each sublayer's output
        self.norms_per_layer = 4 if gemma or arch == "glm4" else 2
        self.qkv_bias = (arch == "qwen2" or (arch == "qwen2_moe" and cfg.get("qkv_bias", True))
                         or bool(cfg.get("attention_bias", False)))
        qk_norm = arch.startswith("qwen3") or arch in ("gemma3_text", "exaone4") or cfg.get("use_qk_norm", False)
        # q/k norm weights a layer: one head's each (Qwen3, Gemma 3), or every head's (OLMo 2)
        self.qk_norm_width = (2 * self.head_dim if qk_norm
                              else (self.q_heads + self.kv_heads) * self.head_dim if arch.startswith("olmo") else 0)
        moe = arch in ("qwen3_moe", "mixtral", "granitemoe", "olmoe", "qwen2_moe", "glm4_moe", "ernie4_5_moe")
        # Mixtral names its expert count num_local_experts and its expert width intermediate_size;
        # GLM-4.5 its count n_routed_experts.
        ernie = arch == "ernie4_5_moe"  # ERNIE 4.5 names them moe_num_experts, moe_k
        self.experts = (cfg.get("num_experts", cfg.get("num_local_experts", cfg.get("n_routed_experts",
                                                                                      cfg.get("moe_num_experts"))))
                        if moe else 1)
        self.experts_per_token = (cfg["moe_k"] if ernie else cfg["num_experts_per_tok"]) if moe else 1
        self.mlp_width = cfg.get("moe_intermediate_size", cfg["intermediate_size"]) if moe else cfg["intermediate_size"]
        # Qwen2-MoE's shared expert, read by every token (its gate a replicated row).
        self.shared_width = cfg.get("shared_expert_intermediate_size", 5632) if arch == "qwen2_moe" else 0
        # GLM-4.5: n_shared_experts ungated experts in every sparse layer, its first layers dense.
        self.dense_layers = cfg.get("first_k_dense_replace", 1) if arch == "glm4_moe" else 0
        self.dense_width = cfg["intermediate_size"]
        if arch == "glm4_moe":
            self.shared_width = self.mlp_width * cfg.get("n_shared_experts", 1)
        if ernie:  # sparse layers from moe_layer_start_index on (the interval and end taken as 1 and the last)
            self.dense_layers = cfg.get("moe_layer_start_index", 1)
            self.shared_width = self.mlp_width * cfg.get("moe_num_shared_experts", 2)


def weight_counts(s):
    """Numbers of weights, by dtype and by how tensor parallelism treats them. Split over the ranks:
    the attention and MLP linears (column- and row-parallel), their biases, the vocabulary-parallel
    embedding and LM head. Replicated: the norms and the MoE router."""
    h, q, kv = s.hidden, s.q_heads * s.head_dim, s.kv_heads * s.head_dim
    sparse = s.layers - s.dense_layers  # layers whose MLP is experts (every layer of a dense model's "expert")
    return {
        "attention": (s.layers * (h * q + 2 * h * kv + q * h)   # q, k, v, o at --weight-dtype, a shared
                      + sparse * 3 * h * s.shared_width          # expert (every token reads it), and the
                      + s.dense_layers * 3 * h * s.dense_width),  # dense MLPs of a MoE's first layers
        "expert": sparse * 3 * h * s.mlp_width,                 # gate, up, down of one expert (dense: the MLP)
        "bias": s.layers * (q + 2 * kv) if s.qkv_bias else 0,   # bf16
        "replicated": (s.layers * (s.norms_per_layer * h + s.qk_norm_width)
                       + sparse * ((h * s.experts if s.experts > 1 else 0)
                                   + (h if s.arch == "qwen2_moe" else 0))) + h,  # bf16, + the final norm
        "head": s.vocab * h,                                    # at --head-dtype
        "embedding": 0 if s.tied else s.vocab * h,              # at --head-dtype; one row read per token
    }


def distinct_experts(s, tokens):
    """Experts a step of `tokens` tokens reads, if the router picks uniformly: E (1 - (1 - k/E)^n)."""
    if s.experts == 1:
        return 1.0
    return s.experts * (1 - (1 - s.experts_per_token / s.experts) ** tokens)


class Model:
    def __init__(self, cfg, world_size=1, weight_dtype="bf16", head_dtype=None, kv_cache_dtype="bf16"):
        self.s = Shape(cfg)
        s = self.s
        if world_size < 1:
            raise ValueError(f"world size must be >= 1, got {world_size}")
        for what, n in (("attention heads", s.q_heads), ("kv heads", s.kv_heads), ("vocabulary", s.vocab),
                        ("MLP width", s.mlp_width),
                        ("shared expert width", s.shared_width)):
            if n % world_size:
                raise ValueError(f"world size {world_size} does not divide the {what} ({n})")
        if kv_cache_dtype not in ("bf16", "fp8"):
            raise ValueError(f"kv cache dtype '{kv_cache_dtype}' is not bf16 or fp8")
        self.world_size = world_size
        self.weight_dtype = weight_dtype
        self.head_dtype = head_dtype or default_head_dtype(weight_dtype)
        self.kv_cache_dtype = kv_cache_dtype
        self.wb, self.hb = dtype_bytes(weight_dtype), dtype_bytes(self.head_dtype)
        self.counts = weight_counts(s)

    def weight_bytes(self, experts):
        """Per GPU: every weight when experts = all of them; what a step reads when experts is the
        number of distinct experts it routes to (and without the embedding, of which it reads rows)."""
        c, ws = self.counts, self.world_size
        split = (c["attention"] + c["expert"] * experts) * self.wb + c["bias"] * 2 + c["head"] * self.hb
        return split / ws + c["replicated"] * 2

    def memory_bytes(self):
        return self.weight_bytes(self.s.experts) + self.counts["embedding"] * self.hb / self.world_size

    def step_read_bytes(self, tokens):
        return self.weight_bytes(distinct_experts(self.s, tokens))

    def kv_bytes_per_token(self):
        """Per GPU, a token's K and V over every layer (fp8: e4m3 plus an fp32 scale per token and kv head)."""
        s = self.s
        per_head = s.head_dim * 2 if self.kv_cache_dtype == "bf16" else s.head_dim + 4
        return 2 * s.layers * (s.kv_heads // self.world_size) * per_head

    def linear_flops_per_token(self):
        """Per GPU, 2 FLOPs per weight a token multiplies (its routed experts), the LM head apart."""
        c, s = self.counts, self.s
        return 2 * (c["attention"] + c["expert"] * s.experts_per_token) / self.world_size

    def head_flops_per_token(self):
        return 2 * self.counts["head"] / self.world_size

    def attention_flops(self, context):
        """Per GPU, QK^T and PV for one query over `context` keys, every layer."""
        s = self.s
        return 4 * s.layers * (s.q_heads // self.world_size) * s.head_dim * context


class Ceilings:
    """The device's measured limits (defaults: one H200, docs/PERFORMANCE.md)."""

    def __init__(self, bandwidth_tbs=4.3, bf16_tflops=790.0, fp8_tflops=1580.0):
        self.bandwidth = bandwidth_tbs * 1e12
        self.bf16 = bf16_tflops * 1e12
        self.fp8 = fp8_tflops * 1e12

    def peak(self, dtype):
        # Weights of other dtypes (GGUF blocks) are taken as dequantized into bf16 GEMMs.
        return self.fp8 if dtype == "fp8" else self.bf16

    def step_seconds(self, m, read_bytes, linear_flops, head_flops, attention_flops):
        """A step is the longer of its bytes at the bandwidth and its FLOPs at the peaks."""
        compute = (linear_flops / self.peak(m.weight_dtype) + head_flops / self.peak(m.head_dtype)
                   + attention_flops / self.bf16)
        return max(read_bytes / self.bandwidth, compute)


def batch1_decode(m, hw, prompt=BENCH_DECODE_PROMPT):
    kv = m.kv_bytes_per_token()
    seconds = 0.0
    for j in range(1, BENCH_DECODE_STEPS + 1):
        context = prompt + j
        seconds += hw.step_seconds(m, m.step_read_bytes(1) + context * kv, m.linear_flops_per_token(),
                                   m.head_flops_per_token(), m.attention_flops(context))
    return {
        "tok_s": BENCH_DECODE_STEPS / seconds,
        "ms_per_token": 1e3 * seconds / BENCH_DECODE_STEPS,
        "weight_bytes_per_token": m.step_read_bytes(1),
        "assumptions": f"`minivllm bench`'s decode run: a {prompt}-token prompt, {BENCH_DECODE_STEPS} "
                       f"decode steps timed; each step reads every weight once (the routed experts of a MoE, the "
                       f"embedding's one row aside) and the sequence's KV at {hw.bandwidth / 1e12:g} TB/s, "
                       f"or computes at the peak if longer",
    }


def prefill_seconds(m, hw, prompt_lens, max_num_batched_tokens):
    """Prefill of whole prompts in chunks of the token budget: each chunk reads the weights once;
    the LM head runs on each prompt's last token only."""
    tokens = sum(prompt_lens)
    chunks = math.ceil(tokens / max_num_batched_tokens)
    read = chunks * m.step_read_bytes(min(tokens, max_num_batched_tokens))
    attention = sum(m.attention_flops(1) * p * (p + 1) / 2 for p in prompt_lens)  # causal
    compute_flops = m.linear_flops_per_token() * tokens + m.head_flops_per_token() * len(prompt_lens) + attention
    return hw.step_seconds(m, read, m.linear_flops_per_token() * tokens, m.head_flops_per_token() * len(prompt_lens),
                           attention), compute_flops


def workload(m, hw, prompt_lens, output_lens, kv_capacity_tokens, max_num_seqs=512,
             max_num_batched_tokens=16384):
    """Throughput ceiling of a workload run as the engine's scheduler would, with ideal steps: a
    sequence is admitted (and prefilled, which samples its first token) when its prompt and all its
    output fit the KV left, so it never needs preempting; then one decode step per token."""
    kv = m.kv_bytes_per_token()
    for i, (p, o) in enumerate(zip(prompt_lens, output_lens)):
        if p + o > kv_capacity_tokens:
            raise ValueError(f"sequence {i} ({p} + {o} tokens) does not fit a KV cache of {kv_capacity_tokens} tokens")
    waiting = list(range(len(prompt_lens)))
    running = {}  # sequence -> tokens generated
    free = kv_capacity_tokens
    t = {"prefill_s": 0.0, "decode_s": 0.0, "decode_steps": 0, "decode_weight_bytes": 0.0, "decode_kv_bytes": 0.0,
         "peak_running": 0, "prefill_flops": 0.0}
    while waiting or running:
        admitted = []
        while waiting and len(running) + len(admitted) < max_num_seqs and \
                prompt_lens[waiting[0]] + output_lens[waiting[0]] <= free:
            i = waiting.pop(0)
            free -= prompt_lens[i] + output_lens[i]
            admitted.append(i)
        if admitted:
            seconds, flops = prefill_seconds(m, hw, [prompt_lens[i] for i in admitted], max_num_batched_tokens)
            t["prefill_s"] += seconds
            t["prefill_flops"] += flops
            running.update({i: 1 for i in admitted})
        else:
            n = len(running)
            contexts = [prompt_lens[i] + g for i, g in running.items()]
            weights, kv_read = m.step_read_bytes(n), sum(contexts) * kv
            t["decode_s"] += hw.step_seconds(m, weights + kv_read, n * m.linear_flops_per_token(),
                                             n * m.head_flops_per_token(), m.attention_flops(sum(contexts)))
            t["decode_steps"] += 1
            t["decode_weight_bytes"] += weights
            t["decode_kv_bytes"] += kv_read
            running = {i: g + 1 for i, g in running.items()}
        t["peak_running"] = max(t["peak_running"], len(running))
        for i in [i for i, g in running.items() if g >= output_lens[i]]:
            del running[i]
            free += prompt_lens[i] + output_lens[i]
    total = t["prefill_s"] + t["decode_s"]
    # The output tokens over the decode steps' time alone: the floors docs/PERFORMANCE.md stated
    # before this script (bytes at the bandwidth, prefill left out).
    t.update({"tok_s": sum(output_lens) / total, "decode_only_tok_s": sum(output_lens) / t["decode_s"], "seconds": total, "prompt_tokens": sum(prompt_lens),
              "output_tokens": sum(output_lens), "num_seqs": len(prompt_lens)})
    return t


def prefill_alone(m, hw, prompt_len, num_prompts):
    seconds, flops = prefill_seconds(m, hw, [prompt_len] * num_prompts, 16384)
    tokens = prompt_len * num_prompts
    return {"tflops": flops / seconds / 1e12, "tok_s": tokens / seconds, "flops_per_token": flops / tokens,
            "seconds": seconds,
            "assumptions": f"{num_prompts} prompt(s) of {prompt_len} tokens, no decode: linear FLOPs at the "
                           f"{m.weight_dtype} GEMM peak, attention (causal half) at the bf16 peak, the LM head on "
                           f"each prompt's last token; weights read once per 16,384-token chunk"}


def load_workload(path, num_seqs):
    """The seeds' workload (as `minivllm bench`), or a `--workload` file of the bench's format;
    --num-seqs keeps the first N sequences, as the bench does."""
    if path:
        with open(path) as f:
            w = json.load(f)
        if not isinstance(w, dict) or "prompt_token_ids" not in w or "max_tokens" not in w:
            raise ValueError(f"workload file '{path}' must be an object with 'prompt_token_ids' and 'max_tokens'")
    else:
        w = make_bench_workload.make_workload()
    prompts = [len(p) for p in w["prompt_token_ids"]]
    outputs = list(w["max_tokens"])
    if num_seqs is not None:
        if not 1 <= num_seqs <= len(prompts):
            raise ValueError(f"--num-seqs {num_seqs} is not in [1, {len(prompts)}] (the workload's sequences)")
        prompts, outputs = prompts[:num_seqs], outputs[:num_seqs]
    return prompts, outputs


def kv_capacity(m, args):
    if args.kv_cache_tokens is not None:
        return args.kv_cache_tokens, f"{args.kv_cache_tokens} tokens (--kv-cache-tokens)"
    free = args.gpu_memory_gib * GIB * args.gpu_memory_utilization - m.memory_bytes()
    if free <= 0:
        raise ValueError(f"the weights ({m.memory_bytes() / GIB:.1f} GiB per GPU) do not fit "
                         f"{args.gpu_memory_utilization} of {args.gpu_memory_gib} GiB")
    tokens = int(free // m.kv_bytes_per_token())
    return tokens, (f"{tokens} tokens: {args.gpu_memory_utilization} of {args.gpu_memory_gib} GiB less the weights, "
                    f"activations not counted")


def report(args):
    with open(args.config) as f:
        cfg = json.load(f)
    weight_dtype = config_weight_dtype(cfg) if args.weight_dtype == "auto" else args.weight_dtype
    m = Model(cfg, args.world_size, weight_dtype, args.head_dtype, args.kv_cache_dtype)
    hw = Ceilings(args.bandwidth_tbs, args.bf16_tflops, args.fp8_tflops)
    capacity, capacity_note = kv_capacity(m, args)
    prompts, outputs = load_workload(args.workload, args.num_seqs)
    w = workload(m, hw, prompts, outputs, capacity)
    w["kv_cache_tokens"] = capacity
    w["assumptions"] = (f"{w['num_seqs']} sequences ({w['prompt_tokens']} prompt, {w['output_tokens']} output tokens); "
                        f"KV cache {capacity_note}; a sequence starts when its whole length fits (no preemption); "
                        f"prefill at the GEMM peak, each decode step the longer of (weights + running KV) at "
                        f"{hw.bandwidth / 1e12:g} TB/s and its FLOPs at the peak; no sampler, all-reduce or launch time")
    out = {
        "config": args.config,
        "world_size": m.world_size,
        "weight_dtype": m.weight_dtype,
        "head_dtype": m.head_dtype,
        "kv_cache_dtype": m.kv_cache_dtype,
        "ceilings": {"bandwidth_tbs": args.bandwidth_tbs, "bf16_tflops": args.bf16_tflops,
                     "fp8_tflops": args.fp8_tflops},
        "weight_bytes_per_gpu": m.memory_bytes(),
        "kv_bytes_per_token_per_gpu": m.kv_bytes_per_token(),
        "batch1_decode": batch1_decode(m, hw, args.decode_context),
        "workload": w,
        "prefill": prefill_alone(m, hw, args.prefill_len, args.prefill_seqs),
    }
    for key, figure, field in (("measured_decode_tok_s", "batch1_decode", "tok_s"),
                               ("measured_workload_tok_s", "workload", "tok_s"),
                               ("measured_prefill_tok_s", "prefill", "tok_s")):
        measured = getattr(args, key)
        if measured is not None:
            out[figure]["measured_tok_s"] = measured
            out[figure]["fraction_of_roofline"] = measured / out[figure][field]
    if args.measured_prefill_tok_s is not None:
        out["prefill"]["measured_tflops"] = args.measured_prefill_tok_s * out["prefill"]["flops_per_token"] / 1e12
    return out


def print_text(r):
    d, w, p = r["batch1_decode"], r["workload"], r["prefill"]
    fraction = lambda f: f", measured {f['measured_tok_s']:,.0f} = {100 * f['fraction_of_roofline']:.0f}%" \
        if "measured_tok_s" in f else ""
    print(f"{r['config']}: world size {r['world_size']}, weights {r['weight_dtype']} (embedding/head "
          f"{r['head_dtype']}), KV cache {r['kv_cache_dtype']}")
    print(f"  weights per GPU: {r['weight_bytes_per_gpu'] / 1e9:.3f} GB; KV per token per GPU: "
          f"{r['kv_bytes_per_token_per_gpu']:,} bytes")
    print(f"batch-1 decode: {d['tok_s']:,.0f} tok/s ({d['ms_per_token']:.3f} ms/token, "
          f"{d['weight_bytes_per_token'] / 1e9:.3f} GB of weights a token){fraction(d)}")
    print(f"  assumes {d['assumptions']}")
    print(f"workload: {w['tok_s']:,.0f} output tok/s ({w['seconds']:.2f} s: prefill {w['prefill_s']:.2f} s, "
          f"{w['decode_steps']} decode steps {w['decode_s']:.2f} s reading {w['decode_weight_bytes'] / 1e12:.2f} TB "
          f"of weights and {w['decode_kv_bytes'] / 1e12:.2f} TB of KV; at most {w['peak_running']} running)"
          f"{fraction(w)}")
    print(f"  decode steps alone: {w['decode_only_tok_s']:,.0f} output tok/s")
    print(f"  assumes {w['assumptions']}")
    measured = f", measured {p['measured_tflops']:.0f} TFLOP/s = {100 * p['fraction_of_roofline']:.0f}%" \
        if "measured_tflops" in p else ""
    print(f"prefill: {p['tflops']:.0f} TFLOP/s, {p['tok_s']:,.0f} tok/s ({p['flops_per_token'] / 1e9:.2f} GFLOP "
          f"a token){measured}")
    print(f"  assumes {p['assumptions']}")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help="a Hugging Face config.json")
    ap.add_argument("--world-size", type=int, default=1, help="tensor-parallel ranks (default 1)")
    ap.add_argument("--weight-dtype", default="auto",
                    help="bf16, fp16, fp32, fp8 or bits per weight (default auto: fp8 for a config whose "
                         "quantization_config is FP8, else bf16)")
    ap.add_argument("--head-dtype", help="embedding and LM head (default: bf16 for fp8 weights, else --weight-dtype)")
    ap.add_argument("--kv-cache-dtype", default="bf16", help="bf16 or fp8 (default bf16)")
    ap.add_argument("--bandwidth-tbs", type=float, default=4.3, help="copy bandwidth, TB/s (default 4.3: H200)")
    ap.add_argument("--bf16-tflops", type=float, default=790.0, help="dense bf16 GEMM peak (default 790: H200)")
    ap.add_argument("--fp8-tflops", type=float, default=1580.0, help="dense fp8 GEMM peak (default 1580)")
    ap.add_argument("--gpu-memory-gib", type=float, default=139.0, help="memory per GPU (default 139: H200)")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="as the engine's (default 0.9)")
    ap.add_argument("--kv-cache-tokens", type=int, help="KV cache size in tokens (default: from the memory)")
    ap.add_argument("--workload", help="a `minivllm bench --workload` file (default: the seeds' workload)")
    ap.add_argument("--num-seqs", type=int, help="the workload's first N sequences (default all)")
    ap.add_argument("--prefill-len", type=int, default=8192, help="prefill-alone prompt length (default 8192)")
    ap.add_argument("--prefill-seqs", type=int, default=16, help="prefill-alone prompts (default 16)")
    ap.add_argument("--decode-context", type=int, default=BENCH_DECODE_PROMPT,
                    help=f"the batch-1 run's prompt tokens, as `minivllm bench --decode-context` (default "
                         f"{BENCH_DECODE_PROMPT})")
    ap.add_argument("--measured-decode-tok-s", type=float, help="a measured batch-1 figure, to state its fraction")
    ap.add_argument("--measured-workload-tok-s", type=float, help="a measured workload figure")
    ap.add_argument("--measured-prefill-tok-s", type=float, help="a measured prefill-alone figure (prompt tok/s)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        r = report(args)
    except (ValueError, KeyError, OSError) as e:
        key = f"config key {e} missing" if isinstance(e, KeyError) else str(e)
        sys.exit(f"roofline.py: {args.config}: {key}")
    if args.json:
        print(json.dumps(r, indent=1))
    else:
        print_text(r)


if __name__ == "__main__":
    main()
