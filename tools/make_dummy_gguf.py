#!/usr/bin/env python3
"""Writes a bf16 GGUF of a published Llama config's shape with seeded random weights, for speed
figures on models we do not download (issue 47: Llama-3.1-8B quantized with llama-quantize, then
minivllm against llama.cpp on the same file).

Usage (numpy, and gguf-py from llama.cpp's source tree):
    python3 tools/make_dummy_gguf.py --llama-cpp /path/to/llama.cpp \\
        ../shared/models/configs/llama-3.1-8b-instruct.json /tmp/llama8b.bf16.gguf
    llama-quantize /tmp/llama8b.bf16.gguf /tmp/llama8b.Q4_K_M.gguf Q4_K_M

Decode speed does not depend on the values, so every layer shares one set of random matrices
(llama-quantize still quantizes each tensor on its own): the file is written in about the time its
bytes take, not the time 8 billion random numbers take. Values are N(0, 0.02), norms 1. The
vocabulary is make_tiny_gguf.py's placeholder SentencePiece pieces. Configs of model_type llama,
mistral (written as llama.cpp's converter writes it, "llama"), phi3 (bf16 only: fused attn_qkv
and ffn_up, rope.dimension_count for the partial rotary, longrope's factor tensors) and
gemma3_text (bf16 only: the four norms a layer and the q/k norms, the sliding layers' rope base
and window): the GPU check that each family's GGUF generates there as on the CPU (issue 46).

--type q4_k_m writes random blocks directly, in the types llama-quantize's Q4_K_M gives each tensor
(Q6_K for the output and for attn_v and ffn_down in its "more bits" layers, Q4_K elsewhere), with
small block scales: no llama.cpp build needed, for speed figures and profiles only (its outputs are
noise). The issue's figures use a file that llama-quantize made.
"""
import argparse
import json
import math
import os
import sys

import numpy as np


def bf16_bits(a):
    """float32 -> bf16 bit patterns (round to nearest even), as uint16."""
    u = a.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def random_bf16(rng, rows, cols, chunk_rows=8192):
    out = np.empty((rows, cols), dtype=np.uint16)
    for r in range(0, rows, chunk_rows):
        n = min(chunk_rows, rows - r)
        out[r:r + n] = bf16_bits(rng.standard_normal((n, cols), dtype=np.float32) * 0.02)
    return out


