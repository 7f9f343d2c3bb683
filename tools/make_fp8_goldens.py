#!/usr/bin/env python3
"""Tiny FP8 checkpoints, one per weight format minivllm reads, made from the committed bf16 ones
(tools/make_hf_goldens.py), plus Hugging Face transformers reference outputs for them.

Usage:
    python3 tools/make_fp8_goldens.py tests/goldens

Writes OUTDIR/<name>/ (config.json with its quantization_config, generation_config.json,
model.safetensors, goldens.json) for
    qwen3-tiny-fp8-block    from qwen3-tiny. quant_method "fp8" (Qwen3-*-FP8, DeepSeek-V3): e4m3
                            weights, an fp32 weight_scale_inv per 32x32 block (128x128 in the real
                            ones; 32 so that world_size 2 cuts every weight on block boundaries),
                            dynamic activations
    qwen3-tiny-fp8-channel  from qwen3-tiny. compressed-tensors as llm-compressor's FP8_DYNAMIC scheme
                            writes it: e4m3 weights, a bf16 weight_scale [out, 1] per output channel,
                            dynamic per-token activations, lm_head ignored (kept bf16)
    llama3-tiny-fp8-tensor  from llama3-tiny. compressed-tensors as llm-compressor's FP8 scheme: one fp32
                            weight_scale [1] per tensor and a static input_scale [1]
and, for the variants with dynamic per-token activations (qwen3-tiny-fp8-channel,
qwen3-tiny-hd64-fp8-channel), OUTDIR/<name>/goldens_w8a8.json: the same reference with every
quantized linear's input rounded through e4m3 per token (scale amax / 448, common/fp8.h's formula),
which is what the checkpoint declares and what the GPU's FP8 GEMM computes (W8A8); and
OUTDIR/llama3-tiny/goldens_fp8_online.json, the reference for llama3-tiny loaded with
`quantization: fp8`: each linear weight's rows rounded through e4m3 with the scale amax / 448, as
src/loader/online_fp8.cc (common/fp8.h) computes them, op for op in fp32.

Only the decoder layers' q/k/v/o and gate/up/down projections are quantized (embeddings, norms and
the LM head stay bf16), as in the published checkpoints. The reference is make_hf_goldens.py's
(transformers in float32, eager attention, greedy with the whole sequence recomputed, eos
ignored) on the bf16 model with every quantized weight replaced by its dequantized values (e4m3
value x scale, in fp32): what minivllm's loader serves. Activations are not quantized (a static
input_scale is not applied), as on minivllm's CPU backend, the reference for the GPU's FP8 kernels.

Seeded and deterministic; versions: tools/requirements-goldens.txt.
"""
import argparse
import json
import os
import re
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_goldens as hf  # noqa: E402  (the bf16 goldens' prompts, greedy loop and reference)

COMMAND = "python3 tools/make_fp8_goldens.py tests/goldens"
E4M3_MAX = 448.0
LINEAR = re.compile(r"model\.layers\.\d+\.(self_attn|mlp)\.\w+_proj\.weight$")
BLOCK = 32
# Any positive value: the CPU computes activations in fp32 and never applies it; the GPU's static
# FP8 path will. One value for every layer keeps the checkpoint deterministic.
STATIC_INPUT_SCALE = 8.0 / E4M3_MAX


def to_e4m3(x):
    """fp32 -> e4m3 codes, rounded to nearest even, saturated to +-448 (no NaN from overflow)."""
    return x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def expand(scale, rows, cols, block_rows, block_cols):
    """A grid of scales [ceil(rows/br), ceil(cols/bc)] -> one per weight element [rows, cols]."""
    return scale.repeat_interleave(block_rows, 0).repeat_interleave(block_cols, 1)[:rows, :cols]


