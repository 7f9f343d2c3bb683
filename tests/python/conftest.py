"""Shared fixtures of the Python API tests (pytest tests/python, run by tools/run_tests.sh against
the package that `pip install .` built). Models: the tiny HF checkpoints of tests/goldens (with
Hugging Face's greedy tokens), stories260K from ../shared (a real tokenizer, fast), and the
default model SmolLM2-135M-Instruct in models/ (a chat template; tools/fetch_default_model.sh)."""
import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("MINIVLLM_SHARED_DIR", ROOT.parent / "shared"))
GOLDENS = ROOT / "tests" / "goldens"
GOLDEN_MODELS = ["qwen3-tiny", "llama3-tiny", "qwen3-tiny-kv4", "qwen3-moe-tiny"]
STORIES = SHARED / "models" / "stories260K" / "stories260K.gguf"
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

# Small engine settings that start fast on the CPU (as tests/golden/engine_test_util.h's).
TINY = dict(device="cpu", block_size=16, max_num_seqs=16, max_model_len=256, max_num_batched_tokens=1024,
            num_kvcache_blocks=256)


def golden_cases(model):
    with open(GOLDENS / model / "goldens.json") as f:
        return json.load(f)["cases"]


def cli_binary():
    """The CLI to compare with: $MINIVLLM_CLI (tools/run_tests.sh sets it), else a build folder's."""
    if os.environ.get("MINIVLLM_CLI"):
        return os.environ["MINIVLLM_CLI"]
    for d in ("release", "cpu"):
        p = ROOT / "build" / d / "minivllm"
        if p.exists():
            return str(p)
    return None


@pytest.fixture
def stories():
    if not STORIES.exists():
        pytest.fail(f"{STORIES} is missing (../shared/models)")
    return str(STORIES)


@pytest.fixture
def smollm2():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} is missing: run tools/fetch_default_model.sh")
    return str(SMOLLM2)


@pytest.fixture
def cli():
    path = cli_binary()
    if path is None or not os.path.exists(path):
        pytest.fail("no minivllm CLI to compare with: build it (cmake --preset cpu) or set MINIVLLM_CLI")
    return path
