#!/usr/bin/env python3
"""What applications send, through the official `openai` client against `minivllm serve` with the
default model on the CPU (issue 49): every parameter honoured or refused, never dropped.

- an unknown parameter is a 400 naming it; so is a known one the server cannot honour;
- `user`, `metadata`, `store` and `service_tier` are accepted and ignored;
- `logit_bias` moves greedy decoding (a banned first token is not produced, a +100 token is);
- `min_tokens` holds back eos; `bad_words` keeps a word out of the text;
- structured outputs: `client.chat.completions.parse` with a Pydantic model, twenty varied JSON
  schemas (each reply checked with `jsonschema`), json_object, regex, choice and EBNF, with n,
  streaming and logprobs; an uncompilable schema is a 400, an unfinishable grammar ends `length`.

Run by ctest with MINIVLLM_BIN and MINIVLLM_MODEL set; exits 77 (skipped) only when the model or
the client is missing, as test_openai_client.py does (whose server helpers it uses).
"""
import concurrent.futures
import json
import os
import sys
import unittest
from typing import Annotated

sys.path.insert(0, os.path.dirname(__file__))
# main() runs this module's tests (unittest.main on __main__), skipping as that file does.
from test_openai_client import API_KEY, MODEL, NAME, http, main, openai, start_server, stop_server  # noqa: E402


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
        # The prompt's logprobs come in whole responses only (vLLM refuses them streamed too).
        self.assert_400("echo", self.complete, prompt="Hi", echo=True, logprobs=1, stream=True)
        self.assert_400("prompt_logprobs", self.complete, prompt="Hi", stream=True, extra_body={"prompt_logprobs": 1})

    def test_bookkeeping_fields_are_accepted(self):
        r = self.chat(messages=[{"role": "user", "content": "Hi"}], max_tokens=2, user="u-1",
                      metadata={"run": "test"}, store=False, service_tier="auto")
        self.assertEqual(len(r.choices), 1)

    # -- the prompt's logprobs ------------------------------------------------------------------

    def test_echo_with_logprobs_scores_the_prompt(self):
        """What lm-evaluation-harness's loglikelihood requests send (echo, logprobs 1, max_tokens 1): the
        prompt's tokens come first, the first without a logprob, and a continuation's prompt logprob
        is what generating it scored."""
        ids = json.loads(http(self.base + "/tokenize", {"prompt": "The capital of France is"}, self.auth)[1])["tokens"]
        as_ids = {"return_tokens_as_token_ids": True}
        first = self.complete(prompt=ids, max_tokens=1, temperature=0, logprobs=1, extra_body=as_ids).choices[0]
        token = int(first.logprobs.tokens[0].split(":")[1])
        r = self.complete(prompt=ids + [token], max_tokens=1, temperature=0, logprobs=1, echo=True,
                          extra_body=as_ids).choices[0]
        lp = r.logprobs
        self.assertEqual([int(t.split(":")[1]) for t in lp.tokens[:len(ids) + 1]], ids + [token])
        self.assertEqual(len(lp.tokens), len(ids) + 2)  # the prompt, then the one generated token
        self.assertIsNone(lp.token_logprobs[0])
        self.assertIsNone(lp.top_logprobs[0])
        self.assertTrue(all(v <= 0 for v in lp.token_logprobs[1:]))
        self.assertTrue(all(len(t) == 1 for t in lp.top_logprobs[1:]))
        # Greedy took the most likely token, so it is its own top alternative.
        self.assertEqual(list(lp.top_logprobs[len(ids)].keys()), [f"token_id:{token}"])
        self.assertAlmostEqual(lp.token_logprobs[len(ids)], first.logprobs.token_logprobs[0], delta=0.02)
        self.assertEqual(lp.text_offset[0], 0)
        self.assertEqual(r.text[:len("The capital of France is")], "The capital of France is")

    def test_vllm_prompt_logprobs(self):
        ids = json.loads(http(self.base + "/tokenize", {"prompt": "Once upon a time"}, self.auth)[1])["tokens"]
        r = self.complete(prompt=ids, max_tokens=2, temperature=0, n=2, extra_body={"prompt_logprobs": 2})
        for choice in r.choices:
            pl = choice.model_extra["prompt_logprobs"]
            self.assertEqual(len(pl), len(ids))
            self.assertIsNone(pl[0])
            for j in range(1, len(ids)):
                self.assertIn(str(ids[j]), pl[j])  # the prompt token itself, beside at most 2 others
                self.assertLessEqual(len(pl[j]), 3)
                ranks = sorted(e["rank"] for e in pl[j].values() if e["rank"] is not None)
                self.assertEqual(ranks[:2], [1, 2])
            self.assertEqual(pl, r.choices[0].model_extra["prompt_logprobs"])
        c = self.chat(messages=[{"role": "user", "content": "Hi"}], max_tokens=2, extra_body={"prompt_logprobs": 0})
        pl = c.model_extra["prompt_logprobs"]
        self.assertEqual(len(pl), c.usage.prompt_tokens)
        self.assertIsNone(pl[0])
        self.assertTrue(all(len(e) == 1 and next(iter(e.values()))["logprob"] <= 0 for e in pl[1:]))

    # -- /v1/embeddings ---------------------------------------------------------------------------

    def test_embeddings(self):
        """OpenAI's embeddings endpoint: the last token's final-normed state, L2-normalised, per input
        (text or token ids), in input order; base64 is the same floats; bad values are 400s naming them."""
        import base64
        import struct
        texts = ["Paris is the capital of France.", "Bananas are yellow.", "Paris is the capital of France."]
        r = self.client.embeddings.create(model=NAME, input=texts)
        self.assertEqual([d.index for d in r.data], [0, 1, 2])
        vecs = [d.embedding for d in r.data]
        self.assertEqual(len(vecs[0]), 576)  # SmolLM2-135M's hidden size
        for v in vecs:
            self.assertAlmostEqual(sum(x * x for x in v), 1.0, places=4)
        cos = lambda a, b: sum(x * y for x, y in zip(a, b))  # noqa: E731
        self.assertAlmostEqual(cos(vecs[0], vecs[2]), 1.0, places=4)  # the same text, again (a cache hit)
        self.assertLess(cos(vecs[0], vecs[1]), 0.99)
        ids = json.loads(http(self.base + "/tokenize", {"prompt": texts[1]}, self.auth)[1])["tokens"]
        by_ids = self.client.embeddings.create(model=NAME, input=[ids]).data[0].embedding
        self.assertAlmostEqual(cos(by_ids, vecs[1]), 1.0, places=4)
        self.assertEqual(r.usage.prompt_tokens, r.usage.total_tokens)
        self.assertGreater(r.usage.prompt_tokens, 10)
        raw = json.loads(http(self.base + "/v1/embeddings", {"input": texts[1], "encoding_format": "base64"},
                              self.auth)[1])["data"][0]["embedding"]
        floats = struct.unpack(f"<{576}f", base64.b64decode(raw))
        self.assertAlmostEqual(cos(floats, vecs[1]), 1.0, places=4)
        self.assert_400("dimensions", self.client.embeddings.create, model=NAME, input="x", dimensions=64)
        self.assert_400("input", self.client.embeddings.create, model=NAME, input="")
        self.assert_400("foo", self.client.embeddings.create, model=NAME, input="x", extra_body={"foo": 1})

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


    # -- structured outputs (xgrammar) ------------------------------------------------------------

    def test_parse_with_a_pydantic_model(self):
        import pydantic

        # Bounded, because a 135M model under a grammar still chooses its digits: greedy SmolLM2
        # writes 1111... for an unbounded integer (valid JSON that never ends). The bounds are the
        # schema's, so the grammar enforces them.
        class City(pydantic.BaseModel):
            name: Annotated[str, pydantic.Field(max_length=40)]
            country: Annotated[str, pydantic.Field(max_length=40)]
            population: Annotated[int, pydantic.Field(ge=0, le=100_000_000)]

        r = self.client.chat.completions.parse(
            model=NAME, messages=[{"role": "user", "content": "Describe Paris as JSON."}], response_format=City,
            max_tokens=200, temperature=0)
        choice = r.choices[0]
        self.assertEqual(choice.finish_reason, "stop", choice.message.content)
        self.assertIsInstance(choice.message.parsed, City)

    def test_varied_json_schemas_are_honoured(self):
        import jsonschema
        futures = {}
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for i, schema in enumerate(SCHEMAS):
                rf = {"type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema, "strict": True}}
                endpoint = self.chat if i % 2 == 0 else None
                if endpoint:
                    futures[i] = pool.submit(self.chat, messages=[{"role": "user", "content": "Give an example as JSON."}],
                                             response_format=rf, max_tokens=300, temperature=0)
                else:  # completions take response_format too (vLLM's extension)
                    futures[i] = pool.submit(self.complete, prompt="An example JSON value:", max_tokens=300,
                                             temperature=0, extra_body={"response_format": rf})
        for i, f in futures.items():
            c = f.result().choices[0]
            text = c.message.content if i % 2 == 0 else c.text
            self.assertEqual(c.finish_reason, "stop", f"schema {i}: {text!r}")
            jsonschema.validate(json.loads(text), SCHEMAS[i])

    def test_json_object_regex_choice_and_grammar(self):
        msgs = [{"role": "user", "content": "Tell me about cats."}]
        r = self.chat(messages=msgs, response_format={"type": "json_object"}, max_tokens=300, temperature=0)
        self.assertIsInstance(json.loads(r.choices[0].message.content), dict)
        r = self.complete(prompt="My phone number is", max_tokens=30, temperature=0,
                          extra_body={"structured_outputs": {"regex": r" \d{3}-\d{4}"}})
        self.assertRegex(r.choices[0].text, r"^ \d{3}-\d{4}$")
        r = self.chat(messages=[{"role": "user", "content": "Is the sky green?"}], max_tokens=10, temperature=0,
                      extra_body={"structured_outputs": {"choice": ["yes", "no", "maybe so"]}})
        self.assertIn(r.choices[0].message.content, ["yes", "no", "maybe so"])
        grammar = 'root ::= "(" num "+" num ")"\nnum ::= [1-9] [0-9]?'
        r = self.complete(prompt="A sum:", max_tokens=40, temperature=0.8, seed=3,
                          extra_body={"structured_outputs": {"grammar": grammar}})
        self.assertRegex(r.choices[0].text, r"^\([1-9][0-9]?\+[1-9][0-9]?\)$")
        self.assertEqual(r.choices[0].finish_reason, "stop")

    def test_structured_outputs_with_n_stream_and_logprobs(self):
        rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMAS[9]}}  # bounded integers
        r = self.chat(messages=[{"role": "user", "content": "JSON please"}], response_format=rf, n=3, temperature=1.0,
                      seed=5, max_tokens=200, logprobs=True, top_logprobs=2)
        for c in r.choices:
            json.loads(c.message.content)
            self.assertTrue(all(t.logprob > -1e30 for t in c.logprobs.content))  # no masked token was sampled
        stream = self.chat(messages=[{"role": "user", "content": "JSON please"}], response_format=rf, stream=True,
                           max_tokens=200, temperature=0)
        text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
        json.loads(text)

    def test_bad_and_unsatisfiable_grammars(self):
        bad = {"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "no-such-type"}}}
        with self.assertRaises(openai.BadRequestError) as cm:
            self.chat(messages=[{"role": "user", "content": "Hi"}], response_format=bad, max_tokens=5)
        self.assertIn("grammar", cm.exception.body["message"])
        self.assert_400("structured_outputs", self.complete, prompt="Hi",
                        extra_body={"structured_outputs": {"regex": "(unclosed"}})
        self.assert_400("structured_outputs", self.complete, prompt="Hi",
                        extra_body={"structured_outputs": {"regex": "a", "choice": ["b"]}})
        # A grammar that needs more tokens than max_tokens: finish_reason length, the partial text.
        r = self.complete(prompt="Count:", max_tokens=5, temperature=0,
                          extra_body={"structured_outputs": {"regex": "(ab){50}"}})
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertTrue("ababababab".startswith(r.choices[0].text), r.choices[0].text)


def _obj(props, required=None, **extra):
    return {"type": "object", "properties": props, "required": list(props) if required is None else required,
            "additionalProperties": False, **extra}


# Twenty schemas: nested objects, arrays, enums, required and optional fields, integers with
# bounds, strings with patterns and lengths, booleans, nulls, unions and references.
SCHEMAS = [
    _obj({"name": {"type": "string"}, "age": {"type": "integer"}}),
    _obj({"city": {"type": "string", "maxLength": 20}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}),
    _obj({"color": {"type": "string", "enum": ["red", "green", "blue"]}}),
    _obj({"items": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4}}),
    _obj({"user": _obj({"id": {"type": "integer", "minimum": 1}, "email": {"type": "string", "pattern": "^[a-z]+@[a-z]+\\.com$"}})}),
    _obj({"ok": {"type": "boolean"}, "note": {"type": "null"}}),
    _obj({"tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3}}),
    _obj({"score": {"type": "number"}, "grade": {"type": "string", "enum": ["A", "B", "C"]}}),
    _obj({"point": _obj({"x": {"type": "integer"}, "y": {"type": "integer"}}), "label": {"type": "string", "maxLength": 12}}),
    _obj({"a": {"type": "integer", "minimum": 0, "maximum": 9}, "b": {"type": "integer", "minimum": 10, "maximum": 99}}),
    _obj({"title": {"type": "string", "maxLength": 30}, "year": {"type": "integer", "minimum": 1900, "maximum": 2100},
          "genre": {"type": "string", "enum": ["drama", "comedy"]}}),
    _obj({"matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}, "maxItems": 2}}),
    _obj({"id": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}}),
    _obj({"value": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 8}]}}),
    _obj({"first": {"type": "string", "maxLength": 15}, "middle": {"type": "string", "maxLength": 15}},
         required=["first"]),
    _obj({"people": {"type": "array", "maxItems": 2,
                     "items": _obj({"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0}})}}),
    _obj({"status": {"const": "done"}, "count": {"type": "integer"}}),
    {"$defs": {"pt": _obj({"lat": {"type": "number"}, "lon": {"type": "number"}})},
     **_obj({"from": {"$ref": "#/$defs/pt"}, "to": {"$ref": "#/$defs/pt"}})},
    _obj({"flags": _obj({"a": {"type": "boolean"}, "b": {"type": "boolean"}}), "n": {"type": "integer", "maximum": 5}}),
    _obj({"word": {"type": "string", "minLength": 3, "maxLength": 8, "pattern": "^[a-z]+$"}}),
]


if __name__ == "__main__":
    sys.exit(main())
