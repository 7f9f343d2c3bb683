"""Every bad parameter raises the right exception with a message naming the key: ValueError for
bad parameters and prompts, FileNotFoundError for a missing model, RuntimeError for a failure while
running (here an injected step fault, as a device error would be)."""
import math
import os

import pytest

from conftest import GOLDENS, TINY
from minivllm import LLM, SamplingParams

QWEN = str(GOLDENS / "qwen3-tiny")

BAD_SAMPLING = [
    ({"temperature": -1}, "temperature"),
    ({"temperature": math.inf}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"min_p": 2}, "min_p"),
    ({"top_k": -2}, "top_k"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": "many"}, "max_tokens"),
    ({"ignore_eos": 1}, "ignore_eos"),
    ({"seed": 2**64}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"stop": [""]}, "stop"),
    ({"stop": [1]}, "stop"),
    ({"stop_token_ids": [-1]}, "stop_token_ids"),
    ({"n": 0}, r"\bn\b"),
    ({"n": 129}, r"\bn\b"),
    ({"logprobs": 21}, "logprobs"),
    ({"presence_penalty": 3}, "presence_penalty"),
    ({"frequency_penalty": -2.5}, "frequency_penalty"),
    ({"repetition_penalty": 0}, "repetition_penalty"),
    ({"temprature": 0.5}, "temprature"),
    ({"max_tokens": object()}, "max_tokens"),
]


@pytest.mark.parametrize("kwargs,key", BAD_SAMPLING, ids=[str(k) for k, _ in BAD_SAMPLING])
def test_bad_sampling_parameter(kwargs, key):
    with pytest.raises(ValueError, match=key):
        SamplingParams(**kwargs)


def test_setting_a_sampling_parameter_validates_it():
    sp = SamplingParams(temperature=0.6, max_tokens=8)
    assert (sp.temperature, sp.max_tokens, sp.ignore_eos) == (pytest.approx(0.6), 8, False)
    sp.max_tokens = 4
    assert sp.max_tokens == 4
    with pytest.raises(ValueError, match="max_tokens"):
        sp.max_tokens = -1
    with pytest.raises(AttributeError, match="bogus"):
        sp.bogus  # noqa: B018


BAD_CONFIG = [
    ({"max_num_seqs": 0}, "max_num_seqs"),
    ({"max_num_batched_tokens": 0}, "max_num_batched_tokens"),
    ({"block_size": 17}, "block_size"),
    ({"num_kvcache_blocks": 0}, "num_kvcache_blocks"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": 0}, "gpu_memory_utilization"),
    ({"max_model_len": 0}, "max_model_len"),
    ({"tensor_parallel_size": 0}, "world_size|tensor_parallel_size"),
    ({"device": "tpu"}, "device"),
    ({"num_threads": -1}, "num_threads"),
    ({"enforce_eager": "yes"}, "enforce_eager"),
    ({"max_num_sequences": 4}, "max_num_sequences"),
    ({"device": float("nan")}, "device"),
]


@pytest.mark.parametrize("kwargs,key", BAD_CONFIG, ids=[str(k) for k, _ in BAD_CONFIG])
def test_bad_engine_config(kwargs, key):
    with pytest.raises(ValueError, match=key):
        LLM(QWEN, **{**TINY, **kwargs})


def test_missing_model(tmp_path):
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        LLM(missing, **TINY)


@pytest.fixture(scope="module")
def llm():
    llm = LLM(QWEN, **TINY)
    yield llm
    llm.exit()


@pytest.mark.parametrize("prompt,words", [([], "empty"), ([1, 512], "vocabulary"), ([1, -3], "not a token id"),
                                          ([1] * 300, "max_model_length")])
def test_bad_prompt(llm, prompt, words):
    with pytest.raises(ValueError, match=words):
        llm.generate([[5, 6], prompt], SamplingParams(max_tokens=2), use_tqdm=False)
    assert llm.is_finished()  # the good prompt before it was aborted, not left in the engine


def test_sampling_params_list_length(llm):
    with pytest.raises(ValueError, match="2 entries for 3 prompts"):
        llm.generate([[1], [2], [3]], [SamplingParams(), SamplingParams()], use_tqdm=False)


def test_no_tokenizer_no_chat_template(llm):
    with pytest.raises(ValueError, match="no tokenizer"):
        llm.generate(["text"], use_tqdm=False)
    with pytest.raises(ValueError, match="no tokenizer"):
        llm.tokenizer.encode("text")


def test_device_failure_is_runtime_error():
    # MINIVLLM_STEP_FAULT=<id>: every step whose input holds that token fails, as a device error would.
    os.environ["MINIVLLM_STEP_FAULT"] = "7"
    try:
        llm = LLM(QWEN, **TINY)
    finally:
        del os.environ["MINIVLLM_STEP_FAULT"]
    with pytest.raises(RuntimeError, match="injected step fault"):
        llm.generate([[1, 2, 3], [1, 7, 3]], SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    # The engine goes on with the next batch.
    assert llm.is_finished()
    assert len(llm.generate([[1, 2, 3]], SamplingParams(max_tokens=4), use_tqdm=False)[0]["token_ids"]) >= 1
    llm.exit()
    with pytest.raises(RuntimeError, match="exited"):
        llm.generate([[1, 2]], use_tqdm=False)
