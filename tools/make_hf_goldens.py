#!/usr/bin/env python3
"""Tiny random-weight HF checkpoints plus Hugging Face transformers reference outputs for them.

Usage:
    python3 tools/make_hf_goldens.py tests/goldens

Writes, for each model (qwen3-tiny, llama3-tiny, qwen3-tiny-kv4, mistral-tiny, gemma3-tiny, and the
sliding-window variants mistral-tiny-swa, gemma3-tiny-swa; gemma3-tiny-gguf, the source of a GGUF
made by tools/make_tiny_gguf.py; phi3-tiny, with Phi-3's fused qkv_proj and gate_up_proj;
phi3-tiny-longrope, with Phi-4-mini's partial rotary and longrope; qwen3-tiny-yarn, with Qwen's yarn
long-context scaling; qwen3-moe-tiny, a mixture of
experts; qwen3-moe-tiny-gguf, the source of its GGUF, every layer sparse; mixtral-tiny, Mixtral's
experts under its own names; gemma2-tiny, Gemma 2's soft-capped scores and logits; gemma2-tiny-gguf,
the source of its GGUF; granite-tiny, Granite's four scalars; smollm3-tiny, SmolLM3's NoPE layers;
glm4-tiny, GLM-4's sandwich norms, fused gate/up and half-head interleaved rope; ernie4_5-tiny, ERNIE
4.5's interleaved rope; seed-oss-tiny, Seed-OSS's q/k/v biases; glm-tiny, GlmForCausalLM; qwen2moe-tiny,
Qwen2-MoE's shared expert behind its gate, every layer sparse, the source of its GGUF; glm4moe-tiny,
GLM-4.5's sigmoid routing with a score bias and groups, its shared expert and first dense layer;
ernie45moe-tiny, ERNIE 4.5's softmax routing with a score bias; gptoss-tiny, gpt-oss's sinks, biases,
alternating windows and stacked interleaved experts, stored as its published checkpoints store them),
OUTDIR/<model>/:
    config.json, generation_config.json   as transformers writes them (transformers 5 spelling:
                                          rope_parameters, dtype)
    model.safetensors                     bf16 weights; qwen3-tiny and qwen3-tiny-kv4 store lm_head.weight
                                          although the embeddings are tied (as Qwen3-0.6B does);
                                          llama3-tiny does not (as Llama-3.2-1B does); mistral-tiny
                                          is untied (its own lm_head.weight, as Mistral-7B)
    goldens.json                          {"transformers_version", "torch_version", "command", ...,
                                           "cases": [{"prompt_ids", "greedy_ids", "greedy_margins",
                                                      "last_logits", "max_new_tokens"}]}
    goldens_short.json                    phi3-tiny-longrope only: the same for prompts in longrope's
                                          short regime (PROMPTS)

The reference is transformers in float32 with eager attention, computing from the bf16-rounded
weights read back from model.safetensors (so an engine computing in fp32 from the same file should
agree to ~1e-4; one computing in bf16 should agree on greedy_ids wherever greedy_margins, the
top-1 minus top-2 logit at each generated step, is not tiny). Greedy decoding runs the full
sequence again at every step (no KV cache), never stops on eos, and is cross-checked against
model.generate(do_sample=False). Floats are rounded to 6 significant digits.

Everything is seeded; on one machine the outputs regenerate byte for byte (the CPU is forced to
one thread so reductions keep their order). Versions used: tools/requirements-goldens.txt.
"""
import argparse
import json
import os
import random
import re
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import (AutoModelForCausalLM, GptOssConfig, Ernie4_5Config, Ernie4_5_MoeConfig, Exaone4Config, Gemma2Config, Gemma3TextConfig, GenerationConfig,
                          GlmConfig, Glm4Config, Glm4MoeConfig, GraniteConfig, GraniteMoeConfig, LlamaConfig, Olmo2Config, Olmo3Config, OlmoeConfig, SeedOssConfig, MistralConfig, MixtralConfig, Phi3Config, Qwen2MoeConfig, Qwen3Config, Qwen3MoeConfig,
                          SmolLM3Config)

SEED = 20240611
MAX_NEW_TOKENS = 16
# Random init, chosen so that the goldens can catch mistakes:
# - embedding (and tied lm_head) std 1.0: logits of std ~8, greedy continuations vary (0.02, the
#   real init, gives a model that repeats one token);
# - projections std GAIN/sqrt(fan_in): the layers outweigh the embedding on the residual stream
#   (with gain 1 the tied model mostly repeats its last token);
# - q/k projections std 1.5/sqrt(fan_in): Llama's attention (no q/k norm) is neither flat nor
#   one-hot (entropy ~2.2 nats over 64 keys), so that a wrong softmax scale is seen.
INIT_STD = 1.0
PROJ_GAIN = 3.0
QK_GAIN = 1.5
COMMAND = "python3 tools/make_hf_goldens.py tests/goldens"


def qwen3_tiny_config():
    return Qwen3Config(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=512,
        rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=INIT_STD,
        bos_token_id=1, eos_token_id=2, attention_bias=False, use_sliding_window=False,
        architectures=["Qwen3ForCausalLM"])


def llama3_tiny_config():
    # original_max_position_embeddings=64 puts the 8 rotary frequencies of head_dim 16 into all
    # three llama3 bands: wavelength 6.3 (< 64/4: kept), 32.5 (between 16 and 64: smoothly
    # interpolated) and 167..7e5 (> 64: divided by factor).
    return LlamaConfig(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, initializer_range=INIT_STD,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        bos_token_id=1, eos_token_id=[2, 3], attention_bias=False, mlp_bias=False,
        architectures=["LlamaForCausalLM"])


