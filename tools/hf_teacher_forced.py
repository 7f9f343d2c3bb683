#!/usr/bin/env python3
"""Random-weight checkpoint of a real architecture, plus transformers' teacher-forced reference.

Usage (GPU machine with torch + transformers, no network needed):
    python3 tools/hf_teacher_forced.py --config /work/shared/models/qwen3-0.6b \\
        --out /tmp/tf-qwen3 --num-seqs 8 --seq-len 512 --seed 0
    # a quick CPU check: 2 layers, short sequences
    python3 tools/hf_teacher_forced.py --config /work/shared/models/qwen3-0.6b/config.json \\
        --out /tmp/tf-small --num-seqs 2 --seq-len 16 --override-layers 2 --device cpu

(Verified there on an H100 with the full Qwen3-0.6B config, 4x512 tokens: 16 s to build, 2 s of
reference. shared/ may not be on the device machine: copy the config.json over first.)

--config is a config.json or the folder holding it (its generation_config.json is copied when
present). Writes:
    OUT/model/config.json             the real config as it is (num_hidden_layers replaced when
                                      --override-layers is given)
    OUT/model/generation_config.json  copied from beside the config, when there is one
    OUT/model/model.safetensors       random bf16 weights; lm_head.weight is stored for Qwen3 (as
                                      Qwen3-0.6B stores it although tied) and for untied models, not
                                      for tied Llama (as Llama-3.2-1B)
    OUT/reference.json                metadata, "sequences" [N][L] token ids, "argmax" [N][L] (the
                                      next token predicted at each position), "margin" [N][L]
                                      (top-1 minus top-2 logit, 4 significant digits: where it is
                                      tiny, a bf16 engine may pick the other token), "last_top"
                                      (top-16 ids and logits at each sequence's last position)
    OUT/top1_logits.f32               [N, L] float32 little-endian: the top-1 logit at each position
    OUT/last_logits.f32               [N, vocab] float32 little-endian: all logits at the last
                                      position of each sequence (binary: 151,936 floats per row
                                      would make the JSON tens of MB)

The reference is transformers' AutoModelForCausalLM in float32 (TF32 off), eager attention,
loading the saved bf16 weights (upcast), on cuda when available, else cpu. A config with
quantization_config quant_method "fp8" (Qwen3-8B-FP8: weight_block_size 128 x 128) gets an FP8
checkpoint: each decoder projection stored as e4m3 codes plus an fp32 weight_scale_inv per block,
and the reference computes on the dequantized weights with unquantized activations (--fp8-activations
dynamic: rounded through e4m3 per 128 values of a token, as transformers' FP8Linear does). One forward pass per
batch of sequences, no KV cache: position t's logits predict token t+1.

Weights (--init scaled, the default) come from one seeded generator in parameter-name order:
embeddings N(0, (4/sqrt(hidden))^2) so that logits have std ~4 whatever the width; projections
N(0, 1/fan_in), q/k projections N(0, qk_gain^2/fan_in) (--qk-gain, default 1.0); norm weights U(0.5, 1.5) so that a mixed-up
norm is seen. --init hf keeps transformers' own init (std = initializer_range, 0.02 for the real
configs: logits of std < 1, more near-ties).
"""
import argparse
import json
import os
import random
import shutil
import time

import numpy as np
import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM

TOP_K = 16


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="config.json, or the folder that holds it")
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--num-seqs", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--override-layers", type=int, default=None, help="keep only this many layers")
    p.add_argument("--init", choices=["scaled", "hf"], default="scaled")
    # 1.5 sharpens attention until the random network is chaotic: transformers' own bf16 run then
    # disagrees with its fp32 run on 19% (Llama-3.2-1B) of positions; 1.0 is conditioned more like
    # a trained model (HF bf16 vs fp32: ~95-97%).
    p.add_argument("--qk-gain", type=float, default=1.0, help="std multiplier of q_proj/k_proj init")
    # The output projections (o_proj, down_proj) write into the residual stream; at 1.0 every
    # sublayer's output is ~8x the embedding's scale, so the stream is a chaotic sum of them.
    p.add_argument("--out-gain", type=float, default=1.0, help="std multiplier of o_proj/down_proj init")
    # Gemma multiplies the embedding by sqrt(hidden): at 1.0 its tied head then mostly predicts the
    # input token itself (every margin huge, a check that can hardly fail); 1/sqrt(hidden) undoes it.
    p.add_argument("--embed-gain", type=float, default=1.0, help="std multiplier of the embedding (and tied head) init")
    p.add_argument("--batch-size", type=int, default=4, help="sequences per forward pass")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    # transformers runs a quant_method fp8 checkpoint through FP8Linear: each projection's input
    # e4m3-quantized per weight_block_size[1] values of a token (scale amax / 448), then a W8A8
    # GEMM. Its Triton kernels come from the hub's `kernels` package, which an offline machine
    # lacks, so "dynamic" applies that rounding to the fp32 reference's projection inputs instead.
    p.add_argument("--fp8-activations", choices=["none", "dynamic"], default="none",
                   help="FP8 configs: projection inputs unquantized (none) or as FP8Linear quantizes them")
    return p.parse_args()