def random_blocks(rng, rows, cols, kind):
    """Random Q4_K / Q6_K rows (ggml's block layouts) with the f16 block scale(s) set to 2^-10."""
    block_bytes = {"q4_k": 144, "q6_k": 210}[kind]
    blocks = rng.integers(0, 256, size=(rows, cols // 256, block_bytes), dtype=np.uint8)
    d = np.frombuffer(np.float16(2.0 ** -10).tobytes(), dtype=np.uint8)
    if kind == "q4_k":  # d, dmin, scales[12], qs[128]
        blocks[:, :, 0:2] = d
        blocks[:, :, 2:4] = d
    else:  # ql[128], qh[64], scales[16], d
        blocks[:, :, 208:210] = d
    return blocks.reshape(rows, -1)


def more_bits(i, n):
    """llama-quantize's use_more_bits: the layers Q4_K_M gives Q6_K for attn_v and ffn_down."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="a Hugging Face config.json (model_type llama, mistral or phi3)")
    p.add_argument("out", help="the .gguf to write")
    p.add_argument("--llama-cpp", required=True, help="llama.cpp source tree (its gguf-py)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--type", choices=["bf16", "q4_k_m"], default="bf16")
    a = p.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(a.llama_cpp), "gguf-py"))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gguf  # noqa: E402
    from make_tiny_gguf import placeholder_vocab  # noqa: E402

    with open(a.config) as f:
        c = json.load(f)
    model_type = c.get("model_type")
    if model_type not in ("llama", "mistral", "phi3", "gemma3_text"):
        sys.exit(f"make_dummy_gguf: model_type {model_type!r} is not supported (llama, mistral, phi3, gemma3_text)")
    phi3, gemma3 = model_type == "phi3", model_type == "gemma3_text"
    if (phi3 or gemma3) and a.type != "bf16":
        sys.exit("make_dummy_gguf: --type q4_k_m is written for llama shapes only")
    hidden, inter, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    heads, kv_heads, vocab = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"]), \
        c["vocab_size"]
    head_dim = c.get("head_dim", hidden // heads)
    rope = c.get("rope_parameters") or c.get("rope_scaling") or {}  # transformers 5, or 4's spelling
    rotary_dim = int(head_dim * c.get("partial_rotary_factor", rope.get("partial_rotary_factor", 1.0)))

    # llama.cpp's converter writes Mistral as "llama"; Phi-3 / Phi-4-mini as "phi3", whose q/k/v and
    # gate/up stay fused (attn_qkv; ffn_up holds gate then up) and whose longrope factors are tensors.
    arch = "phi3" if phi3 else "gemma3" if gemma3 else "llama"
    w = gguf.GGUFWriter(a.out, arch)
    w.add_name(os.path.basename(a.config).removesuffix(".json") + "-dummy")
    w.add_context_length(c.get("max_position_embeddings", 8192))
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(inter)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(rotary_dim)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    if gemma3:  # global and sliding layers' bases: transformers 4's keys, or 5's rope_parameters per layer type
        full, local = rope.get("full_attention", {}), rope.get("sliding_attention", {})
        w.add_rope_freq_base(float(c.get("rope_theta", full.get("rope_theta", 1000000.0))))
        w.add_float32(f"{arch}.rope.freq_base_swa", float(c.get("rope_local_base_freq", local.get("rope_theta", 10000.0))))
        w.add_sliding_window(c["sliding_window"])
    else:
        w.add_rope_freq_base(float(c.get("rope_theta", rope.get("rope_theta", 10000.0))))
    longrope = phi3 and rope.get("rope_type", rope.get("type")) == "longrope"
    if longrope:  # the switch and the cos/sin scale as llama.cpp's converter writes them (HF's formula)
        orig = c.get("original_max_position_embeddings", rope.get("original_max_position_embeddings"))
        scale = c["max_position_embeddings"] / orig
        w.add_rope_scaling_orig_ctx_len(orig)
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1 else 1.0)
    w.add_layer_norm_rms_eps(float(c.get("rms_norm_eps", 1e-6 if gemma3 else 1e-5)))
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if a.type == "bf16" else gguf.LlamaFileType.MOSTLY_Q4_K_M)

    class Holder:
        gguf_writer = w
    set_vocab, _ = placeholder_vocab(c, gguf, model_type)
    set_vocab(Holder())

    rng = np.random.default_rng(a.seed)
    bf16 = gguf.GGMLQuantizationType.BF16
    ones = np.ones(hidden, dtype=np.float32)
    shared = {  # name -> (rows, cols): one random matrix per shape, used by every layer
        "attn_q": (heads * head_dim, hidden), "attn_k": (kv_heads * head_dim, hidden),
        "attn_v": (kv_heads * head_dim, hidden), "attn_output": (hidden, heads * head_dim),
        "ffn_gate": (inter, hidden), "ffn_up": (inter, hidden), "ffn_down": (hidden, inter)}
    if phi3:
        shared = {"attn_qkv": ((heads + 2 * kv_heads) * head_dim, hidden), "attn_output": (hidden, heads * head_dim),
                  "ffn_up": (2 * inter, hidden), "ffn_down": (hidden, inter)}
        if longrope:
            w.add_tensor("rope_factors_long.weight", np.asarray(rope["long_factor"], dtype=np.float32))
            w.add_tensor("rope_factors_short.weight", np.asarray(rope["short_factor"], dtype=np.float32))
    if a.type == "bf16":
        mats = {k: random_bf16(rng, *s) for k, s in shared.items()}
        w.add_tensor("token_embd.weight", random_bf16(rng, vocab, hidden), raw_dtype=bf16)
        output = random_bf16(rng, vocab, hidden)
        head_ones = np.ones(head_dim, dtype=np.float32)
        for i in range(layers):
            w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
            w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
            if gemma3:  # stored as the converter stores them, 1 + Gemma's weight (1: a weight of 0)
                for n in ("post_attention_norm", "post_ffw_norm"):
                    w.add_tensor(f"blk.{i}.{n}.weight", ones)
                w.add_tensor(f"blk.{i}.attn_q_norm.weight", head_ones)
                w.add_tensor(f"blk.{i}.attn_k_norm.weight", head_ones)
            for k, m in mats.items():
                w.add_tensor(f"blk.{i}.{k}.weight", m, raw_dtype=bf16)
    else:
        q4k, q6k = gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K
        mats = {(k, kind): random_blocks(rng, *s, kind) for k, s in shared.items() for kind in ("q4_k", "q6_k")
                if kind == "q4_k" or k in ("attn_v", "ffn_down")}
        w.add_tensor("token_embd.weight", random_blocks(rng, vocab, hidden, "q4_k"), raw_dtype=q4k)
        output = random_blocks(rng, vocab, hidden, "q6_k")
        for i in range(layers):
            w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
            w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
            for k in shared:
                kind = "q6_k" if k in ("attn_v", "ffn_down") and more_bits(i, layers) else "q4_k"
                w.add_tensor(f"blk.{i}.{k}.weight", mats[(k, kind)], raw_dtype=q6k if kind == "q6_k" else q4k)
    w.add_tensor("output_norm.weight", ones)
    if not c.get("tie_word_embeddings", False):
        w.add_tensor("output.weight", output, raw_dtype=bf16 if a.type == "bf16" else gguf.GGMLQuantizationType.Q6_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes)")


if __name__ == "__main__":
    main()