def qwen3_tiny_kv4_config():
    # qwen3-tiny with twice the heads, for tensor parallelism up to world_size 4: 8 query heads and
    # 4 KV heads (GQA group 2; one KV head and two query heads per rank at world_size 4), vocab 512
    # and intermediate 128 divisible by 8. head_dim 32, so q width 256 = 4 * hidden. Of the variants
    # tried (head_dim 16/32, 2/3 layers) this one has the largest smallest greedy margin (0.038),
    # so that a different summation order (all-reduce of partial sums) keeps the greedy tokens.
    return Qwen3Config(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=4, head_dim=32, max_position_embeddings=512,
        rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=INIT_STD,
        bos_token_id=1, eos_token_id=2, attention_bias=False, use_sliding_window=False,
        architectures=["Qwen3ForCausalLM"])


def mistral_tiny_config():
    # MistralForCausalLM as Mistral-7B-Instruct-v0.3 is: no sliding window, rope 1e6, untied
    # embeddings (lm_head.weight its own matrix, which no other golden covers). 4 q / 2 KV heads of
    # 16, so that world_size 2 splits them.
    return MistralConfig(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rope_theta=1e6, rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=INIT_STD,
        sliding_window=None, bos_token_id=1, eos_token_id=2, architectures=["MistralForCausalLM"])


def gemma3_tiny_config():
    # Gemma3ForCausalLM (text): GeGLU, (1 + w) norms around each sublayer, q/k norms, the embedding
    # scaled by sqrt(hidden), the attention scaled by query_pre_attn_scalar^-1/2 (24, not head_dim),
    # and layers of two kinds: sliding_attention (rope base 10,000) and full_attention (1e6). The
    # window (512) covers every position, so it never slides (gemma3-tiny-swa's does).
    return Gemma3TextConfig(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=512,
        rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=INIT_STD,
        query_pre_attn_scalar=24, sliding_window=512,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
        hidden_activation="gelu_pytorch_tanh", bos_token_id=2, eos_token_id=1, pad_token_id=0,
        architectures=["Gemma3ForCausalLM"])


def qwen3_tiny_hd64_config():
    # qwen3-tiny with head_dim 64, the smallest the CUDA attention kernels take: the GPU's FP8
    # checks run on it (tools/gpu_run.sh makes it on the device; never committed). Widths multiples
    # of 128 (hidden 128, intermediate 256, q 256), so the FP8 GEMM and gemv paths both run.
    return Qwen3Config(
        vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=512,
        rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=INIT_STD,
        bos_token_id=1, eos_token_id=2, attention_bias=False, use_sliding_window=False,
        architectures=["Qwen3ForCausalLM"])


def mistral_tiny_swa_config():
    # mistral-tiny with a sliding window that binds: every layer sees its last 12 keys (HF: a query
    # at position p attends keys j > p - 12), so the 17- to 100-token prompts and 16 generated
    # tokens slide past it, and 12 ends mid-block for any power-of-two block size.
    config = mistral_tiny_config()
    config.sliding_window = 12
    return config


def gemma3_tiny_swa_config():
    # gemma3-tiny with a 10-key window on its sliding layers (0 and 2; layer 1 stays global), the
    # interleaving of gemma-3-1b-it: the sliding layers' cache must be windowed, the global
    # layer's must not.
    config = gemma3_tiny_config()
    config.sliding_window = 10  # of 6, 8, 10 and 12, the largest smallest greedy margin (0.0089)
    return config


def gemma3_tiny_gguf_config():
    # The Gemma 3 that llama.cpp's GGUF describes (tools/make_tiny_gguf.py converts it): the
    # layer pattern its loader assumes (sliding_window_pattern 6: five sliding layers, then a global
    # one), attention scaled by head_dim^-1/2 (query_pre_attn_scalar = head_dim, as every published
    # Gemma 3 but the 27B; GGUF has no key for it), and a window of 10 that binds. Narrow (hidden 32,
    # head_dim 16, MLP 64) so that its .gguf stays small enough to commit.
    return Gemma3TextConfig(
        vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=6,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=INIT_STD,
        query_pre_attn_scalar=16, sliding_window=10,
        layer_types=["sliding_attention"] * 5 + ["full_attention"],
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
        hidden_activation="gelu_pytorch_tanh", bos_token_id=2, eos_token_id=1, pad_token_id=0,
        architectures=["Gemma3ForCausalLM"])


def phi3_tiny_config():
    # Phi3ForCausalLM (Phi-3-mini's layout): q/k/v stored as one qkv_proj, gate and up as one
    # gate_up_proj; untied; no sliding window, no rope scaling. (init_weights gives the fused
    # qkv_proj the projections' gain, not QK_GAIN: its name holds neither q_proj nor k_proj.)
    return Phi3Config(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        original_max_position_embeddings=512, rope_theta=1e4, rms_norm_eps=1e-5,
        tie_word_embeddings=False, initializer_range=INIT_STD, sliding_window=None,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["Phi3ForCausalLM"])


def qwen3_moe_tiny_config():
    # Qwen3MoeForCausalLM (Qwen3-30B-A3B's layout): layers 0 and 2 sparse (8 experts of width 32,
    # top-2, the two routing weights renormalised: norm_topk_prob), layer 1 dense (mlp_only_layers,
    # width 96), so that both MLPs and the sparse/dense rule are exercised; untied, as the 30B.
    # Widths divide by 2 (heads, KV heads, both MLP widths, the 8 experts): world_size 2 splits
    # them with and without expert parallelism.
    return Qwen3MoeConfig(
        vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=512,
        rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=False, initializer_range=INIT_STD,
        num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True,
        decoder_sparse_step=1, mlp_only_layers=[1], bos_token_id=1, eos_token_id=2,
        attention_bias=False, use_sliding_window=False, architectures=["Qwen3MoeForCausalLM"])