def write_model_config(config_arg, model_dir, override_layers):
    src_dir = config_arg if os.path.isdir(config_arg) else os.path.dirname(os.path.abspath(config_arg))
    src = os.path.join(config_arg, "config.json") if os.path.isdir(config_arg) else config_arg
    if not os.path.isfile(src):
        raise SystemExit(f"--config {config_arg}: no such file ({src})")
    with open(src) as f:
        cfg = json.load(f)
    if override_layers is not None:
        cfg["num_hidden_layers"] = override_layers
        if isinstance(cfg.get("layer_types"), list):
            cfg["layer_types"] = cfg["layer_types"][:override_layers]
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    gen = os.path.join(src_dir, "generation_config.json")
    if os.path.exists(gen):
        shutil.copyfile(gen, os.path.join(model_dir, "generation_config.json"))
    return src


def qk_rows(config):
    """Rows of a fused qkv_proj that are q and k (Phi3ForCausalLM stores q, k, v stacked)."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return (config.num_attention_heads + config.num_key_value_heads) * head_dim


def init_scaled(model, config, seed, qk_gain, out_gain=1.0, embed_gain=1.0):
    gen = torch.Generator().manual_seed(seed)
    embed_std = 4.0 / config.hidden_size ** 0.5 * embed_gain
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if p.dim() == 1:
                p.copy_(torch.rand(p.shape, generator=gen) + 0.5)
            elif "embed_tokens" in name or "lm_head" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * embed_std)
            else:
                gain = qk_gain if ("q_proj" in name or "k_proj" in name) else 1.0
                if "o_proj" in name or "down_proj" in name:
                    gain = out_gain
                w = torch.randn(p.shape, generator=gen) * (gain / p.shape[1] ** 0.5)
                if "qkv_proj" in name:  # Phi-3's fused q/k/v: the q and k rows take qk_gain, v's 1
                    w[:qk_rows(config)] *= qk_gain
                p.copy_(w)


def fp8_block_size(config):
    """quant_method fp8's weight_block_size (Qwen3-*-FP8), or None for an unquantized config; the
    config's quantization_config is taken off it so that transformers builds plain fp32 linears."""
    qc = getattr(config, "quantization_config", None)
    if qc is None:
        return None
    qc = qc if isinstance(qc, dict) else qc.to_dict()
    del config.quantization_config
    block = qc.get("weight_block_size")
    if qc.get("quant_method") != "fp8" or not block or block[0] != block[1]:
        raise SystemExit(f"quantization_config {qc}: only quant_method fp8 with square blocks is made here")
    return block[0]


def save_weights(model, config, model_dir, fp8_block=None):
    """bf16 tensors; with fp8_block, each decoder projection as e4m3 codes plus its fp32
    weight_scale_inv per block (tools/make_fp8_goldens.py's quantize_block), and the model's own
    weights set to what the file holds (bf16 upcast, projections dequantized) so that it is the
    fp32 reference on the dequantized weights."""
    sd = {k: v.detach().to(torch.bfloat16).contiguous().clone() for k, v in model.state_dict().items()}
    if config.model_type == "mixtral":
        # transformers 5 names Mixtral's MoE block mlp in memory (gate, stacked experts); its
        # save_pretrained and the published checkpoints keep block_sparse_moe, w1 / w3 / w2 per expert.
        import make_hf_goldens as goldens  # noqa: E402  (the goldens' renaming, one copy)
        sd = goldens.mixtral_names(goldens.per_expert(sd))
    tied = getattr(config, "tie_word_embeddings", False)
    if tied and config.model_type != "qwen3":
        sd.pop("lm_head.weight", None)
    elif tied:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"].clone()
    if fp8_block:
        import make_fp8_goldens as fp8  # noqa: E402  (the goldens' e4m3 rounding, one formula)
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name in sorted(sd):
                if name in params:
                    params[name].copy_(sd[name].float())
                if not fp8.LINEAR.match(name):
                    continue
                codes, scales, deq = fp8.quantize_block(sd[name].float(), fp8_block)
                sd[name] = codes.contiguous()
                sd[name[: -len("weight")] + "weight_scale_inv"] = scales["weight_scale_inv"]
                params[name].copy_(deq)
    save_file(sd, os.path.join(model_dir, "model.safetensors"), metadata={"format": "pt"})
    return sorted(sd)


def build_checkpoint(args, model_dir):
    src = write_model_config(args.config, model_dir, args.override_layers)
    config = AutoConfig.from_pretrained(model_dir)
    block = fp8_block_size(config)
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="eager")
    if args.init == "scaled":
        init_scaled(model, config, args.seed, args.qk_gain, args.out_gain, args.embed_gain)
    names = save_weights(model, config, model_dir, block)
    if not block:
        del model
        model = None
    return src, config, names, model, block