def quantize_block(w, block=BLOCK):
    """quant_method fp8: fp32 weight_scale_inv (a multiplier, despite its name) per block x block."""
    rows, cols = w.shape
    gr, gc = -(-rows // block), -(-cols // block)
    padded = torch.zeros(gr * block, gc * block, device=w.device)
    padded[:rows, :cols] = w.abs()
    amax = padded.reshape(gr, block, gc, block).amax(dim=(1, 3))
    scale = (amax / E4M3_MAX).clamp_min(1e-12)
    codes = to_e4m3(w / expand(scale, rows, cols, block, block))
    return codes, {"weight_scale_inv": scale.contiguous()}, codes.float() * expand(scale, rows, cols, block, block)


def quantize_channel(w):
    """compressed-tensors strategy channel: a bf16 weight_scale [out, 1], the model's dtype."""
    scale = (w.abs().amax(dim=1, keepdim=True) / E4M3_MAX).clamp_min(1e-12).to(torch.bfloat16)
    codes = to_e4m3(w / scale.float())
    return codes, {"weight_scale": scale.contiguous()}, codes.float() * scale.float()


def quantize_tensor(w):
    """compressed-tensors strategy tensor: one fp32 weight_scale [1], plus a static input_scale [1]."""
    scale = (w.abs().amax() / E4M3_MAX).clamp_min(1e-12).reshape(1)
    codes = to_e4m3(w / scale)
    extra = {"weight_scale": scale.contiguous(), "input_scale": torch.tensor([STATIC_INPUT_SCALE])}
    return codes, extra, codes.float() * scale


def round_rows_online(w):
    """src/loader/online_fp8.cc: per row, e4m3(w * (448 / amax)) * (amax / 448), in fp32 op for op.

    `448 / amax` is written as a tensor division: torch computes `scalar / tensor` as
    reciprocal(tensor) * scalar, which rounds twice.
    """
    amax = w.abs().amax(dim=1, keepdim=True)
    mul = torch.where(amax > 0, torch.tensor(E4M3_MAX) / amax, torch.zeros_like(amax))
    return to_e4m3(w * mul).float() * (amax / E4M3_MAX)


def ct_args(strategy, dynamic):
    """compressed-tensors QuantizationArgs for FP8 (llm-compressor's presets)."""
    return {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None, "strategy": strategy,
            "block_structure": None, "dynamic": dynamic, "actorder": None, "observer": None if dynamic else "minmax",
            "observer_kwargs": {}}


def ct_config(weight_strategy, input_strategy, input_dynamic):
    return {
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": ct_args(weight_strategy, False),
            "input_activations": ct_args(input_strategy, input_dynamic),
            "output_activations": None,
            "format": "float-quantized",
        }},
        "format": "float-quantized",
        "global_compression_ratio": None,
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
    }


# name -> (bf16 source, quantizer, quantization_config)
VARIANTS = {
    "qwen3-tiny-fp8-block": ("qwen3-tiny", quantize_block,
                             {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                              "weight_block_size": [BLOCK, BLOCK]}),
    "qwen3-tiny-fp8-channel": ("qwen3-tiny", quantize_channel, ct_config("channel", "token", True)),
    "llama3-tiny-fp8-tensor": ("llama3-tiny", quantize_tensor, ct_config("tensor", "tensor", False)),
}
# Made on request only (--models), on the GPU machine, from make_hf_goldens.py's qwen3-tiny-hd64
# (head_dim 64: the CUDA attention kernels' smallest): the GPU's FP8 checks (tests/cuda).
GPU_VARIANTS = {
    "qwen3-tiny-hd64-fp8-block": ("qwen3-tiny-hd64", quantize_block, VARIANTS["qwen3-tiny-fp8-block"][2]),
    "qwen3-tiny-hd64-fp8-channel": ("qwen3-tiny-hd64", quantize_channel, ct_config("channel", "token", True)),
}
ONLINE_SOURCE = "llama3-tiny"


def reference_cases(model, vocab, label):
    cases = []
    for prompt in hf.make_prompts(hf.SEED + 1, vocab):
        toks, margins, logits = hf.greedy(model, prompt, hf.MAX_NEW_TOKENS)
        cached = hf.hf_generate(model, prompt, hf.MAX_NEW_TOKENS)
        if cached != toks:
            print(f"WARNING: {label}: generate() with KV cache differs from full recompute "
                  f"for a {len(prompt)}-token prompt: {cached} vs {toks}", file=sys.stderr)
        cases.append({"prompt_ids": prompt, "greedy_ids": toks, "max_new_tokens": hf.MAX_NEW_TOKENS,
                      "greedy_margins": [hf.r6(m) for m in margins],
                      "last_logits": [hf.r6(v) for v in logits.tolist()]})
        print(f"{label}: prompt {len(prompt):3d} tokens -> {toks}  min margin {min(margins):.3g}")
    return cases


def write_goldens(path, name, reference, cases):
    doc = {
        "model": name,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "command": COMMAND,
        "reference": reference,
        "eos_ignored": True,
        "seed": hf.SEED,
        "cases": cases,
    }
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


