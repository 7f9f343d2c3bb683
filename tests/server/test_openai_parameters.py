#!/usr/bin/env python3
"""What applications send, through the official `openai` client against `minivllm serve` with the
default model on the CPU (issue 49): every parameter honoured or refused, never dropped.

- an unknown parameter is a 400 naming it; so is a known one the server cannot honour;
- `user`, `metadata`, `store` and `service_tier` are accepted and ignored;
- `logit_bias` moves greedy decoding (a banned first token is not produced, a +100 token is);
- `min_tokens` holds back eos; `bad_words` keeps a word out of the text.

Run by ctest with MINIVLLM_BIN and MINIVLLM_MODEL set; exits 77 (skipped) only when the model or
the client is missing, as test_openai_client.py does (whose server helpers it uses).
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_openai_client import API_KEY, BIN, MODEL, NAME, http, openai, start_server, stop_server  # noqa: E402


class ParametersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, cls.base = start_server(MODEL, "--max-model-len", "1024", api_key=API_KEY, name=NAME)
        cls.client = openai.OpenAI(base_url=cls.base + "/v1", api_key=API_KEY, max_retries=0, timeout=600)
        cls.auth = {"Authorization": "Bearer " + API_KEY}

    @classmethod
    def tearDownClass(cls):
        code = stop_server(cls.proc)
        err = cls.proc.stderr.read()
        cls.proc.stderr.close()
        assert code == 0, f"serve exited with {code}: {err}"

    def complete(self, **kw):
        return self.client.completions.create(model=NAME, **kw)

    def chat(self, **kw):
        return self.client.chat.completions.create(model=NAME, **kw)

    def token_ids(self, choice):
        """The completion's token ids, from logprobs with return_tokens_as_token_ids ("token_id:N")."""
        return [int(t.split(":")[1]) for t in choice.logprobs.tokens]

    def assert_400(self, param, call, **kw):
        with self.assertRaises(openai.BadRequestError) as cm:
            call(**kw)
        self.assertEqual(cm.exception.body.get("param"), param, cm.exception.body)
        self.assertIn(param, cm.exception.body.get("message", ""))

    # -- refused, never dropped -----------------------------------------------------------------

    def test_unknown_parameter_is_400_naming_it(self):
        self.assert_400("foo", self.complete, prompt="Hi", max_tokens=2, extra_body={"foo": 1})
        self.assert_400("foo", self.chat, messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
                        extra_body={"foo": 1})
        # A parameter of the other endpoint is unknown here.
        self.assert_400("echo", self.chat, messages=[{"role": "user", "content": "Hi"}], extra_body={"echo": True})

    def test_known_but_unhonourable_parameters_are_400_naming_them(self):
        msgs = [{"role": "user", "content": "Hi"}]
        self.assert_400("reasoning_effort", self.chat, messages=msgs, reasoning_effort="low")
        self.assert_400("suffix", self.complete, prompt="Hi", suffix="!")
        self.assert_400("best_of", self.complete, prompt="Hi", best_of=2)
        self.assert_400("echo", self.complete, prompt="Hi", echo=True, logprobs=1)  # the prompt's logprobs

    def test_bookkeeping_fields_are_accepted(self):
        r = self.chat(messages=[{"role": "user", "content": "Hi"}], max_tokens=2, user="u-1",
                      metadata={"run": "test"}, store=False, service_tier="auto")
        self.assertEqual(len(r.choices), 1)

    # -- logit_bias, min_tokens, bad_words --------------------------------------------------------

    def test_logit_bias(self):
        kw = dict(prompt="The capital of France is", max_tokens=4, temperature=0, logprobs=0,
                  extra_body={"return_tokens_as_token_ids": True})
        plain = self.token_ids(self.complete(**kw).choices[0])
        banned = self.token_ids(self.complete(logit_bias={str(plain[0]): -100}, **kw).choices[0])
        self.assertNotEqual(banned[0], plain[0])
        forced_id = json.loads(http(self.base + "/tokenize", {"prompt": " banana"}, self.auth)[1])["tokens"][-1]
        forced = self.token_ids(self.complete(logit_bias={str(forced_id): 100}, **kw).choices[0])
        self.assertEqual(forced, [forced_id] * 4)
        # Chat too.
        r = self.chat(messages=[{"role": "user", "content": "Say hello"}], max_tokens=3, temperature=0,
                      logit_bias={str(forced_id): 100}, logprobs=True,
                      extra_body={"return_tokens_as_token_ids": True})
        self.assertEqual([t.token for t in r.choices[0].logprobs.content], [f"token_id:{forced_id}"] * 3)
        # Out of range: the value, the id (the vocabulary is 49152), the key.
        self.assert_400("logit_bias", self.complete, prompt="Hi", logit_bias={"5": 101})
        self.assert_400("logit_bias", self.complete, prompt="Hi", logit_bias={"1000000": 1})
        self.assert_400("logit_bias", self.complete, prompt="Hi", logit_bias={"x": 1})

    def test_min_tokens(self):
        msgs = [{"role": "user", "content": "Reply with the single word: yes"}]
        plain = self.chat(messages=msgs, max_tokens=64, temperature=0)
        self.assertEqual(plain.choices[0].finish_reason, "stop")
        n = plain.usage.completion_tokens
        longer = self.chat(messages=msgs, max_tokens=64, temperature=0, extra_body={"min_tokens": n + 5})
        self.assertGreaterEqual(longer.usage.completion_tokens, n + 5)
        self.assert_400("min_tokens", self.chat, messages=msgs, max_tokens=4, extra_body={"min_tokens": 5})

    def test_bad_words(self):
        kw = dict(prompt="The capital of France is the city of", max_tokens=8, temperature=0)
        plain = self.complete(**kw).choices[0].text
        self.assertIn("Paris", plain)
        without = self.complete(extra_body={"bad_words": ["Paris"]}, **kw).choices[0].text
        self.assertNotIn("Paris", without)


def main():
    if openai is None:
        print("SKIP: the openai package is not installed (pip install openai)")
        return 77
    if not os.path.exists(MODEL) or not os.path.exists(BIN):
        print(f"SKIP: {MODEL} or {BIN} not found (tools/fetch_default_model.sh)")
        return 77
    result = unittest.main(exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