def qwen3_moe_tiny_gguf_config():
    # The Qwen3-MoE that llama.cpp's GGUF describes (tools/make_tiny_gguf.py converts it): its
    # qwen3moe has no dense layer (no mlp_only_layers, decoder_sparse_step 1), so qwen3-moe-tiny,
    # whose layer 1 is dense, cannot be converted. Two layers so that its .gguf stays small enough
    # to commit; otherwise qwen3-moe-tiny (widths and the 8 experts divide by 2).
    config = qwen3_moe_tiny_config()
    config.num_hidden_layers = 2
    config.mlp_only_layers = []
    return config


def mixtral_tiny_config():
    # MixtralForCausalLM (Mixtral-8x7B's layout): every layer sparse, 8 experts of width 32
    # (intermediate_size), top-2 renormalised (always, in Mixtral), untied, no sliding window.
    # Widths, heads and experts divide by 2, for world_size 2 with and without expert parallelism.
    return MixtralConfig(
        vocab_size=512, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rope_theta=1e6, rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=INIT_STD,
        num_local_experts=8, num_experts_per_tok=2, sliding_window=None, bos_token_id=1, eos_token_id=2,
        architectures=["MixtralForCausalLM"])


def gemma2_tiny_config():
    # Gemma2ForCausalLM: Gemma 3's layout without q/k norms, one rope base (10,000), and soft-capping:
    # each attention score and each final logit x becomes cap * tanh(x / cap). The caps are far below
    # the published 50 and 30 so that these random weights' scores and logits (std ~8) are bent;
    # layers 0 and 2 slide over 8 keys (shorter than most prompts), layer 1 is global.
    return Gemma2Config(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=512,
        rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=INIT_STD,
        query_pre_attn_scalar=24, sliding_window=8, attn_logit_softcapping=5.0, final_logit_softcapping=10.0,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        hidden_activation="gelu_pytorch_tanh", bos_token_id=2, eos_token_id=1, pad_token_id=0,
        architectures=["Gemma2ForCausalLM"])


def gemma2_tiny_gguf_config():
    # The Gemma 2 that llama.cpp's GGUF describes (tools/make_tiny_gguf.py converts it): gemma2-tiny
    # with its attention scaled by head_dim^-1/2 (query_pre_attn_scalar = head_dim, as the 2B and 9B
    # publish it; GGUF has no key for it), its layers alternating sliding and global from layer 0
    # (llama.cpp's gemma2 pattern).
    config = gemma2_tiny_config()
    config.query_pre_attn_scalar = 32
    return config


def granite_tiny_config():
    # GraniteForCausalLM (IBM Granite 3): Llama's layers with four scalars, in the proportions of
    # granite-3.x-8b's (embeddings times 12, each sublayer's output times 0.22 before its add, the
    # attention scaled by 1 / head_dim rather than head_dim^-1/2, the logits divided by 8), tied
    # embeddings. 4 q / 2 KV heads of 16, so that world_size 2 splits them.
    return GraniteConfig(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4}, rms_norm_eps=1e-5,
        tie_word_embeddings=True, initializer_range=INIT_STD, embedding_multiplier=12.0,
        residual_multiplier=0.22, attention_multiplier=1 / 16, logits_scaling=8.0,
        bos_token_id=1, eos_token_id=2, attention_bias=False, mlp_bias=False,
        architectures=["GraniteForCausalLM"])


def smollm3_tiny_config():
    # SmolLM3ForCausalLM (SmolLM3-3B): Llama's layers, every fourth without rope (NoPE; transformers
    # derives no_rope_layers [1, 1, 1, 0] from no_rope_layer_interval 4, as llama.cpp's smollm3
    # hard-codes). Four layers so that one is NoPE; tied embeddings; 4 q / 2 KV heads of 16.
    return SmolLM3Config(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4}, rms_norm_eps=1e-6,
        tie_word_embeddings=True, initializer_range=INIT_STD, no_rope_layer_interval=4,
        bos_token_id=1, eos_token_id=2, pad_token_id=None, attention_bias=False, mlp_bias=False,
        architectures=["SmolLM3ForCausalLM"])


def glm4_tiny_config():
    # Glm4ForCausalLM (GLM-4-9B-0414): Llama's layers with a norm after each sublayer, gate/up fused,
    # q/k/v biases, and the first half of each head (partial_rotary_factor 0.5, the family's default,
    # left out here as the published configs name it) rotating in adjacent pairs. 4 q / 2 KV heads of 16.
    config = Glm4Config(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4}, rms_norm_eps=1e-5,
        tie_word_embeddings=False, initializer_range=INIT_STD, attention_bias=True,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["Glm4ForCausalLM"])
    return config


def glm_tiny_config():
    # GlmForCausalLM (glm-4-9b-chat-hf): glm4-tiny without the sublayer output norms; the rotary share
    # left to the family's default (0.5), q/k/v biases.
    return GlmConfig(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4}, rms_norm_eps=1e-5,
        tie_word_embeddings=False, initializer_range=INIT_STD, attention_bias=True,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["GlmForCausalLM"])


def ernie45_tiny_config():
    # Ernie4_5ForCausalLM (ERNIE-4.5-0.3B-PT): Llama's layers, every head rotating in adjacent pairs,
    # tied embeddings. 4 q / 2 KV heads of 16.
    return Ernie4_5Config(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 5e5}, rms_norm_eps=1e-5,
        tie_word_embeddings=True, initializer_range=INIT_STD, use_bias=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["Ernie4_5ForCausalLM"])


