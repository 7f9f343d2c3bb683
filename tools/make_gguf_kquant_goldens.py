#!/usr/bin/env python3
"""Tiny random Llama, Qwen3 and Qwen2 GGUFs quantised by llama.cpp's llama-quantize (Llama: Q4_K_M and
Q6_K; the Qwens: Q4_K_M), and float64 greedy references for them computed from gguf-py's
dequantisation: the goldens of tests/golden/gguf_kquant_test.cc.

Usage (gguf==0.19.0 and numpy from tools/requirements-goldens.txt; llama-quantize built from the
llama.cpp that the llama-cpp-python sdist vendors, see docs/PERFORMANCE.md):
    python3 tools/make_gguf_kquant_goldens.py --quantize /path/to/llama-quantize tests/goldens/gguf-tiny-kquant

Writes OUT/<arch>-<type>.gguf and OUT/goldens.json. Each f32 source
(hidden 256, the width of one K-quant super-block; 2 layers; 8 query / 2 KV heads of 64; MLP 512,
so that every row-parallel input splits into whole super-blocks over 2 ranks;
SentencePiece vocabulary of 512 borrowed from stories260K.gguf; Qwen3 with q/k norms and tied
embeddings, Qwen2 with q/k/v biases) is made in a temporary folder from a fixed seed. The reference reads each quantised file back with gguf-py, dequantises
every tensor (gguf.quants.dequantize: numpy, independent of ggml and of minivllm), and runs the
forward pass in float64 on the GGUF tensors as stored: Llama's q/k rows in GGUF's rope order,
rotated in adjacent pairs (llama.cpp's LLAMA_ROPE_TYPE_NORM), while minivllm unpermutes them to
Hugging Face's order, so the check covers that too; Qwen's rotated in halves (NEOX). Greedy decoding recomputes the whole sequence at each
step; greedy_margins is the top-1 minus top-2 logit of each step.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORIES = os.path.join(ROOT, "..", "shared", "models", "stories260K", "stories260K.gguf")
SEED = 4747
HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 256, 512, 2, 8, 2, 64, 512
EPS = 1e-5
PROMPTS = [[1], [1, 403, 407, 261, 378], [1, 9, 80, 300, 200, 17, 5, 444]]
MAX_NEW_TOKENS = 12


# (architecture, theta, tied embeddings, the llama-quantize types made)
MODELS = [("llama", 10000.0, False, ("Q4_K_M", "Q6_K")), ("qwen3", 1e6, True, ("Q4_K_M",)),
          ("qwen2", 1e6, False, ("Q4_K_M",))]


def make_f32(path, arch, theta, tied):
    rng = np.random.default_rng(SEED + [m[0] for m in MODELS].index(arch))
    stories = GGUFReader(STORIES)
    w = GGUFWriter(path, arch)
    w.add_name(f"{arch}-tiny-kquant")
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_block_count(LAYERS)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(EPS)
    w.add_file_type(0)
    f = stories.fields
    w.add_tokenizer_model(bytes(f["tokenizer.ggml.model"].parts[-1]).decode())
    w.add_token_list([bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data])
    w.add_token_scores([float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data])
    w.add_token_types([int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data])
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id), ("unknown", w.add_unk_token_id)):
        add(int(f[f"tokenizer.ggml.{key}_token_id"].parts[-1][0]))

    def mat(rows, cols, std):  # numpy shape [rows, cols] = GGUF ne [cols, rows]
        return (rng.standard_normal((rows, cols)) * std).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    # Projections std 3/sqrt(fan_in), embeddings std 1 (as tools/make_hf_goldens.py: varied continuations).
    w.add_tensor("token_embd.weight", mat(VOCAB, HIDDEN, 1.0))
    for i in range(LAYERS):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(HIDDEN))
        w.add_tensor(p + "attn_q.weight", mat(HEADS * HEAD_DIM, HIDDEN, 1.5 / HIDDEN ** 0.5))
        w.add_tensor(p + "attn_k.weight", mat(KV_HEADS * HEAD_DIM, HIDDEN, 1.5 / HIDDEN ** 0.5))
        w.add_tensor(p + "attn_v.weight", mat(KV_HEADS * HEAD_DIM, HIDDEN, 3.0 / HIDDEN ** 0.5))
        if arch == "qwen3":
            w.add_tensor(p + "attn_q_norm.weight", norm(HEAD_DIM))
            w.add_tensor(p + "attn_k_norm.weight", norm(HEAD_DIM))
        if arch == "qwen2":
            for name, rows in (("q", HEADS), ("k", KV_HEADS), ("v", KV_HEADS)):
                w.add_tensor(p + f"attn_{name}.bias", (0.5 * rng.standard_normal(rows * HEAD_DIM)).astype(np.float32))
        w.add_tensor(p + "attn_output.weight", mat(HIDDEN, HEADS * HEAD_DIM, 3.0 / HIDDEN ** 0.5))
        w.add_tensor(p + "ffn_norm.weight", norm(HIDDEN))
        w.add_tensor(p + "ffn_gate.weight", mat(FFN, HIDDEN, 3.0 / HIDDEN ** 0.5))
        w.add_tensor(p + "ffn_up.weight", mat(FFN, HIDDEN, 3.0 / HIDDEN ** 0.5))
        w.add_tensor(p + "ffn_down.weight", mat(HIDDEN, FFN, 3.0 / FFN ** 0.5))
    w.add_tensor("output_norm.weight", norm(HIDDEN))
    if not tied:
        w.add_tensor("output.weight", mat(VOCAB, HIDDEN, 3.0 / HIDDEN ** 0.5))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def load_f64(path):
    """The file's tensors dequantised to float64 (numpy order: rows first), its tensor types, and the
    Llama hyperparameters the forward pass needs."""
    r = GGUFReader(path)
    out, types = {}, {}
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]
        out[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
        types[t.name] = t.tensor_type.name

    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def meta(key, default=None):
        f = r.fields.get(arch + "." + key)
        return default if f is None else f.parts[-1][0].item()

    cfg = {"arch": arch, "layers": meta("block_count"), "heads": meta("attention.head_count"),
           "kv_heads": meta("attention.head_count_kv"), "eps": meta("attention.layer_norm_rms_epsilon"),
           "theta": meta("rope.freq_base", 10000.0)}
    cfg["head_dim"] = out["blk.0.attn_q.weight"].shape[0] // cfg["heads"]
    if "output.weight" not in out:  # tied embeddings
        out["output.weight"] = out["token_embd.weight"]
    return out, types, cfg


def rms_norm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope_pairs(x, positions, theta):  # x [T, heads, d]: pairs (2i, 2i+1) rotated by pos * theta^(-2i/d)
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = positions[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


def rope_halves(x, positions, theta):  # Qwen's GGUF rows: element i rotates with i + d/2 (NEOX)
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = positions[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def forward(w, cfg, ids):
    """Logits of the last position of ids, in float64."""
    t, nh, nkv, hd, eps = len(ids), cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["eps"]
    x = w["token_embd.weight"][ids]
    pos = np.arange(t, dtype=np.float64)
    mask = np.triu(np.full((t, t), -np.inf), 1)
    for i in range(cfg["layers"]):
        p = f"blk.{i}."
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)

        def proj(name, heads):
            y = h @ w[p + f"attn_{name}.weight"].T
            if p + f"attn_{name}.bias" in w:
                y = y + w[p + f"attn_{name}.bias"]
            y = y.reshape(t, heads, hd)
            if p + f"attn_{name}_norm.weight" in w:
                y = rms_norm(y, w[p + f"attn_{name}_norm.weight"], eps)
            return y

        rope = rope_pairs if cfg["arch"] == "llama" else rope_halves
        q, k, v = rope(proj("q", nh), pos, cfg["theta"]), rope(proj("k", nkv), pos, cfg["theta"]), proj("v", nkv)
        att = np.empty((t, nh, hd))
        for head in range(nh):
            kv = head // (nh // nkv)
            s = q[:, head] @ k[:, kv].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            att[:, head] = (s / s.sum(axis=-1, keepdims=True)) @ v[:, kv]
        x = x + att.reshape(t, -1) @ w[p + "attn_output.weight"].T
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        g = h @ w[p + "ffn_gate.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
    return rms_norm(x[-1], w["output_norm.weight"], eps) @ w["output.weight"].T


def greedy(w, cfg, prompt, max_new_tokens):
    ids, margins = list(prompt), []
    for _ in range(max_new_tokens):
        logits = forward(w, cfg, ids)
        top2 = np.argsort(logits)[-2:]
        margins.append(round(float(logits[top2[1]] - logits[top2[0]]), 6))
        ids.append(int(top2[1]))
    return ids[len(prompt):], margins


def file_goldens(path, prompts, max_new_tokens):
    w, types, cfg = load_f64(path)
    cases = []
    for prompt in prompts:
        ids, margins = greedy(w, cfg, prompt, max_new_tokens)
        cases.append({"prompt_ids": prompt, "greedy_ids": ids, "greedy_margins": margins})
        print(os.path.basename(path), prompt[:8], "->", ids, "min margin", min(margins), file=sys.stderr)
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    return {"sha256": sha, "bytes": os.path.getsize(path), "tensor_types": sorted(set(types.values())), "cases": cases}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--quantize", help="llama.cpp's llama-quantize")
    ap.add_argument("--reference", help="instead: goldens of this GGUF file (any Llama-architecture one)")
    ap.add_argument("--prompt", action="append", default=[], help="with --reference: token ids as a JSON list")
    ap.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    doc = {"command": "python3 tools/make_gguf_kquant_goldens.py --quantize llama-quantize " +
                      os.path.relpath(args.out, ROOT),
           "gguf_py_version": "0.19.0",
           "numpy_version": np.__version__, "max_new_tokens": args.max_new_tokens, "files": {}}
    if args.reference:  # goldens of an existing file (e.g. SmolLM2 requantised), prompts as JSON lists of ids
        doc["files"][os.path.basename(args.reference)] = file_goldens(
            args.reference, [json.loads(p) for p in args.prompt], args.max_new_tokens)
        doc["command"] = " ".join(["python3", "tools/make_gguf_kquant_goldens.py"] + sys.argv[1:])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for arch, theta, tied, ftypes in MODELS:
                src = os.path.join(tmp, f"{arch}-f32.gguf")
                make_f32(src, arch, theta, tied)
                for ftype in ftypes:
                    dst = os.path.join(args.out, f"{arch}-{ftype}.gguf")
                    subprocess.run([args.quantize, src, dst, ftype], check=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                    doc["files"][os.path.basename(dst)] = file_goldens(dst, PROMPTS, MAX_NEW_TOKENS)
    with open(os.path.join(args.out, "goldens.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
