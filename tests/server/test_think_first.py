#!/usr/bin/env python3
"""Thinking before a forced tool call (issue 49): Qwen3-0.6B's real config, tokenizer and chat
template (../shared/models/qwen3-0.6b) with dummy weights on the CPU, the official `openai` client,
--reasoning-parser auto (on: the template writes </think>). A named function's grammar lets the
reply open with one <think>...</think> block; logit_bias steers the dummy model into an empty one
(<think> first, </think> as soon as the grammar allows it), and the call after it still parses.
With enable_thinking false the grammar has no think block: the same bias cannot open one.

The thoughts' grammar itself (any text without "</think>", then the schema) is tested with the
same tokenizer in tests/structured/think_first_test.cc. Exits 77 (skipped) without the model
directory or the client.
"""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_openai_client import SHARED, main, openai, start_server, stop_server  # noqa: E402

QWEN3 = os.path.join(SHARED, "models", "qwen3-0.6b")
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"],
    "additionalProperties": False}}}
THINK, END_THINK = 151667, 151668  # Qwen3's <think> and </think> (added tokens, not special)


class ThinkFirstTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, cls.base = start_server(QWEN3, "--load-format", "dummy", "--max-model-len", "512",
                                          "--num-kvcache-blocks", "64", api_key="k", name="q")
        cls.client = openai.OpenAI(base_url=cls.base + "/v1", api_key="k", max_retries=0, timeout=900)

    @classmethod
    def tearDownClass(cls):
        code = stop_server(cls.proc)
        cls.proc.stderr.close()
        assert code == 0, f"serve exited with {code}"

    def call(self, **extra):
        r = self.client.chat.completions.create(
            model="q", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[TOOL],
            tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=40, temperature=0,
            logit_bias={str(THINK): 50, str(END_THINK): 100}, extra_body=extra)
        choice = r.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
        self.assertEqual([c.function.name for c in choice.message.tool_calls], ["get_weather"])
        args = json.loads(choice.message.tool_calls[0].function.arguments)
        self.assertEqual(list(args), ["city"])
        self.assertLessEqual(len(args["city"]), 8)
        return r

    def test_a_think_block_may_come_before_the_call(self):
        thinking = self.call()
        plain = self.call(chat_template_kwargs={"enable_thinking": False})
        # <think> and </think> came first (their thoughts are empty: no reasoning_content), then the
        # call; without thinking the grammar allowed neither.
        self.assertIsNone(getattr(thinking.choices[0].message, "reasoning_content", None))
        self.assertGreaterEqual(thinking.usage.completion_tokens - plain.usage.completion_tokens, 2)


class OpenThinkBlockTest(unittest.TestCase):
    """A template that ends the generation prompt with <think> (as DeepSeek-R1's distills, QwQ and
    Qwen3's thinking-only models do; here Qwen3-0.6B's template so changed, in a scratch copy of
    the model folder): the reply starts inside the block, so what comes before </think> is
    reasoning_content and the rest content (vLLM's deepseek_r1 parser), and a forced call's grammar
    first lets the thoughts end."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        model = os.path.join(cls.tmp.name, "qwen3-open-think")
        shutil.copytree(QWEN3, model)
        with open(os.path.join(model, "tokenizer_config.json")) as f:
            tc = json.load(f)
        prompt = "{{- '<|im_start|>assistant\\n' }}"
        assert prompt in tc["chat_template"], "Qwen3's generation prompt moved"
        tc["chat_template"] = tc["chat_template"].replace(prompt, "{{- '<|im_start|>assistant\\n<think>\\n' }}")
        with open(os.path.join(model, "tokenizer_config.json"), "w") as f:
            json.dump(tc, f)
        cls.proc, cls.base = start_server(model, "--load-format", "dummy", "--max-model-len", "512",
                                          "--num-kvcache-blocks", "64", api_key="k", name="q")
        cls.client = openai.OpenAI(base_url=cls.base + "/v1", api_key="k", max_retries=0, timeout=900)

    @classmethod
    def tearDownClass(cls):
        code = stop_server(cls.proc)
        cls.proc.stderr.close()
        cls.tmp.cleanup()
        assert code == 0, f"serve exited with {code}"

    def test_the_reply_reasons_until_the_block_closes(self):
        def reply(max_tokens, end_think_bias):
            r = self.client.chat.completions.create(
                model="q", messages=[{"role": "user", "content": "Hi"}], max_tokens=max_tokens, temperature=0,
                logit_bias={str(THINK): -100, str(END_THINK): end_think_bias}, extra_body={"ignore_eos": True})
            return r.choices[0].message
        # Thoughts that never close: all reasoning (read as Qwen3's, they would be content).
        m = reply(6, -100)
        self.assertTrue(getattr(m, "reasoning_content", None), m)
        self.assertFalse(m.content, m)
        # </think> at once: no thoughts, and the tag is no content either.
        m = reply(1, 100)
        self.assertIsNone(getattr(m, "reasoning_content", None), m)
        self.assertFalse(m.content, m)

    def test_a_forced_call_lets_the_thoughts_end_first(self):
        r = self.client.chat.completions.create(
            model="q", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[TOOL],
            tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=40, temperature=0,
            logit_bias={str(END_THINK): 100}, logprobs=True)
        choice = r.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
        args = json.loads(choice.message.tool_calls[0].function.arguments)
        self.assertEqual(list(args), ["city"])
        # </think> came first (the grammar allowed thoughts or it, not the call), so no thoughts.
        self.assertEqual(choice.logprobs.content[0].token, "</think>")
        self.assertIsNone(getattr(choice.message, "reasoning_content", None))


if __name__ == "__main__":
    sys.exit(main(os.path.join(QWEN3, "tokenizer.json"), ""))