def load_reference(model_dir, device):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.to(device).eval()
    stored = load_file(os.path.join(model_dir, "model.safetensors"))
    params = dict(model.named_parameters())
    # Phi3ForCausalLM (Phi-4-mini) stores q/k/v fused as qkv_proj.
    attn = "model.layers.0.self_attn.q_proj.weight"
    if attn not in params:
        attn = "model.layers.0.self_attn.qkv_proj.weight"
    for name in ("model.embed_tokens.weight", "model.norm.weight", attn):
        assert torch.equal(params[name].detach().cpu(), stored[name].float()), f"{name} not loaded exactly"
    return model


def make_sequences(seed, n, length, vocab):
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(length)] for _ in range(n)]


def run_reference(model, seqs, device, batch_size):
    argmax, margin, top1, last_logits, last_top = [], [], [], [], []
    with torch.no_grad():
        for i in range(0, len(seqs), batch_size):
            ids = torch.tensor(seqs[i:i + batch_size], device=device)
            logits = model(ids, use_cache=False).logits.float()  # [B, L, V]
            top2 = torch.topk(logits, 2, dim=-1)
            argmax += top2.indices[..., 0].cpu().tolist()
            margin += (top2.values[..., 0] - top2.values[..., 1]).cpu().tolist()
            top1.append(top2.values[..., 0].cpu().numpy())
            last = logits[:, -1, :]
            last_logits.append(last.cpu().numpy())
            topk = torch.topk(last, TOP_K, dim=-1)
            for ids_row, vals_row in zip(topk.indices.cpu().tolist(), topk.values.cpu().tolist()):
                last_top.append({"ids": ids_row, "logits": [float(f"{v:.6g}") for v in vals_row]})
    margin = [[float(f"{m:.4g}") for m in row] for row in margin]
    return argmax, margin, np.concatenate(top1), np.concatenate(last_logits), last_top


def main():
    args = parse_args()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # an fp32 reference, not a TF32 one
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    model_dir = os.path.join(args.out, "model")
    t0 = time.time()
    src, config, names, model, fp8_block = build_checkpoint(args, model_dir)
    t1 = time.time()
    # An FP8 checkpoint's reference is the built model itself, its projections dequantized:
    # transformers would load the file through its own FP8 path (activations quantized too).
    model = model.to(device).eval() if model is not None else load_reference(model_dir, device)
    model_fp8 = fp8_block is not None  # its projections were stored as e4m3 codes
    act_group = None
    if args.fp8_activations == "dynamic":
        if not model_fp8:
            raise SystemExit("--fp8-activations dynamic needs a quant_method fp8 config")
        import make_fp8_goldens as fp8  # noqa: E402  (the goldens' e4m3 rounding, one formula)
        act_group = fp8_block
        fp8.quantize_linear_inputs(model, act_group)
    seqs = make_sequences(args.seed + 1, args.num_seqs, args.seq_len, config.vocab_size)
    argmax, margin, top1, last_logits, last_top = run_reference(model, seqs, device, args.batch_size)
    t2 = time.time()

    top1.astype("<f4").tofile(os.path.join(args.out, "top1_logits.f32"))
    last_logits.astype("<f4").tofile(os.path.join(args.out, "last_logits.f32"))
    doc = {
        "config_source": os.path.abspath(src),
        "architecture": config.architectures[0] if config.architectures else config.model_type,
        "num_hidden_layers": config.num_hidden_layers,
        "vocab_size": config.vocab_size,
        "init": args.init,
        "qk_gain": args.qk_gain,
        "out_gain": args.out_gain,
        "embed_gain": args.embed_gain,
        "seed": args.seed,
        "num_seqs": args.num_seqs,
        "seq_len": args.seq_len,
        "device": device + (f" ({torch.cuda.get_device_name()})" if device.startswith("cuda") else ""),
        "reference": "transformers AutoModelForCausalLM, float32 (TF32 off), attn_implementation=eager, "
                     "weights = model/model.safetensors (bf16) upcast" +
                     (", e4m3 projections dequantized (x weight_scale_inv), activations " +
                      (f"e4m3-rounded per {act_group} values of a token (FP8Linear's act_quant)"
                       if act_group else "unquantized") if model_fp8 else "") + "; teacher-forced, no KV cache",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "tensors_stored": len(names),
        "lm_head_stored": "lm_head.weight" in names,
        "files": {"top1_logits.f32": f"float32 LE [{args.num_seqs}, {args.seq_len}]",
                  "last_logits.f32": f"float32 LE [{args.num_seqs}, {config.vocab_size}]"},
        "sequences": seqs,
        "argmax": argmax,
        "margin": margin,
        "last_top": last_top,
        "seconds": {"build": round(t1 - t0, 1), "reference": round(t2 - t1, 1)},
    }
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    flat = [m for row in margin for m in row]
    distinct = len({t for row in argmax for t in row})
    print(f"{doc['architecture']} x{config.num_hidden_layers} layers on {doc['device']}: "
          f"{args.num_seqs}x{args.seq_len} tokens, {distinct} distinct argmax tokens, "
          f"median margin {np.median(flat):.3g}, margins < 0.01: {sum(m < 0.01 for m in flat)}, "
          f"last-logit std {last_logits.std():.3g}; build {t1 - t0:.1f}s, reference {t2 - t1:.1f}s")


if __name__ == "__main__":
    main()