def seed_oss_tiny_config():
    # SeedOssForCausalLM (Seed-OSS-36B): Llama's layers with q/k/v biases, no o_proj bias, untied.
    return SeedOssConfig(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7}, rms_norm_eps=1e-6,
        tie_word_embeddings=False, initializer_range=INIT_STD, attention_bias=True, attention_out_bias=False,
        bos_token_id=0, eos_token_id=2, pad_token_id=1, architectures=["SeedOssForCausalLM"])


def olmo2_tiny_config():
    # Olmo2ForCausalLM (OLMo-2-0425-1B, OLMo-2-1124-7B): Llama's modules with no norm before a sublayer,
    # a norm on each sublayer's output, and q/k norms over all heads of q and of k at once. 4 q / 2 KV
    # heads of 16, so that world_size 2 sums the norms' squares over two ranks.
    return Olmo2Config(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4}, rms_norm_eps=1e-6,
        tie_word_embeddings=False, initializer_range=INIT_STD, attention_bias=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["Olmo2ForCausalLM"])


def olmo3_tiny_config():
    # Olmo3ForCausalLM (Olmo-3-7B, 32B): OLMo 2's layers, the first three of every four sliding (window 8,
    # so that it binds), yarn on the full layer only (factor 4 over 128 positions; the sliding layers
    # rotate unscaled at the same base), as transformers 5 writes it (rope_parameters by layer kind).
    return Olmo3Config(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, sliding_window=8,
        rope_parameters={"full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128,
                                            "rope_theta": 1e4},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
        rms_norm_eps=1e-6, tie_word_embeddings=False, initializer_range=INIT_STD, attention_bias=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["Olmo3ForCausalLM"])


def exaone4_tiny_config():
    # Exaone4ForCausalLM (EXAONE-4.0-1.2B, 32B): a norm after each sublayer and none before, per-head q/k
    # norms, the first three of every four layers sliding (window 8) and, with a window set, the
    # fourth rotating nothing; Llama 3's rope scaling (over 64 positions, so that it moves the lower
    # frequencies of these 16-dim heads); untied, as the 32B (tied, the embedding repeats its own token).
    return Exaone4Config(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        sliding_window=8, sliding_window_pattern=4,
        rope_parameters={"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=INIT_STD,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["Exaone4ForCausalLM"])


def granitemoe_tiny_config():
    # GraniteMoeForCausalLM (granite-3.1-1b-a400m, 3b-a800m): granite-tiny's four scalars, every layer's
    # MLP 8 experts of 32 (intermediate_size, as Mixtral's), 2 a token: the top-2 logits softmaxed (the
    # same weights as Mixtral's renormalised top-2 of a softmax), stacked in the checkpoint as
    # input_linear / output_linear. 4 q / 2 KV heads of 16; untied (tied, this tiny one repeats tokens).
    return GraniteMoeConfig(
        vocab_size=512, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        num_local_experts=8, num_experts_per_tok=2,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4}, rms_norm_eps=1e-6,
        tie_word_embeddings=False, initializer_range=INIT_STD, embedding_multiplier=12.0,
        residual_multiplier=0.22, attention_multiplier=1 / 16, logits_scaling=8.0,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, attention_bias=False,
        architectures=["GraniteMoeForCausalLM"])


def olmoe_tiny_config():
    # OlmoeForCausalLM (OLMoE-1B-7B): Llama's input norms, OLMo 2's q/k norms over all heads, every layer's
    # MLP 8 experts of 32 (intermediate_size), 2 a token, the top-2 softmax weights not renormalised
    # (norm_topk_prob false, the published configs'). 4 heads, all KV (as OLMoE's, and llama.cpp's olmoe
    # takes no other), so that world_size 2 sums the norms' squares over two ranks.
    return OlmoeConfig(
        vocab_size=512, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
        num_experts=8, num_experts_per_tok=2, norm_topk_prob=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4}, rms_norm_eps=1e-5,
        tie_word_embeddings=False, initializer_range=INIT_STD, clip_qkv=None,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["OlmoeForCausalLM"])


def qwen2moe_tiny_config():
    # Qwen2MoeForCausalLM (Qwen1.5-MoE-A2.7B's layout): Qwen2's q/k/v biases, every layer sparse (as
    # llama.cpp's qwen2moe: tools/make_tiny_gguf.py converts it), 8 experts of width 32, top-2 not
    # renormalised (norm_topk_prob false, the published configs'), and a shared expert of width 48 behind
    # its sigmoid gate. Widths, heads and experts divide by 2 (world_size 2, expert parallelism or not).
    return Qwen2MoeConfig(
        vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6}, rms_norm_eps=1e-6,
        tie_word_embeddings=False, initializer_range=INIT_STD, num_experts=8, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=48, norm_topk_prob=False,
        decoder_sparse_step=1, mlp_only_layers=[], qkv_bias=True, use_sliding_window=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["Qwen2MoeForCausalLM"])


def glm4moe_tiny_config():
    # Glm4MoeForCausalLM (GLM-4.5's layout): q/k/v biases, per-head q/k norms (use_qk_norm), half of each
    # head rotating (half-split), layer 0 dense (first_k_dense_replace), layers 1-2 sparse: 8 experts of
    # width 32, top-2 by sigmoid score + score bias, renormalised and times 2.5, beside one ungated shared
    # expert. One group, as GLM-4.5's (llama.cpp's glm4moe reads no groups: tools/make_tiny_gguf.py
    # converts it; the groups are DeepSeek-V3's, tested op by op). Widths, heads and experts divide by 2.
    return Glm4MoeConfig(
        vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5},
        partial_rotary_factor=0.5, rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=INIT_STD,
        attention_bias=True, use_qk_norm=True, moe_intermediate_size=32, num_experts_per_tok=2,
        n_shared_experts=1, n_routed_experts=8, routed_scaling_factor=2.5, n_group=1, topk_group=1,
        first_k_dense_replace=1, norm_topk_prob=True, num_mtp_layers=0,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["Glm4MoeForCausalLM"])


