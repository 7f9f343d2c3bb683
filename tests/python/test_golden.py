"""Greedy output through Python equals Hugging Face's (the goldens) and the CLI's."""
import json
import subprocess

import pytest

from conftest import GOLDEN_MODELS, GOLDENS, TINY, golden_cases
from minivllm import LLM, SamplingParams


def greedy(n):
    return SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)


def cli_flags(config):
    flags = []
    for key, value in config.items():
        flags += ["--" + key.replace("_", "-"), str(value)]
    return flags


@pytest.mark.parametrize("model", GOLDEN_MODELS)
def test_greedy_equals_hf_goldens_and_cli(model, cli):
    cases = golden_cases(model)
    prompts = [c["prompt_ids"] for c in cases]
    n = len(cases[0]["greedy_ids"])
    llm = LLM(str(GOLDENS / model), **TINY)
    outputs = llm.generate(prompts, greedy(n), use_tqdm=False)
    llm.exit()
    assert [o["token_ids"] for o in outputs] == [c["greedy_ids"] for c in cases]

    r = subprocess.run([cli, "generate", "--model", str(GOLDENS / model), "--prompt-ids", json.dumps(prompts),
                        "--temperature", "0", "--ignore-eos", "--max-tokens", str(n), "--json"] + cli_flags(TINY),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert [o["token_ids"] for o in outputs] == [o["token_ids"] for o in json.loads(r.stdout)]


def test_tensor_parallel_worker_from_the_package():
    # Rank 1 is the minivllm-worker installed beside the package: HF's tokens as with one rank.
    cases = golden_cases("qwen3-tiny")
    llm = LLM(str(GOLDENS / "qwen3-tiny"), **TINY, tensor_parallel_size=2)
    assert llm.tensor_parallel_size == 2
    outputs = llm.generate([c["prompt_ids"] for c in cases], greedy(len(cases[0]["greedy_ids"])), use_tqdm=False)
    llm.exit()
    assert [o["token_ids"] for o in outputs] == [c["greedy_ids"] for c in cases]


def test_mixture_of_experts_with_the_expert_parallel_keyword():
    # Qwen3-MoE over two ranks, whole experts per rank (enable_expert_parallel): HF's tokens.
    cases = golden_cases("qwen3-moe-tiny")
    llm = LLM(str(GOLDENS / "qwen3-moe-tiny"), **TINY, tensor_parallel_size=2, enable_expert_parallel=True)
    outputs = llm.generate([c["prompt_ids"] for c in cases], greedy(len(cases[0]["greedy_ids"])), use_tqdm=False)
    llm.exit()
    assert [o["token_ids"] for o in outputs] == [c["greedy_ids"] for c in cases]


def test_text_prompts_equal_cli(stories, cli):
    prompts = ["Once upon a time", "The little dog"]
    llm = LLM(stories, **TINY)
    outputs = llm.generate(prompts, greedy(24), use_tqdm=False)
    llm.exit()
    args = [cli, "generate", "--model", stories, "--temperature", "0", "--ignore-eos", "--max-tokens", "24", "--json"]
    for p in prompts:
        args += ["--prompt", p]
    r = subprocess.run(args + cli_flags(TINY), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    expected = json.loads(r.stdout)
    assert [(o["text"], o["token_ids"]) for o in outputs] == [(o["text"], o["token_ids"]) for o in expected]
    assert all(len(o["token_ids"]) == 24 and o["text"] for o in outputs)


def test_embed_equals_hf_last_hidden_state():
    """LLM.embed: each prompt's last-token state after the final norm, L2-normalised, against
    transformers' (tests/goldens/qwen3-tiny/embeddings.json, tools/make_embedding_goldens.py)."""
    with open(GOLDENS / "qwen3-tiny" / "embeddings.json") as f:
        cases = json.load(f)["cases"]
    llm = LLM(str(GOLDENS / "qwen3-tiny"), **TINY)
    outs = llm.embed([c["prompt_ids"] for c in cases], use_tqdm=False)
    for c, o in zip(cases, outs):
        want = c["embedding"]
        norm = sum(x * x for x in want) ** 0.5
        assert o["prompt_token_ids"] == c["prompt_ids"]
        assert max(abs(a - b / norm) for a, b in zip(o["embedding"], want)) < 1e-3
    llm.exit()


def test_hf_overrides_and_generation_config(tmp_path):
    """hf_overrides takes a dict (qwen3-tiny with Qwen's yarn recipe gives qwen3-tiny-yarn's goldens);
    generation_config gives get_default_sampling_params() and the default of generate()."""
    overrides = {"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                     "original_max_position_embeddings": 128}}
    (tmp_path / "generation_config.json").write_text(json.dumps({"temperature": 0.0, "top_k": 50,
                                                                 "max_new_tokens": 5}))
    llm = LLM(str(GOLDENS / "qwen3-tiny"), **TINY, hf_overrides=overrides, generation_config=str(tmp_path))
    defaults = llm.get_default_sampling_params()
    assert defaults.temperature == 0.0 and defaults.max_tokens == 5 and defaults.top_k == -1  # 50: HF's own
    case = golden_cases("qwen3-tiny-yarn")[0]
    out = llm.generate([case["prompt_ids"]], use_tqdm=False)[0]  # greedy, 5 tokens: the defaults
    assert out["token_ids"] == case["greedy_ids"][:5]
    llm.exit()
    plain = LLM(str(GOLDENS / "qwen3-tiny"), **TINY, generation_config="vllm")
    assert plain.get_default_sampling_params() == SamplingParams()
    plain.exit()


def test_chat_template_override_and_continue_final_message(stories):
    """chat_template replaces the model's (stories260K has none); continue_final_message leaves the
    last message open: the prompt is the rendered conversation cut after it."""
    llm = LLM(stories, **TINY, chat_template="{% for m in messages %}{{ m.content }}{% if not loop.last %} {% endif %}"
                                              "{% endfor %}{% if add_generation_prompt %}!{% endif %}")
    conv = [{"role": "user", "content": "Once upon"}, {"role": "assistant", "content": "a time"}]
    sp = SamplingParams(max_tokens=4, temperature=0)
    out = llm.chat(conv, sp, use_tqdm=False, add_generation_prompt=False, continue_final_message=True)[0]
    assert out["prompt_token_ids"] == llm.tokenizer.encode("Once upon a time", add_special_tokens=False)
    plain = llm.chat(conv, sp, use_tqdm=False)[0]
    assert plain["prompt_token_ids"] == llm.tokenizer.encode("Once upon a time!", add_special_tokens=False)
    with pytest.raises(ValueError, match="add_generation_prompt"):
        llm.chat(conv, sp, use_tqdm=False, continue_final_message=True)
    llm.exit()
