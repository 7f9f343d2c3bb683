#!/usr/bin/env python3
"""`minivllm serve` driven by the official `openai` client (PyPI), with the default model
SmolLM2-135M-Instruct on the CPU: completions and chat, streamed and not; n; logprobs; stop strings;
usage; 64 concurrent requests; a client that disconnects; every bad input of issue 9 and the next
request after it; SIGINT with tensor-parallel workers.

Run by ctest (tests/CMakeLists.txt) with MINIVLLM_BIN and MINIVLLM_MODEL set. Exits 77 (skipped)
only when the model file or the `openai` package is missing; tools/run_tests.sh provides both.
"""
import concurrent.futures
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

BIN = os.environ.get("MINIVLLM_BIN", "build/release/minivllm")
MODEL = os.environ.get("MINIVLLM_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
SHARED = os.environ.get("MINIVLLM_SHARED_DIR",
                        os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
API_KEY = "test-key"
MAX_BODY = 1 << 20
MAX_MODEL_LEN = 1024
NAME = "SmolLM2-135M-Instruct"

try:
    import openai
except ImportError:  # pragma: no cover - reported as a skip
    openai = None


def start_server(model, *extra, api_key=None, name=None):
    """Starts `minivllm serve` on a free port; returns (process, base url)."""
    cmd = [BIN, "serve", "--model", model, "--port", "0", "--device", "cpu"] + list(extra)
    if api_key:
        cmd += ["--api-key", api_key]
    if name:
        cmd += ["--served-model-name", name]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # printed once the model is loaded
    m = re.search(r"at (http://[\d.]+:\d+)/v1", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"serve did not start: {line!r} {proc.stderr.read()}")
    return proc, m.group(1)


def stop_server(proc, sig=signal.SIGTERM, timeout=60):
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    finally:
        proc.stdout.close()


def http(url, body=None, headers=None, method=None, raw=None):
    """(status, body text) of a plain HTTP request (for what the openai client will not send)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data is not None else "GET"))
    req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metrics(base):
    """{metric name: value} of the unlabelled-by-reason samples of /metrics."""
    _, text = http(base + "/metrics")
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        if "le=" in name_labels or "finished_reason" in name_labels:
            continue
        out[name] = float(value)
    return out


class OpenAIClientTest(unittest.TestCase):
    proc = None
    base = None

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.base = start_server(MODEL, "--max-model-len", str(MAX_MODEL_LEN), "--block-size", "16",
                                          "--max-body-bytes", str(MAX_BODY), api_key=API_KEY, name=NAME)
        cls.client = openai.OpenAI(base_url=cls.base + "/v1", api_key=API_KEY, max_retries=0, timeout=600)
        cls.auth = {"Authorization": "Bearer " + API_KEY}

    @classmethod
    def tearDownClass(cls):
        if cls.proc:
            code = stop_server(cls.proc)
            err = cls.proc.stderr.read()
            cls.proc.stderr.close()
            assert code == 0, f"serve exited with {code}: {err}"

    # -- helpers --------------------------------------------------------------------------------

    def complete(self, **kw):
        kw.setdefault("model", NAME)
        return self.client.completions.create(**kw)

    def chat(self, **kw):
        kw.setdefault("model", NAME)
        return self.client.chat.completions.create(**kw)

    def assert_serves(self):
        """The server still answers a normal request."""
        r = self.complete(prompt="The capital of France is", max_tokens=2, temperature=0)
        self.assertEqual(len(r.choices), 1)

    def wait_idle(self, timeout=30):
        """Waits until /metrics shows no request running and every KV block free."""
        deadline = time.time() + timeout
        m = {}
        while time.time() < deadline:
            m = metrics(self.base)
            if m.get("minivllm:num_requests_running") == 0 and m.get("minivllm:num_requests_in_flight") == 0:
                if m.get("minivllm:kv_cache_blocks_free") == m.get("minivllm:kv_cache_blocks_total") is not None:
                    return m
            time.sleep(0.1)
        self.fail(f"the server did not go idle with every KV block free: {m}")

    # -- completions and chat, streamed and not --------------------------------------------------

    def test_completion_stream_equals_whole(self):
        kw = dict(prompt="Once upon a time, in a small village,", max_tokens=24, temperature=0)
        whole = self.complete(**kw)
        chunks = list(self.complete(stream=True, **kw))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(text, whole.choices[0].text)
        self.assertEqual(len(reasons), 1)
        self.assertEqual(reasons[0], whole.choices[0].finish_reason)
        self.assertTrue(whole.id.startswith("cmpl-"))
        self.assertEqual(whole.object, "text_completion")

    def test_chat_stream_equals_whole(self):
        msgs = [{"role": "user", "content": "What is the capital of France?"}]
        whole = self.chat(messages=msgs, max_tokens=24, temperature=0)
        chunks = list(self.chat(messages=msgs, max_tokens=24, temperature=0, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(text, whole.choices[0].message.content)
        self.assertEqual(len(reasons), 1)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        self.assertEqual(whole.choices[0].message.role, "assistant")
        self.assertIn("Paris", whole.choices[0].message.content)

    def test_chat_template_kwargs_and_content_parts(self):
        msgs = [{"role": "user", "content": [{"type": "text", "text": "Say hi."}]}]
        r = self.chat(messages=msgs, max_tokens=4, temperature=0,
                      extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        self.assertEqual(r.choices[0].finish_reason, "length")

    def test_stream_include_usage(self):
        chunks = list(self.complete(prompt="Hello", max_tokens=5, temperature=0, stream=True,
                                    stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, 5)
        self.assertIsNotNone(chunks[-1].usage.prompt_tokens_details)
        self.assertTrue(all(c.usage is None for c in chunks[:-1]))

    def test_prompt_shapes_and_echo(self):
        status, body = http(self.base + "/tokenize", {"prompt": "Hello there"}, self.auth)
        self.assertEqual(status, 200)
        ids = json.loads(body)["tokens"]
        by_text = self.complete(prompt="Hello there", max_tokens=6, temperature=0)
        by_ids = self.complete(prompt=ids, max_tokens=6, temperature=0)
        self.assertEqual(by_text.choices[0].text, by_ids.choices[0].text)
        many = self.complete(prompt=["Hello there", "Good morning"], max_tokens=3, temperature=0)
        self.assertEqual([c.index for c in many.choices], [0, 1])
        self.assertEqual(many.choices[0].text, self.complete(prompt="Hello there", max_tokens=3,
                                                              temperature=0).choices[0].text)
        many_ids = self.complete(prompt=[ids, ids[:1]], max_tokens=3, temperature=0)
        self.assertEqual(len(many_ids.choices), 2)
        echo = self.complete(prompt="Hello there", max_tokens=3, temperature=0, echo=True)
        self.assertTrue(echo.choices[0].text.startswith("Hello there"))
        status, body = http(self.base + "/detokenize", {"tokens": ids}, self.auth)
        self.assertEqual((status, json.loads(body)["prompt"]), (200, "Hello there"))
        # vLLM's return_token_strs: the vocabulary's spelling of each token (GPT-2 bytes: a space is "Ġ").
        status, body = http(self.base + "/tokenize", {"prompt": "Hello there", "return_token_strs": True}, self.auth)
        strs = json.loads(body)["token_strs"]
        self.assertEqual((status, len(strs)), (200, len(ids)))
        self.assertEqual("".join(strs).replace("\u0120", " "), "Hello there")

    # -- n, logprobs, penalties (engine features) ------------------------------------------------

    def test_n_with_seed(self):
        kw = dict(prompt="Tell me a story about a dragon.", max_tokens=16, temperature=1.0, n=3, seed=1234)
        a = self.complete(**kw)
        b = self.complete(**kw)
        self.assertEqual(sorted(c.index for c in a.choices), [0, 1, 2])
        texts = [c.text for c in sorted(a.choices, key=lambda c: c.index)]
        self.assertEqual(len(set(texts)), 3, texts)
        self.assertEqual(texts, [c.text for c in sorted(b.choices, key=lambda c: c.index)])
        streamed = list(self.complete(stream=True, **kw))
        joined = {i: "" for i in range(3)}
        for c in streamed:
            for ch in c.choices:
                joined[ch.index] += ch.text
        self.assertEqual([joined[i] for i in range(3)], texts)

    def test_logprobs_top5(self):
        r = self.complete(prompt="The capital of France is", max_tokens=8, temperature=0, logprobs=5,
                          extra_body={"ignore_eos": True})
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 8)
        self.assertEqual(len(lp.token_logprobs), 8)
        for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
            self.assertEqual(len(top), 5)
            self.assertTrue(all(v <= 0 for v in top.values()))
            self.assertLessEqual(chosen, 0)
            # Greedy: the chosen token is the most likely one, and the top entries are a distribution.
            self.assertAlmostEqual(chosen, max(top.values()), places=4)
            self.assertLessEqual(sum(math.exp(v) for v in top.values()), 1.0 + 1e-4)
        c = self.chat(messages=[{"role": "user", "content": "Hi"}], max_tokens=4, temperature=0, logprobs=True,
                      top_logprobs=5)
        content = c.choices[0].logprobs.content
        self.assertGreater(len(content), 0)
        for t in content:
            self.assertEqual(len(t.top_logprobs), 5)
            self.assertLessEqual(t.logprob, 0)
            self.assertAlmostEqual(t.logprob, t.top_logprobs[0].logprob, places=4)

    def test_logprobs_match_teacher_forcing(self):
        """The chosen token's logprob is the log-softmax of the model's logits: feeding the prompt
        plus the first k generated tokens back as a prompt (an independent prefill) gives the same
        number for token k."""
        status, body = http(self.base + "/tokenize", {"prompt": "The capital of France is"}, self.auth)
        prompt_ids = json.loads(body)["tokens"]
        lp = self.complete(prompt=prompt_ids, max_tokens=5, temperature=0, logprobs=1,
                           extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True}).choices[0].logprobs
        gen_ids = [int(t.split(":")[1]) for t in lp.tokens]
        for k in range(len(gen_ids)):
            one = self.complete(prompt=prompt_ids + gen_ids[:k], max_tokens=1, temperature=0, logprobs=1,
                                extra_body={"ignore_eos": True, "return_tokens_as_token_ids": True})
            forced = one.choices[0].logprobs
            self.assertEqual(forced.tokens[0], lp.tokens[k])
            self.assertAlmostEqual(forced.token_logprobs[0], lp.token_logprobs[k], places=3)

    def test_penalties(self):
        # Greedy SmolLM2 repeats "apple" and "The original sentence"; each penalty changes the text.
        kw = dict(prompt="Write the word apple many times: apple apple apple", max_tokens=24, temperature=0,
                  extra_body={"ignore_eos": True})
        plain = self.complete(**kw).choices[0].text
        for extra in ({"presence_penalty": 2.0}, {"frequency_penalty": 2.0},
                      {"extra_body": {"ignore_eos": True, "repetition_penalty": 1.8}}):
            args = dict(kw)
            args.update(extra)
            penalized = self.complete(**args).choices[0].text
            self.assertNotEqual(penalized, plain, extra)

    # -- stop, length, usage ---------------------------------------------------------------------

    def test_stop_string_and_length(self):
        kw = dict(prompt="Once upon a time, in a small village,", max_tokens=32, temperature=0)
        full = self.complete(**kw).choices[0]
        self.assertEqual(full.finish_reason, "length")
        words = full.text.split()
        self.assertGreater(len(words), 4)
        stop = words[3]
        cut = self.complete(stop=[stop], **kw).choices[0]
        self.assertEqual(cut.finish_reason, "stop")
        self.assertEqual(cut.text, full.text[:full.text.index(stop)])
        single = self.complete(stop=stop, **kw).choices[0]
        self.assertEqual(single.text, cut.text)

    def test_usage_counts(self):
        prompt = list(range(1000, 1040))  # 40 token ids
        r = self.complete(prompt=prompt, max_tokens=7, temperature=0, extra_body={"ignore_eos": True})
        self.assertEqual(r.usage.prompt_tokens, 40)
        self.assertEqual(r.usage.completion_tokens, 7)
        self.assertEqual(r.usage.total_tokens, 47)
        self.assertIsNotNone(r.usage.prompt_tokens_details)
        again = self.complete(prompt=prompt, max_tokens=7, temperature=0, extra_body={"ignore_eos": True})
        # 40 tokens in 16-token blocks: the first two blocks come from the prefix cache.
        self.assertEqual(again.usage.prompt_tokens_details.cached_tokens, 32)
        c = self.chat(messages=[{"role": "user", "content": "Hi"}], max_tokens=3, temperature=0)
        self.assertEqual(c.usage.completion_tokens, 3)
        self.assertGreater(c.usage.prompt_tokens, 2)

    # -- concurrency and disconnects -------------------------------------------------------------

    def test_64_concurrent_equal_sequential(self):
        """64 requests at once decode what each decodes alone. A batch runs other kernels than one row
        (on the CPU one row takes int16 dot products, a batch fp32 panels or a GEMM with other activation
        scales), so a greedy step whose two most likely tokens are within near_tie of each other may go
        either way: an AVX2 host parted SmolLM2 Q4_1's prompt 39 at a margin of 0.00014 nats
        (docs/PERFORMANCE.md, "Stop 113"). Such a parting is allowed, at most two of 64 and printed;
        any other is a batching bug."""
        near_tie = 0.01  # nats between the two most likely tokens, in either run
        prompts = [f"Question {i}: what is {i} plus {i}? Answer:" for i in range(64)]

        def run(p):
            c = self.complete(prompt=p, max_tokens=8, temperature=0, logprobs=2).choices[0]
            return c.text, c.logprobs.tokens, c.logprobs.top_logprobs

        def margin(top, j):
            if j >= len(top) or len(top[j]) < 2:
                return math.inf
            first, second = sorted(top[j].values(), reverse=True)[:2]
            return first - second

        one_at_a_time = [run(p) for p in prompts]
        with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
            together = list(pool.map(run, prompts))
        parted = []
        for i, ((text, tokens, top), (text_b, tokens_b, top_b)) in enumerate(zip(one_at_a_time, together)):
            if text == text_b:
                continue
            j = next((k for k, (x, y) in enumerate(zip(tokens, tokens_b)) if x != y), min(len(tokens), len(tokens_b)))
            m = min(margin(top, j), margin(top_b, j))
            self.assertLess(m, near_tie, f"prompt {i} parts at token {j} without a near-tie: {text!r} alone, "
                            f"{text_b!r} in the batch (margin {m:.4f})")
            parted.append((i, j, m))
        if parted:
            print(f"\n64 concurrent: {len(parted)} parted at near-ties (prompt, token, margin): {parted}")
        self.assertLessEqual(len(parted), 2, parted)

    def test_disconnect_mid_stream_aborts(self):
        stream = self.complete(prompt="Write a very long story.", max_tokens=1000, temperature=0, stream=True,
                               extra_body={"ignore_eos": True})
        got = 0
        for _ in stream:
            got += 1
            if got == 3:
                break
        stream.close()
        m = self.wait_idle()
        self.assertEqual(m["minivllm:num_requests_running"], 0)
        self.assert_serves()

    def test_disconnect_while_waiting_for_a_whole_response_aborts(self):
        """A non-streamed request whose client hangs up stops generating soon after, not at max_tokens."""
        before = metrics(self.base)["minivllm:generation_tokens_total"]
        body = json.dumps({"model": NAME, "prompt": "Write a very long story.", "max_tokens": 1000,
                           "temperature": 0, "ignore_eos": True}).encode()
        host, port = self.base.split("//", 1)[1].rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + API_KEY.encode() + b"\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        deadline = time.time() + 30
        while metrics(self.base).get("minivllm:num_requests_running", 0) == 0 and time.time() < deadline:
            time.sleep(0.05)
        sock.close()
        self.wait_idle()
        made = metrics(self.base)["minivllm:generation_tokens_total"] - before
        self.assertLess(made, 1000, "the request ran to max_tokens after its client left")
        self.assert_serves()

    def test_disconnect_while_waiting_for_embeddings_aborts(self):
        """An embeddings request whose client hangs up is aborted: most of its inputs are never pooled."""
        before = metrics(self.base)["minivllm:prompt_tokens_total"]
        inputs = [[(7 * i + 13 * j) % 20000 + 100 for j in range(1000)] for i in range(64)]  # 64,000 prompt tokens
        body = json.dumps({"model": NAME, "input": inputs}).encode()
        host, port = self.base.split("//", 1)[1].rsplit(":", 1)
        sock = socket.create_connection((host, int(port)))
        sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + API_KEY.encode() + b"\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        deadline = time.time() + 30  # the inputs are added together, in one batch of the engine's commands
        while metrics(self.base).get("minivllm:num_requests_in_flight", 0) < 64 and time.time() < deadline:
            time.sleep(0.05)
        sock.close()
        self.wait_idle(timeout=120)
        pooled = metrics(self.base)["minivllm:prompt_tokens_total"] - before
        self.assertLess(pooled, 32000, "the inputs were pooled after their client left")
        self.assert_serves()

    # -- errors ----------------------------------------------------------------------------------

    def test_bad_parameters_are_400_naming_them(self):
        for kw, param in [(dict(temperature=-1), "temperature"), (dict(top_p=2), "top_p"),
                          (dict(max_tokens=0), "max_tokens"), (dict(n=0), "n"), (dict(logprobs=21), "logprobs"),
                          (dict(extra_body={"top_k": "x"}), "top_k"), (dict(stop=[""]), "stop")]:
            with self.assertRaises(openai.BadRequestError) as cm:
                self.complete(prompt="Hi", **kw)
            self.assertEqual(cm.exception.body.get("param"), param, cm.exception.body)
            self.assert_serves()

    def test_prompt_too_long_is_400(self):
        with self.assertRaises(openai.BadRequestError) as cm:
            self.complete(prompt=[5] * (MAX_MODEL_LEN + 10), max_tokens=4)
        self.assertEqual(cm.exception.body.get("param"), "prompt")
        self.assertIn("max_model_len", cm.exception.body.get("message"))
        with self.assertRaises(openai.BadRequestError):
            self.complete(prompt=[5] * (MAX_MODEL_LEN - 4), max_tokens=16)
        with self.assertRaises(openai.BadRequestError):
            self.complete(prompt=[10 ** 6], max_tokens=4)
        self.assert_serves()

    def test_unknown_model_is_404(self):
        with self.assertRaises(openai.NotFoundError):
            self.complete(model="no-such-model", prompt="Hi", max_tokens=2)
        self.assert_serves()

    def test_wrong_key_is_401(self):
        bad = openai.OpenAI(base_url=self.base + "/v1", api_key="wrong", max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            bad.completions.create(model=NAME, prompt="Hi", max_tokens=2)
        status, _ = http(self.base + "/v1/models")
        self.assertEqual(status, 401)
        self.assertEqual(http(self.base + "/health")[0], 200)  # monitoring stays open
        self.assert_serves()

    def test_malformed_deep_and_large_bodies(self):
        url = self.base + "/v1/completions"
        status, body = http(url, raw=b'{"model": "x", "prompt": ', headers=self.auth)
        self.assertEqual(status, 400)
        self.assertIn("error", json.loads(body))
        deep = b'{"prompt": "hi", "x": ' + b"[" * 100000 + b"]" * 100000 + b"}"
        status, body = http(url, raw=deep, headers=self.auth)
        self.assertEqual(status, 400)
        self.assertIn("nested", json.loads(body)["error"]["message"])
        status, body = http(url, raw=b"[1, 2]", headers=self.auth)
        self.assertEqual(status, 400)
        big = json.dumps({"prompt": "x" * (MAX_BODY + 10)}).encode()
        status, body = http(url, raw=big, headers=self.auth)
        self.assertEqual(status, 413)
        self.assertEqual(json.loads(body)["error"]["code"], 413)
        status, _ = http(self.base + "/v1/nothing", {"a": 1}, self.auth)
        self.assertEqual(status, 404)
        self.assert_serves()

    # -- the small endpoints ---------------------------------------------------------------------

    def test_models_health_version_metrics(self):
        models = self.client.models.list()
        self.assertEqual([m.id for m in models.data], [NAME])
        self.assertEqual(http(self.base + "/health")[0], 200)
        status, body = http(self.base + "/version")
        self.assertEqual(status, 200)
        self.assertIn("version", json.loads(body))
        self.complete(prompt="Hi", max_tokens=2)
        _, text = http(self.base + "/metrics")
        for name in ("minivllm:num_requests_running", "minivllm:num_requests_waiting",
                     "minivllm:kv_cache_usage_perc", "minivllm:prefix_cache_hit_rate",
                     "minivllm:prompt_tokens_total", "minivllm:generation_tokens_total",
                     "minivllm:num_preemptions_total", "minivllm:time_to_first_token_seconds_bucket",
                     "minivllm:inter_token_latency_seconds_bucket", "minivllm:e2e_request_latency_seconds_count"):
            self.assertIn(name, text)


class ShutdownTest(unittest.TestCase):
    def test_sigint_with_tensor_parallel_workers(self):
        """SIGINT mid-stream: the stream ends, serve exits 0, and no worker process is left."""
        stories = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
        if not os.path.exists(stories):
            self.skipTest("stories260K not found")
        proc, base = start_server(stories, "--tensor-parallel-size", "2", "--max-model-len", "256",
                                  "--block-size", "16")
        workers = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        self.assertEqual(len(workers), 1, "one worker for rank 1")
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        stream = client.completions.create(model=stories, prompt="Once", max_tokens=200, stream=True,
                                           extra_body={"ignore_eos": True})
        next(iter(stream))
        self.assertEqual(stop_server(proc, signal.SIGINT), 0)
        proc.stderr.close()
        time.sleep(0.5)
        for pid in workers:
            self.assertFalse(os.path.exists(f"/proc/{pid}"), f"worker {pid} outlived serve")


def main(model=MODEL, how=" (tools/fetch_default_model.sh)"):
    """Runs the calling module's tests; 77 (ctest's skip) without the openai package, `model` or BIN."""
    if openai is None:
        print("SKIP: the openai package is not installed (pip install openai)")
        return 77
    if not os.path.exists(model) or not os.path.exists(BIN):
        print(f"SKIP: {model} or {BIN} not found{how}")
        return 77
    result = unittest.main(exit=False, verbosity=2).result
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
