#!/usr/bin/env python3
"""A harmony model (gpt-oss) behind `minivllm serve`: the server's wiring of the harmony parser.
gpt-oss's tokenizer is not in ../shared, so Qwen3-0.6B's folder (dummy weights) stands in, copied
with harmony's seven special tokens added to its tokenizer and a small harmony chat template of
this test's own (gpt-oss's writes "Reasoning: {{ reasoning_effort }}" into its system message).
With that template the server picks the harmony parser on its own (--reasoning-parser and
--tool-call-parser auto): the reply is detokenized with its special tokens for the parser (a reply
that is not harmony comes back whole, specials included), tool_choice auto is served,
reasoning_effort reaches the template, response_format constrains the final message (the grammar
writes the markers before it), and a forced tool call is the grammar's commentary message to the
function.
How the parser splits harmony replies is tests/server/harmony_reply_test.cc's.
Exits 77 (skipped) without the model directory or the client.
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
MARKERS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
FIRST_ID = 151669  # after Qwen3's added tokens, inside its 151,936 embedding rows
END = FIRST_ID + MARKERS.index("<|end|>")
TEMPLATE = ("{%- if reasoning_effort is defined %}<|start|>system<|message|>Reasoning: {{ reasoning_effort }}<|end|>"
            "{%- endif %}{%- for m in messages %}<|start|>{{ m.role }}"
            "{%- if m.role == 'assistant' %}<|channel|>final{%- endif %}<|message|>{{ m.content }}<|end|>{%- endfor %}"
            "{%- if add_generation_prompt %}<|start|>assistant{%- endif %}")
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
HI = [{"role": "user", "content": "Hi"}]


class HarmonyServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        model = os.path.join(cls.tmp.name, "harmony")
        shutil.copytree(QWEN3, model)
        with open(os.path.join(model, "tokenizer.json")) as f:
            tok = json.load(f)
        for i, m in enumerate(MARKERS):
            tok["added_tokens"].append({"id": FIRST_ID + i, "content": m, "single_word": False, "lstrip": False,
                                        "rstrip": False, "normalized": False, "special": True})
        with open(os.path.join(model, "tokenizer.json"), "w") as f:
            json.dump(tok, f)
        with open(os.path.join(model, "tokenizer_config.json")) as f:
            cfg = json.load(f)
        cfg["chat_template"] = TEMPLATE
        for i, m in enumerate(MARKERS):
            cfg["added_tokens_decoder"][str(FIRST_ID + i)] = {"content": m, "lstrip": False, "normalized": False,
                                                               "rstrip": False, "single_word": False, "special": True}
        with open(os.path.join(model, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f)
        cls.proc, cls.base = start_server(model, "--load-format", "dummy", "--max-model-len", "256",
                                          "--num-kvcache-blocks", "32", api_key="k", name="h")
        cls.client = openai.OpenAI(base_url=cls.base + "/v1", api_key="k", max_retries=0, timeout=900)

    @classmethod
    def tearDownClass(cls):
        code = stop_server(cls.proc)
        cls.proc.stderr.close()
        cls.tmp.cleanup()
        assert code == 0, f"serve exited with {code}"

    def chat(self, **kw):
        return self.client.chat.completions.create(model="h", messages=HI, max_tokens=3, temperature=0, **kw)

    def test_the_parser_sees_the_special_tokens(self):
        # <|end|> three times: not a harmony header, so the parser hands the reply back whole; it has
        # the special tokens' text because a harmony reply is detokenized with them (else it is "").
        r = self.chat(logit_bias={str(END): 100})
        self.assertEqual(r.choices[0].message.content, "<|end|>" * 3)
        self.assertEqual(r.choices[0].finish_reason, "length")
        # The token ids are the same either way.
        c = self.client.completions.create(model="h", prompt="Hi", max_tokens=3, temperature=0,
                                           logit_bias={str(END): 100})
        self.assertEqual(c.choices[0].text, "")  # completions keep skip_special_tokens' default

    def test_reasoning_effort_reaches_the_template(self):
        plain = self.chat()
        high = self.chat(reasoning_effort="high")
        # The template's system message "Reasoning: high": more prompt tokens.
        self.assertGreater(high.usage.prompt_tokens, plain.usage.prompt_tokens + 3)
        r = self.client.responses.create(model="h", input="Hi", max_output_tokens=3, reasoning={"effort": "low"})
        self.assertEqual(r.reasoning.effort, "low")

    def test_tool_choice_auto_and_streams_are_served(self):
        # The openai (harmony) tool parser, picked from the template (it has no call syntax of the
        # other parsers' kind: a server that built one would fail the request).
        r = self.chat(tools=[TOOL], logit_bias={str(END): 100})
        self.assertEqual(r.choices[0].message.content, "<|end|>" * 3)
        self.assertFalse(r.choices[0].message.tool_calls)
        chunks = list(self.chat(tools=[TOOL], logit_bias={str(END): 100}, stream=True))
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in chunks if c.choices), "<|end|>" * 3)

    def test_response_format_constrains_the_final_message(self):
        # The grammar writes harmony's markers (the parser takes them out again) before the body:
        # <|channel|>final<|message|> is 4 tokens of this tokenizer, "{}" then fits in 4 more.
        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        r = self.client.chat.completions.create(
            model="h", messages=HI, max_tokens=24, temperature=0,
            response_format={"type": "json_schema", "json_schema": {"name": "e", "schema": schema}},
            logit_bias={str(FIRST_ID + MARKERS.index("<|channel|>")): 30})
        m = r.choices[0].message
        self.assertNotIn("<|", m.content or "", m)
        self.assertNotIn("<|", getattr(m, "reasoning_content", None) or "", m)
        self.assertEqual(r.choices[0].finish_reason, "stop", m)  # the grammar ended: only a stop token was allowed
        self.assertEqual(json.loads(m.content), {}, m)

    def test_a_forced_call_is_a_commentary_message(self):
        # The grammar writes the call's header (analysis may come first) and its arguments; the
        # parser reads it as the call. <|channel|> steered first, as gpt-oss opens its replies.
        tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string", "maxLength": 4}}, "required": ["city"],
            "additionalProperties": False}}}
        now = {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
        for choice, names in (({"type": "function", "function": {"name": "get_weather"}}, ["get_weather"]),
                              ("required", ["get_weather", "now"])):
            r = self.client.chat.completions.create(
                model="h", messages=HI, max_tokens=40, temperature=0, tools=[tool, now], tool_choice=choice,
                logit_bias={str(FIRST_ID + MARKERS.index("<|channel|>")): 30})
            m = r.choices[0].message
            self.assertEqual(r.choices[0].finish_reason, "tool_calls", m)
            self.assertEqual(len(m.tool_calls), 1, m)
            self.assertIn(m.tool_calls[0].function.name, names)
            args = json.loads(m.tool_calls[0].function.arguments)
            if m.tool_calls[0].function.name == "get_weather":
                self.assertEqual(list(args), ["city"])
            self.assertNotIn("<|", m.content or "", m)

    def test_bad_reasoning_effort_is_refused(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat(reasoning_effort="extreme")
        self.assertEqual(e.exception.body.get("param"), "reasoning_effort", e.exception.body)


if __name__ == "__main__":
    sys.exit(main(QWEN3))