def ernie45moe_tiny_config():
    # Ernie4_5_MoeForCausalLM (ERNIE-4.5-21B-A3B's layout): ERNIE 4.5's attention (heads rotating in adjacent
    # pairs), tied embeddings, layer 0 dense (moe_layer_start_index 1), layers 1-2 sparse: 8 experts of
    # width 32, top-2 by softmax score + score bias, renormalised, beside one ungated shared expert.
    # Widths, heads and experts divide by 2. The dense MLP is 64 wide: llama.cpp's converter writes the
    # shared expert's width as intermediate_size / num_key_value_heads (ERNIE-4.5-21B-A3B's 12288 / 4 =
    # 2 x 1536), so that its qwen2moe-style key agrees with the tensors here too.
    return Ernie4_5_MoeConfig(
        vocab_size=512, hidden_size=64, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 5e5}, rms_norm_eps=1e-5,
        tie_word_embeddings=True, initializer_range=INIT_STD, use_bias=False, moe_intermediate_size=32,
        moe_k=2, moe_num_experts=8, moe_num_shared_experts=1, moe_layer_start_index=1, moe_layer_end_index=-1,
        moe_layer_interval=1, bos_token_id=1, eos_token_id=2, pad_token_id=0,
        architectures=["Ernie4_5_MoeForCausalLM"])


def gptoss_tiny_config():
    # GptOssForCausalLM (gpt-oss-20b's layout): q/k/v/o biases, a learned sink logit per head in each
    # softmax, sliding (window 8) and full layers alternating, yarn (factor 4 over 128 positions, not
    # truncated, as gpt-oss's 32 over 4,096), and every layer's MLP 8 experts of width 32, top-2 by the
    # router's logits (with a bias), softmax over the two, the experts' gate/up interleaved in one
    # [E, H, 2I] tensor with biases and gpt-oss's clamped SwiGLU. Widths, heads and experts divide by 2.
    return GptOssConfig(
        vocab_size=512, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
        sliding_window=8, layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                         "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 128},
        rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=INIT_STD, attention_bias=True,
        num_local_experts=8, num_experts_per_tok=2,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, architectures=["GptOssForCausalLM"])


def phi3_tiny_longrope_config():
    # Phi-4-mini's rope on phi3-tiny: partial_rotary_factor 0.75 (12 of head_dim 16 rotate, in pairs
    # (i, i + 6); the last 4 dims pass through) and longrope over the 6 frequencies, its switch at
    # original_max_position_embeddings 64: transformers uses the short factors while a forward
    # pass's sequence is at most 64 tokens long, the long ones past it, and scales cos and sin by
    # sqrt(1 + ln(512 / 64) / ln 64) = 1.2247 in both regimes. Its goldens hold one regime per
    # case (PROMPTS below): goldens_short.json, prompts that end, 16 tokens later, within 64;
    # goldens.json, prompts longer than 64.
    config = phi3_tiny_config()
    config.original_max_position_embeddings = 64
    config.rope_parameters = {
        "rope_type": "longrope", "rope_theta": 1e4, "partial_rotary_factor": 0.75,
        "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
        "long_factor": [1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
        "original_max_position_embeddings": 64}
    config.partial_rotary_factor = 0.75
    return config


def qwen3_tiny_yarn_config():
    # Qwen's long-context recipe (yarn, factor 4) on qwen3-tiny, scaled down: pretrained length
    # 128, max_position_embeddings 512 = 4 x 128. At base 1e4 over 32 rotary dims the ramp between
    # kept and divided frequencies spans dims 0-6 (find_correction_dim of 32 and 1 turns), the rest
    # are divided by 4, and cos and sin are scaled by 0.1 ln 4 + 1 = 1.1386.
    config = qwen3_tiny_config()
    config.rope_parameters = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                              "original_max_position_embeddings": 128}
    return config


# Embedding std where INIT_STD does not fit: Gemma scales the embedding by sqrt(hidden) = 8 (Granite
# by its embedding_multiplier, 12), so std 1 would make every token's own row outweigh the layers
# and the tied head repeat it.
EMBED_STD = {"gemma3-tiny": INIT_STD / 8, "gemma3-tiny-swa": INIT_STD / 8, "gemma3-tiny-gguf": INIT_STD / 8,
             "gemma2-tiny": INIT_STD / 8, "gemma2-tiny-gguf": INIT_STD / 8, "granite-tiny": INIT_STD / 12,
             "granite-tiny-hd64": INIT_STD / 12, "granitemoe-tiny": INIT_STD / 12,
             "granitemoe-tiny-hd64": INIT_STD / 12}

