"""minivllm: a small, fast LLM inference engine (C++20 and CUDA) with nano-vllm's Python API.

    from minivllm import LLM, SamplingParams
    llm = LLM("SmolLM2-135M-Instruct")
    outputs = llm.generate(["Hello"], SamplingParams(temperature=0.6, max_tokens=32))
    print(outputs[0]["text"])
"""
import os as _os

from . import _minivllm

# Tensor-parallel ranks 1..N-1 run minivllm-worker, installed beside this package.
_worker = _os.path.join(_os.path.dirname(__file__), "minivllm-worker")
if _os.path.exists(_worker):
    _os.environ.setdefault("MINIVLLM_WORKER", _worker)

from .sampling_params import SamplingParams  # noqa: E402
from .tokenizer import Tokenizer  # noqa: E402
from .llm_engine import LLMEngine  # noqa: E402
from .llm import LLM  # noqa: E402

__all__ = ["LLM", "LLMEngine", "SamplingParams", "Tokenizer"]
