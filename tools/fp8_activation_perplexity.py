#!/usr/bin/env python3
"""What rounding a trained model's linear inputs through e4m3 costs, in perplexity.

Random weights cannot judge W8A8 (docs/PERFORMANCE.md, "Stop 86": on them two W8A8 computations
disagree on a fifth of the argmaxes, as W8A8 and bf16 do). A trained model can. This script takes
the default model (SmolLM2-135M-Instruct, a llama GGUF; tools/fetch_default_model.sh), dequantizes
it with gguf-py, and scores a fixed text in float32 numpy, once per way of computing the decoder
layers' q/k/v/o and gate/up/down projections (embeddings, norms and the tied LM head untouched):

    reference        the dequantized weights, fp32 inputs
    w8a16-block      weights through e4m3 per 128 x 128 block (scale amax / 448, as Qwen3-*-FP8
                     and DeepSeek-V3 publish them), fp32 inputs: the CPU backend's computation
    w8a16-block-bf16 the same, inputs rounded to bf16: the GPU's default for such checkpoints (a bf16
                     copy of the weights past 64 tokens, the e4m3 gemv/GEMM with bf16 x below)
    w8a8-block       the same weights, inputs through e4m3 per token per 128 columns (scale amax /
                     448): what the checkpoint's "activation_scheme": "dynamic" declares, what
                     transformers' FP8Linear computes and what MINIVLLM_FP8_BLOCK_CUBLAS runs
    w8a8-channel     weights through e4m3 per output row, inputs per token (one scale a row): what
                     the GPU runs for compressed-tensors FP8_DYNAMIC and `--quantization fp8`

and the fp8 KV cache (--kv-cache-dtype fp8) on the reference weights: keys and values (after rope,
rounded to bf16 as the GPU's qkv holds them) through e4m3 per (token, kv head) row:

    kv-fp8           keys and values as they are
    k-fp8, v-fp8     only the keys, only the values
    kv-fp8-rotated   the keys rotated first (common/fp8.h: kv_rotate_row; the queries alike, so
                     the scores are exact but for the rounding), quantised from the fp32 rotation:
                     what both backends store
    k-fp8-rotated    only the keys, rotated
    kv-fp8-rotated-bf16  the rotation rounded to bf16 before e4m3 (the GPU's first version)

Windows as `minivllm perplexity` cuts them (src/cli/perplexity.h): window W every S tokens, each
token scored once. With --minivllm, the engine's own perplexity of the GGUF (CPU) is printed beside
the reference's, which checks this forward pass.

Usage (numpy and gguf from tools/requirements-goldens.txt):
    python3 tools/fp8_activation_perplexity.py --gguf models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --token-ids ids.json [--window 512] [--stride 512] [--max-tokens 4096]
ids.json: the text's ids as `minivllm tokenize --model GGUF --add-special-tokens` prints them.
"""
import argparse
import json
import math
import subprocess
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

E4M3_MAX = 448.0


def round_e4m3(v):
    """fp32 values already scaled into e4m3's range -> the nearest e4m3 value (ties to even)."""
    a = np.abs(v)
    e = np.floor(np.log2(np.maximum(a, 2.0 ** -9)))
    step = np.exp2(np.maximum(e, -6.0) - 3.0)  # 3 mantissa bits; subnormals below 2^-6
    return np.clip(np.round(v / step) * step, -E4M3_MAX, E4M3_MAX).astype(np.float32)


def through_e4m3(v, axis_groups):
    """v through e4m3 with one scale (amax / 448) per group; axis_groups reshapes v into
    [..., groups, group_len] and back."""
    g = axis_groups(v)
    amax = np.max(np.abs(g), axis=-1, keepdims=True)
    scale = np.where(amax > 0, amax / E4M3_MAX, 1.0).astype(np.float32)
    return (round_e4m3(g / scale) * scale).astype(np.float32)


def pad_to(n, m):
    return (n + m - 1) // m * m