# name -> (config factory, store lm_head.weight explicitly when the embeddings are tied)
MODELS = {
    "qwen3-tiny": (qwen3_tiny_config, True),
    "llama3-tiny": (llama3_tiny_config, False),
    "qwen3-tiny-kv4": (qwen3_tiny_kv4_config, True),
    "mistral-tiny": (mistral_tiny_config, False),
    "gemma3-tiny": (gemma3_tiny_config, False),
    "mistral-tiny-swa": (mistral_tiny_swa_config, False),
    "gemma3-tiny-swa": (gemma3_tiny_swa_config, False),
    "gemma3-tiny-gguf": (gemma3_tiny_gguf_config, False),
    "phi3-tiny": (phi3_tiny_config, False),
    "qwen3-moe-tiny": (qwen3_moe_tiny_config, False),
    "qwen3-moe-tiny-gguf": (qwen3_moe_tiny_gguf_config, False),
    "phi3-tiny-longrope": (phi3_tiny_longrope_config, False),
    "mixtral-tiny": (mixtral_tiny_config, False),
    "gemma2-tiny": (gemma2_tiny_config, False),
    "gemma2-tiny-gguf": (gemma2_tiny_gguf_config, False),
    "qwen3-tiny-yarn": (qwen3_tiny_yarn_config, True),
    "granite-tiny": (granite_tiny_config, False),
    "smollm3-tiny": (smollm3_tiny_config, False),
    "glm4-tiny": (glm4_tiny_config, False),
    "ernie4_5-tiny": (ernie45_tiny_config, False),
    "glm-tiny": (glm_tiny_config, False),
    "seed-oss-tiny": (seed_oss_tiny_config, False),
    "olmo2-tiny": (olmo2_tiny_config, False),
    "olmo3-tiny": (olmo3_tiny_config, False),
    "exaone4-tiny": (exaone4_tiny_config, False),
    "granitemoe-tiny": (granitemoe_tiny_config, False),
    "olmoe-tiny": (olmoe_tiny_config, False),
    "qwen2moe-tiny": (qwen2moe_tiny_config, False),
    "glm4moe-tiny": (glm4moe_tiny_config, False),
    "ernie45moe-tiny": (ernie45moe_tiny_config, False),
    "gptoss-tiny": (gptoss_tiny_config, False),
}
# Golden files whose prompts are not make_prompts' (file -> prompt lengths, shared prefix, the two
# tails after it): phi3-tiny-longrope's short regime (every sequence ends within 64 tokens: the
# engine runs it with max_model_length 64) and long one (every prompt longer than 64).
PROMPTS = {
    "phi3-tiny-longrope": {"goldens_short.json": ([1, 5, 8, 17, 33, 48], 20, (4, 12)),
                           "goldens.json": ([65, 80, 100, 130], 70, (9, 23))},
}
def qwen3_tiny_hd64_yarn_config():
    # qwen3-tiny-yarn's scaling on the head_dim-64 shape the CUDA kernels take (a GPU check).
    config = qwen3_tiny_hd64_config()
    config.rope_parameters = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                              "original_max_position_embeddings": 128}
    return config


def granite_tiny_hd64_config():
    # granite-tiny's scalars at head_dim 64, the smallest the CUDA attention kernels take (a GPU check).
    config = granite_tiny_config()
    config.hidden_size, config.intermediate_size = 256, 512
    config.attention_multiplier = 1 / 64
    return config


def smollm3_tiny_hd64_config():
    # smollm3-tiny's NoPE layer at head_dim 64 (a GPU check).
    config = smollm3_tiny_config()
    config.hidden_size, config.intermediate_size = 256, 512
    return config


def hd64(factory, intermediate_size=512):
    """factory's tiny config at head_dim 64 (hidden 256 over its 4 heads), the shape the CUDA kernels
    take: a GPU check (glm4-tiny's then rotates 32 dims in adjacent pairs; olmo2-tiny's q/k norms span
    256 and 128)."""
    def make():
        config = factory()
        config.hidden_size, config.intermediate_size, config.head_dim = 256, intermediate_size, 64
        return config
    return make


def smollm3_tiny_hd64_all_rope_config():
    # smollm3-tiny-hd64's weights with every layer rotating: how far bf16 parts from fp32 at this
    # depth without the NoPE layer (a GPU check's baseline).
    config = smollm3_tiny_hd64_config()
    config.no_rope_layers = [1, 1, 1, 1]
    return config


def qwen2moe_tiny_hd64_config():
    # qwen2moe-tiny at head_dim 64, its experts 128 wide and its shared expert 256 (a GPU check).
    config = hd64(qwen2moe_tiny_config)()
    config.moe_intermediate_size, config.shared_expert_intermediate_size = 128, 256
    return config


def glm4moe_tiny_hd64_config():
    # glm4moe-tiny at head_dim 64 (32 dims rotating), its experts 128 wide (a GPU check).
    config = hd64(glm4moe_tiny_config)()
    config.moe_intermediate_size = 128
    return config


# Made on request only (--models), for checks on the GPU machine; not in tests/goldens.
GPU_MODELS = {
    "glm4moe-tiny-hd64": (glm4moe_tiny_hd64_config, False),
    "ernie45moe-tiny-hd64": (hd64(ernie45moe_tiny_config, intermediate_size=128), False),
    "qwen2moe-tiny-hd64": (qwen2moe_tiny_hd64_config, False),
    "granitemoe-tiny-hd64": (hd64(granitemoe_tiny_config, intermediate_size=128), False),
    "olmoe-tiny-hd64": (hd64(olmoe_tiny_config, intermediate_size=128), False),
    "exaone4-tiny-hd64": (hd64(exaone4_tiny_config), False),
    "olmo2-tiny-hd64": (hd64(olmo2_tiny_config), False),
    "olmo3-tiny-hd64": (hd64(olmo3_tiny_config), False),
    "smollm3-tiny-hd64-all-rope": (smollm3_tiny_hd64_all_rope_config, False),
    "glm4-tiny-hd64": (hd64(glm4_tiny_config), False),
    "granite-tiny-hd64": (granite_tiny_hd64_config, False),
    "smollm3-tiny-hd64": (smollm3_tiny_hd64_config, False),
    "qwen3-tiny-hd64": (qwen3_tiny_hd64_config, True),
    "qwen3-tiny-hd64-yarn": (qwen3_tiny_hd64_yarn_config, True),
}


