#!/usr/bin/env python3
"""Converts a tiny random checkpoint of tests/goldens (made by tools/make_hf_goldens.py) to GGUF with
llama.cpp's own converter, convert_hf_to_gguf.py: the files GoldenTest loads and checks against
that checkpoint's Hugging Face goldens.

Usage (the venv of tools/requirements-goldens.txt: torch, transformers, numpy; the converter's
gguf-py is the one vendored beside it):
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/gemma3-tiny-gguf
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/phi3-tiny-longrope
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/mistral-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/llama3-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/qwen3-moe-tiny-gguf
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/mixtral-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/gemma2-tiny-gguf
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/qwen3-tiny-yarn
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/granite-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/smollm3-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/glm4-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/glm-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/ernie4_5-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/seed-oss-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/olmo2-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/olmo3-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/exaone4-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/granitemoe-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/olmoe-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/qwen2moe-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/glm4moe-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/ernie45moe-tiny
    python3 tools/make_tiny_gguf.py --llama-cpp /path/to/llama.cpp tests/goldens/gptoss-tiny

llama.cpp is the one the llama-cpp-python sdist vendors (docs/PERFORMANCE.md). Writes
DIR/<name>.bf16.gguf (--outtype bf16: the checkpoint's bf16 matrices as they are). What the
converter does per family, and the engine must read back:
  gemma3 (gemma3-tiny.bf16.gguf): every norm stored in f32 with Gemma's 1 added (x_hat * (1 + w)
    becomes x_hat * w'); llama.cpp's layer pattern and rope bases.
  phi3 (phi3-tiny-longrope.bf16.gguf): qkv_proj and gate_up_proj kept fused (attn_qkv, ffn_up);
    rope.dimension_count for the partial rotary; longrope's factors as the tensors
    rope_factors_long / rope_factors_short, the switch in rope.scaling.original_context_length
    and the cos/sin scale in rope.scaling.attn_factor.
  llama, from MistralForCausalLM (mistral-tiny.bf16.gguf): q/k rows permuted into llama.cpp's
    interleaved rope layout. (The converter writes no sliding window for Mistral.)
  llama, from LlamaForCausalLM (llama3-tiny.bf16.gguf): the same, and Llama 3's rope scaling
    precomputed as one divisor per frequency, the tensor rope_freqs.weight.
  qwen3moe (qwen3-moe-tiny.bf16.gguf, from qwen3-moe-tiny-gguf): each layer's experts stacked into
    one 3-D tensor per role (ffn_gate_exps, ffn_up_exps, ffn_down_exps), the router as
    ffn_gate_inp in f32; expert_count, expert_used_count, expert_feed_forward_length. It has no
    dense layer, so qwen3-moe-tiny (mlp_only_layers) is refused by the converter.
  gemma2 (gemma2-tiny.bf16.gguf, from gemma2-tiny-gguf): norms stored with the 1 added, as gemma3's;
    attn_logit_softcapping, final_logit_softcapping and the sliding window as metadata, no layer
    pattern (llama.cpp's gemma2 alternates from layer 0) and no query_pre_attn_scalar.
  qwen3 (qwen3-tiny-yarn.bf16.gguf): yarn as rope.scaling.type, rope.scaling.factor and
    rope.scaling.original_context_length.
  granite (granite-tiny.bf16.gguf): llama's layout (q/k rows permuted) and its four scalars as
    embedding_scale, residual_scale, attention.scale and logit_scale.
  smollm3 (smollm3-tiny.bf16.gguf): llama's layout (q/k rows permuted); no key for the NoPE layers
    (llama.cpp's smollm3 takes every fourth).
  chatglm, from GlmForCausalLM (glm-tiny.bf16.gguf): glm4's rows and fused ffn_up without its sandwich
    norms; context_length from seq_length (written here as max_position_embeddings).
  glm4 (glm4-tiny.bf16.gguf): q/k rows and biases as HF stores them (adjacent pairs rotating;
    llama.cpp's rope type "norm"), rope.dimension_count for the half that rotates, gate_up_proj
    kept fused as ffn_up, the sandwich norms as post_attention_norm / post_ffw_norm.
  ernie4_5 (ernie4_5-tiny.bf16.gguf): q/k rows as HF stores them (adjacent pairs rotating).
  seed_oss (seed-oss-tiny.bf16.gguf): Llama's names, q/k/v biases, HF's half-split rows (rope "neox").
  olmo2 (olmo2-tiny.bf16.gguf): no input norms; the output norms as post_attention_norm / post_ffw_norm,
    the q/k norms over all heads as attn_q_norm [nq hd] / attn_k_norm [nkv hd]; HF's half-split rows.
    OLMo 3 (olmo3-tiny.bf16.gguf) as olmo2 too, with the window, the layer pattern and freq_base_swa.
  exaone4 (exaone4-tiny.bf16.gguf): olmo2's norm names, per-head q/k norms, the window and its layer
    pattern as metadata (no key for the NoPE global layers), Llama 3's scaling as rope_freqs.weight.
  granitemoe (granitemoe-tiny.bf16.gguf): granite's scalars and layout, the stacked input_linear split
    into ffn_gate_exps / ffn_up_exps, output_linear as ffn_down_exps, the router as ffn_gate_inp.
  olmoe (olmoe-tiny.bf16.gguf): qwen3moe's 3-D experts and router, olmo2's full-width q/k norms; no key
    for the routing weights' renormalisation (llama.cpp's olmoe never renormalises).
  qwen2moe (qwen2moe-tiny.bf16.gguf): qwen3moe's 3-D experts and router, qwen2's q/k/v biases, the
    shared expert as ffn_{gate,up,down}_shexp and its gate as the 1-D ffn_gate_inp_shexp, its width as
    expert_shared_feed_forward_length (llama.cpp's qwen2moe never renormalises the routing weights).
  glm4moe (glm4moe-tiny.bf16.gguf): the experts as 3-D tensors, the shared expert as *_shexp, the score
    bias as exp_probs_b.bias, leading_dense_block_count, expert_gating_func sigmoid, expert_weights_scale
    and _norm (no expert groups: llama.cpp reads none), the rotary width as rope.dimension_count.
  ernie4_5-moe (ernie45moe-tiny.bf16.gguf): ernie4_5's rows, the experts, *_shexp (their width written as
    intermediate_size / num_key_value_heads), the softmax score bias as exp_probs_b.bias,
    leading_dense_block_count and interleave_moe_layer_step.
  gpt-oss (gptoss-tiny.bf16.gguf, from its bf16 checkpoint: the converter's path for experts that are not
    MXFP4): gate_up_proj de-interleaved into ffn_gate_exps / ffn_up_exps and transposed, their biases
    as [E, I] tensors, the sinks as attn_sinks, the MLP's input norm as post_attention_norm, yarn without
    a truncate key, the window without a pattern (llama.cpp's gpt-oss: every other layer from layer 0).
  llama, from MixtralForCausalLM (mixtral-tiny.bf16.gguf): the llama layout (q/k rows permuted)
    with qwen3moe's 3-D expert tensors and router, llama.expert_count and expert_used_count, and no
    expert width (the experts are feed_forward_length wide).

The checkpoints have no tokenizer (the goldens are token ids), and the converter's tokenizer step
needs a real one (it fingerprints the pre-tokenizer), so that one step is replaced: the vocabulary
written is placeholder SentencePiece pieces with the config's special ids. Everything else (tensor
names, the metadata) is the converter's.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

# model_type -> (converter module, class whose set_vocab is replaced, file name stem)
FAMILIES = {
    "gemma3_text": ("gemma", "Gemma3Model", "gemma3-tiny"),
    "phi3": ("phi", "Phi3MiniModel", "phi3-tiny-longrope"),
    "mistral": ("llama", "LlamaModel", "mistral-tiny"),
    "llama": ("llama", "LlamaModel", "llama3-tiny"),
    "qwen3_moe": ("qwen", "Qwen3MoeModel", "qwen3-moe-tiny"),
    "mixtral": ("llama", "LlamaModel", "mixtral-tiny"),
    "gemma2": ("gemma", "Gemma2Model", "gemma2-tiny"),
    "qwen3": ("qwen", "Qwen3Model", None),  # None: the folder's name
    "granite": ("granite", "GraniteModel", "granite-tiny"),
    "smollm3": ("llama", "SmolLM3Model", "smollm3-tiny"),
    "glm4": ("glm", "Glm4Model", "glm4-tiny"),
    "glm": ("chatglm", "ChatGLMModel", "glm-tiny"),
    "ernie4_5": ("ernie", "Ernie4_5Model", "ernie4_5-tiny"),
    "seed_oss": ("olmo", "SeedOssModel", "seed-oss-tiny"),
    "olmo2": ("olmo", "Olmo2Model", "olmo2-tiny"),
    "olmo3": ("olmo", "Olmo2Model", "olmo3-tiny"),
    "exaone4": ("exaone", "Exaone4Model", "exaone4-tiny"),
    "granitemoe": ("granite", "GraniteMoeModel", "granitemoe-tiny"),
    "olmoe": ("olmo", "OlmoeModel", "olmoe-tiny"),
    "qwen2_moe": ("qwen", "Qwen2MoeModel", "qwen2moe-tiny"),
    "glm4_moe": ("glm", "Glm4MoeModel", "glm4moe-tiny"),
    "ernie4_5_moe": ("ernie", "Ernie4_5MoeModel", "ernie45moe-tiny"),
    "gpt_oss": ("gpt_oss", "GptOssModel", "gptoss-tiny"),
}


def placeholder_vocab(config, gguf, model_type):
    """set_vocab replacement: vocab_size pieces, the config's pad / eos / bos, unk after them."""
    vocab_size = config["vocab_size"]
    eos = config["eos_token_id"]
    ids = {"pad": config.get("pad_token_id"), "eos": eos[0] if isinstance(eos, list) else eos,
           "bos": config["bos_token_id"]}
    special = {i: f"<{k}>" for k, i in ids.items() if i is not None}
    unk = 3 if 3 not in special else max(special) + 1
    special[unk] = "<unk>"
    pieces = [special.get(i, f"\u2581t{i}") for i in range(vocab_size)]

    def set_vocab(self):
        w = self.gguf_writer
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(pieces)
        w.add_token_scores([0.0 if i in special else -float(i) for i in range(vocab_size)])
        w.add_token_types([gguf.TokenType.UNKNOWN if i == unk else gguf.TokenType.CONTROL if i in special else
                           gguf.TokenType.NORMAL for i in range(vocab_size)])
        if ids["pad"] is not None:
            w.add_pad_token_id(ids["pad"])
        w.add_eos_token_id(ids["eos"])
        w.add_bos_token_id(ids["bos"])
        w.add_unk_token_id(unk)
        w.add_add_bos_token(True)
        if model_type in ("gemma3_text", "gemma2"):
            w.add_add_space_prefix(False)  # as Gemma3Model.set_vocab / Gemma2Model.set_vocab write it

    return set_vocab, pieces


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="the HF checkpoint folder; the .gguf is written beside it")
    parser.add_argument("--llama-cpp", required=True, help="llama.cpp source tree (convert_hf_to_gguf.py)")
    parser.add_argument("--outfile", default=None)
    args = parser.parse_args()
    with open(os.path.join(args.dir, "config.json")) as f:
        config = json.load(f)
    module_name, class_name, stem = FAMILIES[config["model_type"]]
    stem = stem or os.path.basename(os.path.normpath(args.dir))
    outfile = args.outfile or os.path.join(args.dir, f"{stem}.bf16.gguf")
    sys.path.insert(0, os.path.abspath(args.llama_cpp))
    import convert_hf_to_gguf  # noqa: E402  (puts the vendored gguf-py on sys.path)
    import gguf  # noqa: E402
    import importlib  # noqa: E402

    set_vocab, pieces = placeholder_vocab(config, gguf, config["model_type"])
    setattr(getattr(importlib.import_module(f"conversion.{module_name}"), class_name), "set_vocab", set_vocab)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "model")
        shutil.copytree(args.dir, src, ignore=shutil.ignore_patterns("*.gguf", "goldens*.json"))
        if config["model_type"] == "glm":
            # ChatGLMModel writes context_length from ChatGLM's seq_length, else from hidden_size (64
            # here: too short for the goldens' prompts); THUDM's configs carry seq_length.
            with open(os.path.join(src, "config.json"), "w") as f:
                json.dump({**config, "seq_length": config["max_position_embeddings"]}, f)
        # Gemma3Model.modify_tensors keeps len(model.vocab) + len(added_tokens) embedding rows.
        with open(os.path.join(src, "tokenizer.json"), "w") as f:
            json.dump({"model": {"vocab": {p: i for i, p in enumerate(pieces)}}, "added_tokens": []}, f)
        sys.argv = ["convert_hf_to_gguf.py", src, "--outtype", "bf16", "--outfile", os.path.abspath(outfile)]
        convert_hf_to_gguf.main()
    print(f"wrote {outfile} ({os.path.getsize(outfile)} bytes)")


if __name__ == "__main__":
    main()
