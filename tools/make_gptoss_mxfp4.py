#!/usr/bin/env python3
"""gptoss-tiny with MXFP4 experts, as gpt-oss is published, and llama.cpp's GGUF of it: the MXFP4 checkpoint
and file of tests/golden/golden_test.cc, with Hugging Face goldens for both.

Usage (the venv of tools/requirements-goldens.txt; llama.cpp as tools/make_tiny_gguf.py takes it):
    python3 tools/make_gptoss_mxfp4.py --llama-cpp /path/to/llama.cpp tests/goldens/gptoss-tiny tests/goldens/gptoss-tiny-mxfp4

Reads tests/goldens/gptoss-tiny (tools/make_hf_goldens.py's bf16 checkpoint) and quantises each expert's
rows to MXFP4 as gpt-oss's checkpoints hold them: for every 32 weights of a row (gate_up_proj [E, 2I, H]
rows, gate and up interleaved; down_proj [E, H, I] rows) one E8M0 exponent, the smallest that puts the
largest magnitude within FP4 E2M1's 6, and each weight rounded to the nearest E2M1 value; *_blocks
[E, rows, cols / 32, 16] (two codes a byte, the first in the low nibble) and *_scales [E, rows, cols / 32].
llama.cpp's converter (its MXFP4 path: convert_hf_to_gguf.py's GptOssModel.repack_mxfp4) makes
OUT/gptoss-tiny-mxfp4.gguf from that checkpoint, with tools/make_tiny_gguf.py's placeholder vocabulary.

The reference: transformers' own MXFP4 decoding (transformers.integrations.mxfp4.convert_moe_packed_tensors)
of those blocks gives the experts in bf16 (exactly: an E2M1 value times a power of two), put back into
the checkpoint in place of its experts; transformers runs that model in float32 (make_hf_goldens.py's
reference, prompts and goldens format) into OUT/goldens.json. OUT also holds the MXFP4 checkpoint itself
(config.json with its quantization_config, model.safetensors with the *_blocks and *_scales).
"""
import argparse
import importlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers.integrations.mxfp4 import FP4_VALUES, convert_moe_packed_tensors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_goldens  # noqa: E402
import make_tiny_gguf  # noqa: E402

QUANTIZATION = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                     "model.embed_tokens", "lm_head"]}


def quantise(rows):
    """rows [..., cols] float -> (blocks uint8 [..., cols/32, 16], scales uint8 [..., cols/32])."""
    x = rows.float().numpy().astype(np.float64)
    groups = x.reshape(*x.shape[:-1], x.shape[-1] // 32, 32)
    amax = np.abs(groups).max(axis=-1)
    # The exponent e (scale 2^(e - 127)) that brings amax within 6, E2M1's largest value.
    e = np.where(amax > 0, np.ceil(np.log2(np.maximum(amax, 1e-30) / 6.0)), -127).astype(np.int64) + 127
    e = np.clip(e, 0, 254)
    scaled = groups / np.ldexp(1.0, (e - 127))[..., None]
    values = np.array(FP4_VALUES[:8])  # the magnitudes; codes 8-15 are their negatives
    idx = np.abs(np.abs(scaled)[..., None] - values).argmin(axis=-1)
    idx = idx + np.where((scaled < 0) & (idx > 0), 8, 0)
    codes = idx.astype(np.uint8)
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return torch.from_numpy(np.ascontiguousarray(blocks)), torch.from_numpy(np.ascontiguousarray(e.astype(np.uint8)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-cpp", required=True)
    parser.add_argument("src", help="tests/goldens/gptoss-tiny")
    parser.add_argument("out", help="tests/goldens/gptoss-tiny-mxfp4")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open(os.path.join(args.src, "config.json")) as f:
        config = json.load(f)
    sd = load_file(os.path.join(args.src, "model.safetensors"))
    packed, dequantised = {}, {}
    for name, t in sd.items():
        if name.endswith(".mlp.experts.gate_up_proj") or name.endswith(".mlp.experts.down_proj"):
            blocks, scales = quantise(t.transpose(1, 2))  # [E, rows (out), cols (in)]
            packed[name + "_blocks"], packed[name + "_scales"] = blocks, scales
            dequantised[name] = convert_moe_packed_tensors(blocks, scales, dtype=torch.bfloat16)
            assert dequantised[name].shape == t.shape, (name, dequantised[name].shape, t.shape)
        else:
            packed[name] = t
            dequantised[name] = t
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # The MXFP4 checkpoint, converted by llama.cpp.
        mx = os.path.join(tmp, "mxfp4")
        os.makedirs(mx)
        with open(os.path.join(mx, "config.json"), "w") as f:
            json.dump({**config, "quantization_config": QUANTIZATION}, f, indent=2)
        save_file(packed, os.path.join(mx, "model.safetensors"), metadata={"format": "pt"})
        for name in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(mx, name), args.out)
        sys.path.insert(0, os.path.abspath(args.llama_cpp))
        import convert_hf_to_gguf  # noqa: E402
        import gguf  # noqa: E402
        set_vocab, pieces = make_tiny_gguf.placeholder_vocab(config, gguf, config["model_type"])
        setattr(importlib.import_module("conversion.gpt_oss").GptOssModel, "set_vocab", set_vocab)
        with open(os.path.join(mx, "tokenizer.json"), "w") as f:
            json.dump({"model": {"vocab": {p: i for i, p in enumerate(pieces)}}, "added_tokens": []}, f)
        outfile = os.path.abspath(os.path.join(args.out, "gptoss-tiny-mxfp4.gguf"))
        sys.argv = ["convert_hf_to_gguf.py", mx, "--outtype", "bf16", "--outfile", outfile]
        convert_hf_to_gguf.main()
        # The reference: the same checkpoint with the experts as transformers decodes them.
        ref_dir = os.path.join(tmp, "reference")
        os.makedirs(ref_dir)
        shutil.copy(os.path.join(args.src, "config.json"), ref_dir)
        save_file(dequantised, os.path.join(ref_dir, "model.safetensors"), metadata={"format": "pt"})
        ref = make_hf_goldens.load_reference(ref_dir)
        prompts = make_hf_goldens.make_prompts(make_hf_goldens.SEED + 1, config["vocab_size"])
        make_hf_goldens.write_goldens("gptoss-tiny-mxfp4", ref, prompts, os.path.join(args.out, "goldens.json"))
    print(f"wrote {outfile} ({os.path.getsize(outfile)} bytes) and {args.out}/goldens.json")


if __name__ == "__main__":
    main()