def init_weights(model, seed, std):
    """Fills every parameter from one seeded generator, in name order, independent of HF's init.

    Embeddings get N(0, std^2), projections N(0, gain^2/fan_in); norm weights get U(0.5, 1.5) so
    that a loader mixing up norms is seen (all-ones would hide it).
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("e_score_correction_bias"):  # ERNIE 4.5's, a parameter: of its softmax scores' size
                p.copy_(torch.randn(p.shape, generator=gen) * 0.03)
            elif p.dim() == 1:
                p.copy_(torch.rand(p.shape, generator=gen) + 0.5)
            elif "embed_tokens" in name or "lm_head" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
            else:
                gain = QK_GAIN if ("q_proj" in name or "k_proj" in name) else PROJ_GAIN
                # fan_in is the last dim: [out, in] linears, and transformers 5's stacked experts
                # ([E, 2I, H] gate_up_proj, [E, H, I] down_proj)
                p.copy_(torch.randn(p.shape, generator=gen) * gain / p.shape[-1] ** 0.5)
        # GLM-4.5's router score bias is a buffer (zeros from HF's init): of the sigmoid scores' order, so
        # that it moves which experts are chosen (the experts' weights are the scores without it).
        for name, b in sorted(model.named_buffers(), key=lambda kv: kv[0]):
            if name.endswith("e_score_correction_bias"):
                b.copy_(torch.randn(b.shape, generator=gen) * 0.3)


# transformers 5 holds a sparse layer's experts stacked ([E, 2I, H] gate_up_proj: gate rows, then
# up; [E, H, I] down_proj); its save_pretrained and the published checkpoints store them per expert.
STACKED_EXPERTS = re.compile(r"(.*\.mlp\.experts\.)(gate_up_proj|down_proj)$")
PER_EXPERT = re.compile(r"(.*\.mlp\.experts\.)(\d+)\.(gate|up|down)_proj\.weight$")


def per_expert(sd):
    out = {}
    for k, v in sd.items():
        m = STACKED_EXPERTS.match(k)
        if not m:
            out[k] = v
            continue
        for e in range(v.shape[0]):
            if m.group(2) == "down_proj":
                out[f"{m.group(1)}{e}.down_proj.weight"] = v[e].contiguous().clone()
            else:
                gate, up = v[e].chunk(2, dim=0)
                out[f"{m.group(1)}{e}.gate_proj.weight"] = gate.contiguous().clone()
                out[f"{m.group(1)}{e}.up_proj.weight"] = up.contiguous().clone()
    return out


# Mixtral's checkpoints (and transformers' save_pretrained) name a layer's MoE block
# block_sparse_moe, its experts' gate, up and down w1, w3 and w2.
MIXTRAL_PARTS = {"gate": "w1", "up": "w3", "down": "w2"}
MIXTRAL_EXPERT = re.compile(r"(.*)\.block_sparse_moe\.experts\.(\d+)\.(w1|w3|w2)\.weight$")


def mixtral_names(sd):
    out = {}
    for k, v in sd.items():
        if m := PER_EXPERT.match(k):
            k = (m.group(1).replace(".mlp.experts.", ".block_sparse_moe.experts.") + m.group(2) + "."
                 + MIXTRAL_PARTS[m.group(3)] + ".weight")
        out[k.replace(".mlp.gate.weight", ".block_sparse_moe.gate.weight")] = v
    return out


# GraniteMoE's published checkpoints (granite-3.x-1b-a400m, 3b-a800m) name a layer's stacked experts
# block_sparse_moe.input_linear ([E, 2I, H], gate then up) and output_linear ([E, H, I]), its router
# block_sparse_moe.router.layer; transformers 5 renames them on load (conversion_mapping.py).
GRANITEMOE_NAMES = {".block_sparse_moe.experts.gate_up_proj": ".block_sparse_moe.input_linear.weight",
                    ".block_sparse_moe.experts.down_proj": ".block_sparse_moe.output_linear.weight",
                    ".block_sparse_moe.router.weight": ".block_sparse_moe.router.layer.weight"}


def granitemoe_names(sd):
    out = {}
    for k, v in sd.items():
        for internal, published in GRANITEMOE_NAMES.items():
            if k.endswith(internal):
                k = k[: -len(internal)] + published
        out[k] = v
    return out


# ERNIE 4.5 MoE's published checkpoints hold a sparse layer's score bias as mlp.moe_statics; transformers
# 5 moves it under the router on load (conversion_mapping.py) and saves it there.
ERNIE_STATICS = (".mlp.gate.moe_statics.e_score_correction_bias", ".mlp.moe_statics.e_score_correction_bias")


def internal_name(name):
    """A Mixtral or GraniteMoE checkpoint name as the model's own (Qwen3-MoE's per-expert form for
    Mixtral); others unchanged."""
    for internal, published in list(GRANITEMOE_NAMES.items()) + [ERNIE_STATICS]:
        if name.endswith(published):
            return name[: -len(published)] + internal
    if m := MIXTRAL_EXPERT.match(name):
        part = {v: k for k, v in MIXTRAL_PARTS.items()}[m.group(3)]
        return f"{m.group(1)}.mlp.experts.{m.group(2)}.{part}_proj.weight"
    return name.replace(".block_sparse_moe.gate.weight", ".mlp.gate.weight")


def bf16_state_dict(model, store_lm_head):
    sd = {k: v.detach().to(torch.bfloat16).contiguous().clone() for k, v in model.state_dict().items()}
    if model.config.model_type != "gpt_oss":  # gpt-oss's published checkpoints keep them stacked
        sd = per_expert(sd)
    if model.config.model_type == "mixtral":
        sd = mixtral_names(sd)
    if model.config.model_type == "granitemoe":
        sd = granitemoe_names(sd)
    if model.config.model_type == "ernie4_5_moe":
        sd = {k.replace(*ERNIE_STATICS): v for k, v in sd.items()}
    if not model.config.tie_word_embeddings:
        return sd  # lm_head.weight is a matrix of its own
    if store_lm_head:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"].clone()
    else:
        sd.pop("lm_head.weight", None)
    return sd


def save_checkpoint(model, config, outdir, store_lm_head):
    os.makedirs(outdir, exist_ok=True)
    config.dtype = torch.bfloat16
    config.save_pretrained(outdir)
    gen_cfg = GenerationConfig.from_model_config(config)
    if gen_cfg.to_diff_dict():
        gen_cfg.save_pretrained(outdir)
    save_file(bf16_state_dict(model, store_lm_head), os.path.join(outdir, "model.safetensors"),
              metadata={"format": "pt"})


def load_reference(outdir):
    """The bf16 checkpoint read back by transformers, upcast to fp32, eager attention."""
    model = AutoModelForCausalLM.from_pretrained(outdir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    stored = load_file(os.path.join(outdir, "model.safetensors"))
    params = dict(model.named_parameters())
    for name, t in stored.items():
        name = internal_name(name)
        if name in params:
            assert torch.equal(params[name].detach(), t.float()), f"{outdir}: {name} not loaded exactly"
        elif m := PER_EXPERT.match(name):  # one expert's part of the stacked parameter
            e, part = int(m.group(2)), m.group(3)
            stacked = params[m.group(1) + ("down_proj" if part == "down" else "gate_up_proj")].detach()[e]
            if part != "down":
                stacked = stacked.chunk(2, dim=0)[0 if part == "gate" else 1]
            assert torch.equal(stacked, t.float()), f"{outdir}: {name} not loaded exactly"
    if model.config.tie_word_embeddings:
        assert torch.equal(model.lm_head.weight, model.model.embed_tokens.weight), "lm_head is not tied"
    return model


def make_prompts(seed, vocab, lengths=(1, 5, 8, 17, 33, 50, 64, 100), prefix_len=40, tails=(9, 23)):
    rng = random.Random(seed)
    prompts = [[rng.randrange(vocab) for _ in range(n)] for n in lengths]
    prefix = [rng.randrange(vocab) for _ in range(prefix_len)]  # shared by the last two: prefix-cache tests
    for tail in tails:
        prompts.append(prefix + [rng.randrange(vocab) for _ in range(tail)])
    return prompts


def greedy(model, prompt, n):
    """Greedy tokens, recomputing the whole sequence each step; also top1-top2 logit margins."""
    ids = list(prompt)
    out, margins, first_logits = [], [], None
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1]
            if first_logits is None:
                first_logits = logits.clone()
            top = torch.topk(logits, 2)
            tok = int(top.indices[0])
            out.append(tok)
            margins.append(float(top.values[0] - top.values[1]))
            ids.append(tok)
    return out, margins, first_logits


def hf_generate(model, prompt, n):
    # generate() merges in the model's generation_config, eos included: clear it there, so that it
    # neither stops nor (through min_new_tokens) suppresses eos.
    model.generation_config.eos_token_id = None
    gen_cfg = GenerationConfig(do_sample=False, max_new_tokens=n, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        ids = torch.tensor([prompt])
        # An explicit mask: without it generate() masks every prompt token equal to pad_token_id.
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gen_cfg)
    return out[0, len(prompt):].tolist()


def r6(x):
    return float(f"{x:.6g}")


def make_model(name, outdir):
    factory, store_lm_head = MODELS[name]
    config = factory()
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    init_weights(model, SEED, EMBED_STD.get(name, INIT_STD))
    save_checkpoint(model, config, outdir, store_lm_head)

    ref = load_reference(outdir)
    default_set = {"goldens.json": ((1, 5, 8, 17, 33, 50, 64, 100), 40, (9, 23))}
    for i, (file, (lengths, prefix_len, tails)) in enumerate(PROMPTS.get(name, default_set).items()):
        prompts = make_prompts(SEED + 1 + i, config.vocab_size, lengths, prefix_len, tails)
        check_one_rope_regime(config, prompts)
        write_goldens(name, ref, prompts, os.path.join(outdir, file))


def check_one_rope_regime(config, prompts):
    """With longrope, transformers picks the factors per forward pass (the sequence so far longer
    than original_max_position_embeddings: long); an engine picks them once. A case whose
    recomputed sequences crossed the switch would match neither regime."""
    rope = config.rope_parameters or {}
    if rope.get("rope_type") != "longrope":
        return
    orig = config.original_max_position_embeddings
    for p in prompts:
        assert len(p) > orig or len(p) + MAX_NEW_TOKENS - 1 <= orig, f"a {len(p)}-token prompt crosses {orig}"


def write_goldens(name, ref, prompts, path):
    cases = []
    for prompt in prompts:
        toks, margins, logits = greedy(ref, prompt, MAX_NEW_TOKENS)
        cached = hf_generate(ref, prompt, MAX_NEW_TOKENS)
        if cached != toks:
            print(f"WARNING: {name}: generate() with KV cache differs from full recompute "
                  f"for a {len(prompt)}-token prompt: {cached} vs {toks}", file=sys.stderr)
        cases.append({"prompt_ids": prompt, "greedy_ids": toks, "max_new_tokens": MAX_NEW_TOKENS,
                      "greedy_margins": [r6(m) for m in margins],
                      "last_logits": [r6(v) for v in logits.tolist()]})
        print(f"{name}: prompt {len(prompt):3d} tokens -> {toks}  min margin {min(margins):.3g}")
    doc = {
        "model": name,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "command": COMMAND,
        "reference": "transformers AutoModelForCausalLM, float32, attn_implementation=eager, "
                     "weights = the bf16 model.safetensors upcast; greedy = argmax with the full "
                     "sequence recomputed each step, eos ignored",
        "eos_ignored": True,
        "seed": SEED,
        "cases": cases,
    }
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS) + list(GPU_MODELS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    MODELS.update(GPU_MODELS)
    for name in args.models:
        make_model(name, os.path.join(args.outdir, name))


if __name__ == "__main__":
    main()