def fake_quantize_per_token(x, group=None):
    """Each row of x (each run of `group` values of a row, when given) rounded through e4m3 with
    scale amax / 448 (zero groups stay zero), in fp32."""
    shape = x.shape
    if group:
        x = x.reshape(*shape[:-1], shape[-1] // group, group)
    amax = x.abs().amax(-1, keepdim=True)
    mul = torch.where(amax > 0, E4M3_MAX / amax, torch.zeros_like(amax))
    return (to_e4m3(x * mul).float() * (amax / E4M3_MAX)).reshape(shape)


def quantize_linear_inputs(model, group=None):
    """Hooks every quantized projection (LINEAR) to see its input e4m3-rounded, per token or per
    `group` values of a token (quant_method fp8's dynamic activations: transformers' FP8Linear
    quantizes its input in groups of weight_block_size[1] before its W8A8 GEMM)."""
    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and LINEAR.match(name + ".weight"):
            hooks.append(module.register_forward_pre_hook(
                lambda _m, args: (fake_quantize_per_token(args[0], group),)))
    return hooks


def replace_weights(model, dequantized):
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, w in dequantized.items():
            params[name].copy_(w)


def make_variant(name, goldens_dir, outdir):
    source, quantize, qconfig = VARIANTS[name]
    src_dir = os.path.join(goldens_dir, source)
    os.makedirs(outdir, exist_ok=True)
    stored = load_file(os.path.join(src_dir, "model.safetensors"))
    tensors, dequantized = {}, {}
    for tname, t in stored.items():
        if not LINEAR.match(tname):
            tensors[tname] = t
            continue
        codes, scales, deq = quantize(t.float())
        tensors[tname] = codes.contiguous()
        base = tname[: -len("weight")]
        for suffix, s in scales.items():
            tensors[base + suffix] = s
        dequantized[tname] = deq
    save_file(tensors, os.path.join(outdir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(src_dir, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = qconfig
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    shutil.copy(os.path.join(src_dir, "generation_config.json"), outdir)

    model = hf.load_reference(src_dir)
    replace_weights(model, dequantized)
    cases = reference_cases(model, config["vocab_size"], name)
    write_goldens(os.path.join(outdir, "goldens.json"), name,
                  f"transformers AutoModelForCausalLM, float32, attn_implementation=eager, weights = {source}'s "
                  "bf16 model.safetensors with each quantized linear weight replaced by its dequantized values "
                  "(e4m3 x scale in fp32), activations unquantized; greedy = argmax with the full sequence "
                  "recomputed each step, eos ignored", cases)
    if qconfig.get("config_groups", {}).get("group_0", {}).get("input_activations", {}).get("strategy") == "token":
        quantize_linear_inputs(model)
        cases = reference_cases(model, config["vocab_size"], name + " W8A8")
        write_goldens(os.path.join(outdir, "goldens_w8a8.json"), name,
                      f"as goldens.json, and each quantized linear's input rounded through e4m3 per token "
                      "(scale amax / 448), as the checkpoint's dynamic per-token activations declare (W8A8)", cases)


def make_online(goldens_dir):
    src_dir = os.path.join(goldens_dir, ONLINE_SOURCE)
    model = hf.load_reference(src_dir)
    rounded = {n: round_rows_online(p.detach().clone()) for n, p in model.named_parameters() if LINEAR.match(n)}
    replace_weights(model, rounded)
    label = ONLINE_SOURCE + " --quantization fp8"
    cases = reference_cases(model, model.config.vocab_size, label)
    write_goldens(os.path.join(src_dir, "goldens_fp8_online.json"), label,
                  f"transformers AutoModelForCausalLM, float32, attn_implementation=eager, weights = {ONLINE_SOURCE}'s "
                  "bf16 model.safetensors with each linear weight's rows rounded through e4m3 with scale amax / 448 "
                  "(online quantization), activations unquantized; greedy = argmax with the full sequence "
                  "recomputed each step, eos ignored", cases)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", help="tests/goldens: holds the bf16 sources and receives the FP8 variants")
    parser.add_argument("--models", nargs="*", default=list(VARIANTS) + ["online"],
                        choices=list(VARIANTS) + list(GPU_VARIANTS) + ["online"])
    args = parser.parse_args()
    VARIANTS.update(GPU_VARIANTS)
    torch.set_num_threads(1)
    torch.manual_seed(hf.SEED)
    for name in args.models:
        if name == "online":
            make_online(args.outdir)
        else:
            make_variant(name, args.outdir, os.path.join(args.outdir, name))


if __name__ == "__main__":
    main()
