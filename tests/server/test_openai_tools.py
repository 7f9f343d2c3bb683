#!/usr/bin/env python3
"""Tool calling through the official `openai` client against `minivllm serve` with the default
model (SmolLM2-135M-Instruct) on the CPU (issue 49):

- a round trip: tool_choice "required" makes the call (finish_reason "tool_calls", arguments that
  validate against the function's schema), the tool's result goes back as a `tool` message after
  the assistant's `tool_calls`, and the model answers in prose;
- a named function and "required", streamed: the calls arrive as delta.tool_calls, OpenAI's
  incremental form: a call's first piece has its id, type and name, later pieces append to its
  function.arguments as the model writes them; joined, they are the whole response's arguments;
- tool_choice "none" and "auto" on a model that answers in prose: content, no calls; "auto" reads
  Hermes-style calls (forced through a grammar, since SmolLM2 was not trained for tools);
- --reasoning-parser qwen3: <think>...</think> into reasoning_content, whole and streamed;
- bad tools and tool choices are 400s naming the field;
- /v1/responses: the round trip as Responses items, whole and streamed (the typed events), its input items
  listed, and again through previous_response_id (the server's stored conversation; retrieved and deleted
  by id), text.format's JSON schema, its refusals.

Run by ctest with MINIVLLM_BIN and MINIVLLM_MODEL set; exits 77 (skipped) only when the model or
the client is missing, as test_openai_client.py does (whose server helpers it uses).
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_openai_client import API_KEY, MODEL, NAME, main, openai, start_server, stop_server  # noqa: E402

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time in a timezone",
                                         "parameters": {"type": "object",
                                                        "properties": {"tz": {"type": "string", "maxLength": 20}},
                                                        "required": ["tz"]}}}
TOOLS = [WEATHER, TIME]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


class ToolsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The qwen3 reasoning parser on (SmolLM2's template does not think, so auto would leave it off):
        # replies without <think> pass through it unchanged.
        cls.proc, cls.base = start_server(MODEL, "--max-model-len", "1024", "--reasoning-parser", "qwen3",
                                          api_key=API_KEY, name=NAME)
        cls.client = openai.OpenAI(base_url=cls.base + "/v1", api_key=API_KEY, max_retries=0, timeout=600)

    @classmethod
    def tearDownClass(cls):
        code = stop_server(cls.proc)
        err = cls.proc.stderr.read()
        cls.proc.stderr.close()
        assert code == 0, f"serve exited with {code}: {err}"

    def chat(self, **kw):
        kw.setdefault("max_tokens", 80)
        return self.client.chat.completions.create(model=NAME, temperature=0, **kw)

    def merge_calls(self, chunks):
        """delta.tool_calls pieces joined by index, as OpenAI's clients do; and how many pieces carried
        arguments after each call's first."""
        calls, more = {}, {}
        for chunk in chunks:
            for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                if tc.index not in calls:
                    self.assertTrue(tc.id and tc.type == "function" and tc.function.name, tc)  # the first piece
                    calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": ""}
                    more[tc.index] = 0
                else:
                    self.assertFalse(tc.id or tc.function.name, tc)  # later pieces: arguments only
                    more[tc.index] += 1
                calls[tc.index]["arguments"] += tc.function.arguments or ""
        self.assertEqual(list(calls), list(range(len(calls))))
        return calls, more

    def assert_call_valid(self, call):
        import jsonschema
        tool = {t["function"]["name"]: t for t in TOOLS}[call.function.name]
        self.assertEqual(call.type, "function")
        self.assertTrue(call.id)
        jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])

    def test_round_trip(self):
        r = self.chat(messages=ASK, tools=TOOLS, tool_choice="required")
        choice = r.choices[0]
        self.assertEqual(choice.finish_reason, "tool_calls", choice.message)
        self.assertIsNone(choice.message.content)
        self.assertGreaterEqual(len(choice.message.tool_calls), 1)
        for call in choice.message.tool_calls:
            self.assert_call_valid(call)
        call = choice.message.tool_calls[0]
        history = ASK + [
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
            {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 22, "unit": "celsius"})},
        ]
        final = self.chat(messages=history, tools=TOOLS, max_tokens=40).choices[0]
        self.assertIn(final.finish_reason, ("stop", "length"))
        self.assertFalse(final.message.tool_calls)
        self.assertTrue(final.message.content.strip())

    def test_responses_api(self):
        # /v1/responses (served through the chat path): the same round trip with Responses' items,
        # a JSON schema as text.format, and what it cannot serve refused naming the field.
        flat = [{"type": "function", **t["function"]} for t in TOOLS]
        ask = [{"role": "user", "content": ASK[0]["content"]}]
        r = self.client.responses.create(model=NAME, input=ask, tools=flat, tool_choice="required", temperature=0,
                                         max_output_tokens=80)
        self.assertEqual(r.status, "completed")
        calls = [o for o in r.output if o.type == "function_call"]
        self.assertGreaterEqual(len(calls), 1, r.output)
        import jsonschema
        for c in calls:
            jsonschema.validate(json.loads(c.arguments), {t["name"]: t for t in flat}[c.name]["parameters"])
        history = ask + [{"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments}
                         for c in calls]
        history += [{"type": "function_call_output", "call_id": c.call_id, "output": "22 C"} for c in calls]
        final = self.client.responses.create(model=NAME, input=history, tools=flat, temperature=0,
                                             max_output_tokens=30, instructions="Answer in one sentence.")
        self.assertTrue(final.output_text.strip(), final.output)
        self.assertEqual(final.usage.total_tokens, final.usage.input_tokens + final.usage.output_tokens)
        schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                  "required": ["city"], "additionalProperties": False}
        j = self.client.responses.create(model=NAME, input="Name a city.", temperature=0, max_output_tokens=40,
                                         text={"format": {"type": "json_schema", "name": "c", "schema": schema}})
        jsonschema.validate(json.loads(j.output_text), schema)
        # Streamed: the SDK's accumulator rebuilds the same call and text from the typed events.
        with self.client.responses.stream(model=NAME, input=ask, tools=flat, tool_choice="required",
                                          temperature=0, max_output_tokens=80) as s:
            deltas = "".join(e.delta for e in s if e.type == "response.function_call_arguments.delta")
            streamed = s.get_final_response()
        streamed_calls = [o for o in streamed.output if o.type == "function_call"]
        self.assertEqual([(o.name, o.arguments) for o in streamed_calls], [(o.name, o.arguments) for o in calls])
        self.assertEqual(deltas, "".join(o.arguments for o in calls))
        with self.client.responses.stream(model=NAME, input=history, tools=flat, temperature=0, max_output_tokens=30,
                                          instructions="Answer in one sentence.") as s:
            text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
            self.assertEqual(s.get_final_response().output_text, final.output_text)
        self.assertEqual(text, final.output_text)
        # previous_response_id: the server keeps r's conversation, so sending only the calls' outputs
        # gives what resending the whole history gave, whole and streamed; a response sent with
        # store=False is not kept, and an id the server does not hold is a 404 naming the field.
        outputs = [{"type": "function_call_output", "call_id": c.call_id, "output": "22 C"} for c in calls]
        chained = self.client.responses.create(model=NAME, previous_response_id=r.id, input=outputs, tools=flat,
                                               temperature=0, max_output_tokens=30,
                                               instructions="Answer in one sentence.")
        self.assertEqual(chained.previous_response_id, r.id)
        self.assertEqual(chained.output_text, final.output_text)
        with self.client.responses.stream(model=NAME, previous_response_id=r.id, input=outputs, tools=flat,
                                          temperature=0, max_output_tokens=30,
                                          instructions="Answer in one sentence.") as s:
            self.assertEqual(s.get_final_response().output_text, final.output_text)
        self.assertEqual(self.client.responses.retrieve(chained.id).output_text, final.output_text)
        # Each kept response lists what it was asked with (input_items), its own input only, newest first.
        first = self.client.responses.input_items.list(r.id)
        self.assertEqual([(i.type, i.role, i.content[0].text) for i in first.data],
                         [("message", "user", ask[0]["content"])])
        listed = self.client.responses.input_items.list(chained.id, order="asc", limit=1)
        self.assertEqual([(i.type, i.call_id) for i in listed.data], [("function_call_output", calls[0].call_id)])
        self.assertEqual(listed.has_more, len(calls) > 1)
        # item_reference: r's input message and its calls named by id stand for the items themselves.
        refs = [{"type": "item_reference", "id": first.data[0].id}] + [{"type": "item_reference", "id": c.id}
                                                                        for c in calls]
        referenced = self.client.responses.create(model=NAME, input=refs + outputs, tools=flat, temperature=0,
                                                  max_output_tokens=30, instructions="Answer in one sentence.")
        self.assertEqual(referenced.output_text, final.output_text)
        with self.assertRaises(openai.NotFoundError) as e:
            self.client.responses.create(model=NAME, input=[{"type": "item_reference", "id": "msg_none"}])
        self.assertEqual(e.exception.body.get("param"), "input[0].id", e.exception.body)
        self.client.responses.delete(chained.id)
        unkept = self.client.responses.create(model=NAME, input="hi", max_output_tokens=2, store=False)
        self.assertFalse(unkept.store)
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.retrieve(chained.id)
        for missing in (unkept.id, chained.id, "resp_none"):
            with self.assertRaises(openai.NotFoundError) as e:
                self.client.responses.create(model=NAME, input="hi", previous_response_id=missing)
            self.assertEqual(e.exception.body.get("param"), "previous_response_id", e.exception.body)
        for kw in ({"stream_options": {"include_obfuscation": False}}, {"conversation": "conv_1"},
                   {"reasoning": {"effort": "high"}}):
            with self.assertRaises(openai.BadRequestError) as e:
                self.client.responses.create(model=NAME, input="hi", **kw)
            self.assertEqual(e.exception.body.get("param"), next(iter(kw)), e.exception.body)

    def test_named_function_streamed(self):
        kw = dict(messages=ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}})
        chunks = list(self.chat(stream=True, **kw))
        calls, more = self.merge_calls(chunks)
        self.assertEqual(chunks[-1].choices[0].finish_reason, "tool_calls")
        self.assertEqual("".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices), "")
        self.assertEqual(list(calls), [0])
        self.assertEqual(calls[0]["name"], "get_weather")
        import jsonschema
        jsonschema.validate(json.loads(calls[0]["arguments"]), WEATHER["function"]["parameters"])
        # The arguments came as the model wrote them, not in one piece, and add up to the whole
        # response's (greedy: the same reply).
        self.assertGreater(more[0], 1, calls[0])
        whole = self.chat(**kw).choices[0].message.tool_calls
        self.assertEqual(calls[0]["arguments"], whole[0].function.arguments)

    def test_required_streamed(self):
        # The round trip's tools and choice: the same grammar, compiled once (xgrammar's cache).
        kw = dict(messages=[{"role": "user", "content": "What time is it in Tokyo?"}], tools=TOOLS,
                  tool_choice="required")
        chunks = list(self.chat(stream=True, **kw))
        calls, more = self.merge_calls(chunks)
        self.assertGreaterEqual(len(calls), 1)
        import jsonschema
        tools = {t["function"]["name"]: t for t in TOOLS}
        for c in calls.values():
            jsonschema.validate(json.loads(c["arguments"]), tools[c["name"]]["function"]["parameters"])
        self.assertGreater(more[0], 1, calls[0])
        self.assertEqual(chunks[-1].choices[0].finish_reason, "tool_calls")
        whole = self.chat(**kw).choices[0].message.tool_calls
        self.assertEqual([(c["name"], c["arguments"]) for c in calls.values()],
                         [(w.function.name, w.function.arguments) for w in whole])

    def test_none_and_auto_answer_in_prose(self):
        # SmolLM2's template does not show the tools, so it answers in prose: content, no calls.
        for choice in ("none", "auto"):
            r = self.chat(messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=16).choices[0]
            self.assertFalse(r.message.tool_calls, choice)
            self.assertTrue(r.message.content, choice)
            self.assertIn(r.finish_reason, ("stop", "length"))

    def test_auto_reads_hermes_calls(self):
        # The reply a Hermes-style model writes, forced here through a choice grammar (SmolLM2 is not
        # trained for tools): the auto parser (hermes, picked from SmolLM2's ChatML template) reads
        # it into tool_calls, whole and streamed.
        reply = ('Checking.\n<tool_call>{"name": "get_time", "arguments": {"tz": "UTC"}}</tool_call>\n'
                 '<tool_call>{"name": "get_weather"}</tool_call>')
        kw = dict(messages=ASK, tools=TOOLS, max_tokens=120, extra_body={"structured_outputs": {"choice": [reply]}})
        whole = self.chat(**kw)
        r = whole.choices[0]
        self.assertEqual(r.finish_reason, "tool_calls", (whole.usage, r.message))
        self.assertEqual(r.message.content, "Checking.\n")
        self.assertEqual([c.function.name for c in r.message.tool_calls], ["get_time", "get_weather"])
        self.assertEqual(json.loads(r.message.tool_calls[0].function.arguments), {"tz": "UTC"})
        self.assertEqual(json.loads(r.message.tool_calls[1].function.arguments), {})
        chunks = list(self.chat(stream=True, parallel_tool_calls=False, **kw))
        calls, _ = self.merge_calls(chunks)
        self.assertEqual([(c["name"], c["arguments"]) for c in calls.values()], [("get_time", '{"tz":"UTC"}')])  # not parallel
        self.assertEqual("".join(ch.choices[0].delta.content or "" for ch in chunks), "Checking.\n")
        self.assertEqual(chunks[-1].choices[0].finish_reason, "tool_calls")

    def test_reasoning_content(self):
        # What Qwen3 writes, forced through a choice grammar: the thoughts apart from the answer.
        reply = "<think>\nA greeting.\n</think>\n\nHello!"
        kw = dict(messages=[{"role": "user", "content": "Hi"}], max_tokens=60,
                  extra_body={"structured_outputs": {"choice": [reply]}, "chat_template_kwargs": {"enable_thinking": True}})
        m = self.chat(**kw).choices[0].message
        self.assertEqual((m.reasoning_content, m.content), ("A greeting.", "Hello!"))
        chunks = list(self.chat(stream=True, **kw))
        self.assertEqual("".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks),
                         "A greeting.")
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in chunks), "Hello!")

    def test_bad_tools_are_400s_naming_the_field(self):
        cases = [
            ("tools", dict(tools=[{"type": "function", "function": {"description": "no name"}}])),
            ("tools", dict(tools=[{"type": "code_interpreter"}])),
            ("tool_choice", dict(tools=TOOLS, tool_choice="always")),
            ("tool_choice", dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}})),
            ("tool_choice", dict(tool_choice="required")),
            ("tools", dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "nonsense"}}}],
                           tool_choice="required")),
        ]
        for param, kw in cases:
            with self.assertRaises(openai.BadRequestError, msg=param) as cm:
                self.chat(messages=ASK, **kw)
            self.assertEqual(cm.exception.body.get("param"), param, cm.exception.body)


if __name__ == "__main__":
    sys.exit(main())
