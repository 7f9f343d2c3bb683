"""LLM: the class nano-vllm's example.py and bench.py use (as nano-vllm's, the engine itself)."""
from .llm_engine import LLMEngine


class LLM(LLMEngine):
    __doc__ = LLMEngine.__doc__