def weight_blocks(w, block=128):
    """[N, K] through e4m3 per block x block (partial blocks at the edges, as the checkpoints'
    ceil-sized scale grids)."""
    n, k = w.shape
    p = np.zeros((pad_to(n, block), pad_to(k, block)), np.float32)
    p[:n, :k] = w
    nb, kb = p.shape[0] // block, p.shape[1] // block
    q = through_e4m3(p, lambda a: a.reshape(nb, block, kb, block).transpose(0, 2, 1, 3).reshape(nb, kb, -1))
    return q.reshape(nb, kb, block, block).transpose(0, 2, 1, 3).reshape(p.shape)[:n, :k].copy()


def weight_rows(w):
    return through_e4m3(w, lambda a: a)


def act_groups(x, group=128):
    t, k = x.shape
    p = np.zeros((t, pad_to(k, group)), np.float32)
    p[:, :k] = x
    return through_e4m3(p, lambda a: a.reshape(t, -1, group)).reshape(p.shape)[:, :k].copy()


def act_rows(x):
    return through_e4m3(x, lambda a: a)


def to_bf16(x):
    u = x.astype(np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.view(np.float32)


def hadamard(n):
    """common/fp8.h's H: the normalised Sylvester Walsh-Hadamard matrix on runs of n & -n."""
    p = n & -n
    h = np.array([[1.0]])
    while h.shape[0] < p:
        h = np.block([[h, h], [h, -h]])
    return np.kron(np.eye(n // p), h / math.sqrt(p)).astype(np.float32)


def kv_rows(x):
    """[t, heads, d] through e4m3 per (token, head) row, from its bf16 rounding."""
    return through_e4m3(to_bf16(x), lambda a: a)


def kv_rows_rotated(x):
    """H x through e4m3 per row, rotated back (H is symmetric and its own inverse): the scores of
    H q against the stored H k. From the fp32 rotation of the fp32 key, as both backends."""
    h = hadamard(x.shape[-1])
    return through_e4m3(x @ h, lambda a: a) @ h


def kv_rows_rotated_bf16(x):
    """The same from the bf16-rounded key, its rotation rounded to bf16 again."""
    h = hadamard(x.shape[-1])
    return kv_rows(to_bf16(x) @ h) @ h


# name: (weights, linear inputs, keys, values)
VARIANTS = {
    "reference": (None, None, None, None),
    "w8a16-block": (weight_blocks, None, None, None),
    "w8a16-block-bf16": (weight_blocks, to_bf16, None, None),
    "w8a8-block": (weight_blocks, act_groups, None, None),
    "w8a8-channel": (weight_rows, act_rows, None, None),
    "kv-fp8": (None, None, kv_rows, kv_rows),
    "k-fp8": (None, None, kv_rows, None),
    "v-fp8": (None, None, None, kv_rows),
    "kv-fp8-rotated": (None, None, kv_rows_rotated, kv_rows),
    "k-fp8-rotated": (None, None, kv_rows_rotated, None),
    "kv-fp8-rotated-bf16": (None, None, kv_rows_rotated_bf16, kv_rows),
}


class Model:
    def __init__(self, path):
        r = GGUFReader(path)

        def field(name):
            f = r.fields[name]
            return f.parts[f.data[0]][0]

        arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
        if arch != "llama":
            raise SystemExit(f"{path}: architecture '{arch}'; this script runs llama GGUFs")
        self.layers = int(field("llama.block_count"))
        self.heads = int(field("llama.attention.head_count"))
        self.kv_heads = int(field("llama.attention.head_count_kv"))
        self.eps = float(field("llama.attention.layer_norm_rms_epsilon"))
        self.base = float(field("llama.rope.freq_base"))
        self.t = {}
        for t in r.tensors:
            self.t[t.name] = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(
                [int(d) for d in reversed(t.shape)])
        self.hidden = self.t["token_embd.weight"].shape[1]
        self.head_dim = self.hidden // self.heads
        self.head = self.t.get("output.weight", self.t["token_embd.weight"])

    def linears(self, wq):
        names = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
        return [{n: (wq(self.t[f"blk.{i}.{n}.weight"]) if wq else self.t[f"blk.{i}.{n}.weight"]) for n in names}
                for i in range(self.layers)]

    def rms(self, x, w):
        return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)) * w

    def rope(self, x, pos):
        # llama.cpp's LLAMA layout: q/k rows permuted at conversion, so adjacent pairs rotate.
        d = self.head_dim
        inv = self.base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        ang = (pos[:, None].astype(np.float64) * inv[None, :]).astype(np.float32)
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def logprobs(self, ids, lin, aq, kq=None, vq=None):
        def mm(x, w):
            return (aq(x) if aq else x) @ w.T

        t = len(ids)
        x = self.t["token_embd.weight"][ids]
        pos = np.arange(t)
        mask = np.triu(np.full((t, t), -np.inf, np.float32), 1)
        group = self.heads // self.kv_heads
        for i in range(self.layers):
            L = lin[i]
            h = self.rms(x, self.t[f"blk.{i}.attn_norm.weight"])
            q = self.rope(mm(h, L["attn_q"]).reshape(t, self.heads, self.head_dim), pos)
            k = self.rope(mm(h, L["attn_k"]).reshape(t, self.kv_heads, self.head_dim), pos)
            v = mm(h, L["attn_v"]).reshape(t, self.kv_heads, self.head_dim)
            k, v = (kq(k) if kq else k), (vq(v) if vq else v)
            k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / np.float32(math.sqrt(self.head_dim)) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            a = np.einsum("hqk,khd->qhd", s / s.sum(-1, keepdims=True), v).reshape(t, self.hidden)
            x = x + mm(a, L["attn_output"])
            h = self.rms(x, self.t[f"blk.{i}.ffn_norm.weight"])
            g, u = mm(h, L["ffn_gate"]), mm(h, L["ffn_up"])
            x = x + mm(g / (1 + np.exp(-g)) * u, L["ffn_down"])
        z = self.rms(x, self.t["output_norm.weight"]) @ self.head.T
        z = z - z.max(-1, keepdims=True)
        return z - np.log(np.exp(z).sum(-1, keepdims=True))


def windows(n, window, stride):
    out, begin, scored_to = [], 0, 1
    while True:
        end = min(begin + window, n)
        out.append((begin, end, max(scored_to, begin + 1)))
        scored_to = end
        if end == n:
            return out
        begin += stride


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gguf", required=True)
    p.add_argument("--token-ids", required=True, help="JSON list of ids, or a list holding one list")
    p.add_argument("--window", type=int, default=512)
    p.add_argument("--stride", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--minivllm", help="the engine binary: print its CPU perplexity of the same ids")
    p.add_argument("--json", help="write the results here")
    a = p.parse_args()
    ids = json.load(open(a.token_ids))
    if ids and isinstance(ids[0], list):
        ids = ids[0]
    ids = np.asarray(ids[: a.max_tokens], np.int64)
    model = Model(a.gguf)
    wins = windows(len(ids), a.window, a.stride)
    results = {}
    ref_top = None
    for name in a.variants.split(","):
        wq, aq, kq, vq = VARIANTS[name]
        lin = model.linears(wq)
        nll, n, top = 0.0, 0, []
        for b, e, first in wins:
            lp = model.logprobs(ids[b:e], lin, aq, kq, vq)
            rows = np.arange(first - b - 1, e - b - 1)
            nll -= float(lp[rows, ids[first:e]].astype(np.float64).sum())
            n += len(rows)
            top.append(lp[rows].argmax(-1))
        top = np.concatenate(top)
        if ref_top is None:
            ref_top = top
        r = {"mean_nll": nll / n, "perplexity": math.exp(nll / n), "scored": n,
             "top1_agrees_with_first": float((top == ref_top).mean())}
        results[name] = r
        print(f"{name:18s} nll {r['mean_nll']:.5f}  ppl {r['perplexity']:.4f}  "
              f"top-1 = {a.variants.split(',')[0]}'s at {100 * r['top1_agrees_with_first']:.2f}% ({n} tokens)",
              flush=True)
    if a.minivllm:
        out = subprocess.run([a.minivllm, "perplexity", "--model", a.gguf, "--token-ids",
                              json.dumps(ids.tolist()), "--window", str(a.window), "--stride", str(a.stride),
                              "--json"], check=True, capture_output=True, text=True).stdout
        results["minivllm_cpu"] = json.loads(out)
        print(f"minivllm (CPU)     nll {results['minivllm_cpu']['mean_nll']:.5f}", flush=True)
    if a.json:
        json.dump({"gguf": a.gguf, "tokens": int(len(ids)), "window": a.window, "stride": a.stride,
                   "results": results}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
