#!/usr/bin/env python3
"""transformers' rotary frequencies and attention factor for rope_scaling variants (yarn, linear).

Usage:
    python3 tools/make_rope_goldens.py tests/goldens/rope-scaling/rope_goldens.json

Each case is a config.json (a Qwen3 shape with one rope_parameters / rope_scaling variant) and what
transformers' ROPE_INIT_FUNCTIONS make of it: inv_freq (float32, as the model's rotary embedding
holds it) and attention_scaling (the factor on cos and sin). tests/loader/rope_scaling_test.cc loads
each config with the engine's loader and compares. Versions used: tools/requirements-goldens.txt.
"""
import json
import sys

import torch
import transformers
from transformers import Qwen3Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

COMMAND = "python3 tools/make_rope_goldens.py tests/goldens/rope-scaling/rope_goldens.json"


def base_config(**kw):
    c = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32, max_position_embeddings=1024, rms_norm_eps=1e-6,
             tie_word_embeddings=True, architectures=["Qwen3ForCausalLM"])
    c.update(kw)
    return c


# name -> config.json keys. Bases and lengths put the yarn ramp across several of the 16 frequencies.
CASES = {
    # Qwen's long-context recipe, scaled down: factor 4 over 256, max_position_embeddings 1,024.
    "yarn": base_config(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                                         "original_max_position_embeddings": 256}),
    # The recipe as users add it to a transformers 4 config: max_position_embeddings (640) is not
    # factor x original; the factor given wins (transformers 5 warns and uses it, as vLLM does).
    "yarn_v4_spelling": base_config(rope_theta=1e4, max_position_embeddings=640,
                                    rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                  "original_max_position_embeddings": 256}),
    # No original_max_position_embeddings: max_position_embeddings is the pretrained length.
    "yarn_no_original": base_config(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 8.0}),
    # gpt-oss's form: the ramp's ends not rounded, narrower betas, an explicit attention factor.
    "yarn_untruncated": base_config(rope_parameters={"rope_type": "yarn", "rope_theta": 15e4, "factor": 32.0,
                                                     "original_max_position_embeddings": 96, "beta_fast": 32.0,
                                                     "beta_slow": 1.0, "truncate": False}),
    "yarn_betas_attention_factor": base_config(rope_parameters={
        "rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0, "original_max_position_embeddings": 512,
        "beta_fast": 8.0, "beta_slow": 2.0, "attention_factor": 0.75}),
    # DeepSeek's form: the attention factor from mscale / mscale_all_dim.
    "yarn_mscale": base_config(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 40.0,
                                                "original_max_position_embeddings": 64, "mscale": 1.0,
                                                "mscale_all_dim": 0.5}),
    # Partial rotary: 24 of head_dim 32 rotate.
    "yarn_partial": base_config(partial_rotary_factor=0.75,
                                rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
                                                 "original_max_position_embeddings": 256,
                                                 "partial_rotary_factor": 0.75}),
    "linear": base_config(rope_parameters={"rope_type": "linear", "rope_theta": 1e4, "factor": 2.5}),
}


def main():
    out = sys.argv[1]
    cases = []
    for name, keys in CASES.items():
        config = Qwen3Config(**keys)
        rope = config.rope_parameters
        inv_freq, attention = ROPE_INIT_FUNCTIONS[rope["rope_type"]](config, torch.device("cpu"))
        cases.append({"name": name, "config": keys, "inv_freq": [float(x) for x in inv_freq.tolist()],
                      "attention_scaling": float(attention)})
        print(f"{name}: attention {float(attention):.6f}, inv_freq {inv_freq[:4].tolist()} ...")
    doc = {"transformers_version": transformers.__version__, "torch_version": torch.__version__,
           "command": COMMAND, "cases": cases}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
