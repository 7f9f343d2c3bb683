#!/usr/bin/env python3
"""Overload against `minivllm serve` with the default model (SmolLM2-135M-Instruct) on the CPU: a
bounded waiting queue (--max-waiting-requests) answers 503 with Retry-After instead of an unbounded
wait; a request past its deadline (request_timeout, else --request-timeout) ends with an error and
frees its KV blocks; /metrics counts both.

Run by ctest (tests/CMakeLists.txt) like test_openai_client.py, whose helpers it uses; exits 77
(skipped) only when the model or the `openai` package is missing.
"""
import concurrent.futures
import json
import sys
import time
import unittest
import urllib.error
import urllib.request

# main: skips (77) without the model or the client, else runs this module's tests.
from test_openai_client import MODEL, http, main, metrics, start_server, stop_server

NAME = "smol"
MAX_WAITING = 2
DEFAULT_TIMEOUT_S = 1.5  # the server's --request-timeout
LONG = {"prompt": "Write a very long story.", "max_tokens": 1000, "temperature": 0, "ignore_eos": True}


def wait_idle(test, base, timeout=30):
    """/metrics once no request is in flight and every KV block is free; fails the test otherwise."""
    deadline = time.time() + timeout
    m = {}
    while time.time() < deadline:
        m = metrics(base)
        if m.get("minivllm:num_requests_in_flight") == 0 and m.get("minivllm:num_requests_waiting") == 0:
            if m.get("minivllm:kv_cache_blocks_free") == m.get("minivllm:kv_cache_blocks_total") is not None:
                return m
        time.sleep(0.1)
    test.fail(f"the server did not go idle with every KV block free: {m}")


class OverloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # One sequence runs at a time, so a burst fills the queue at once. One CPU thread: OpenMP's
        # barriers stall when the cores are shared, and the timing below needs steady steps.
        cls.proc, cls.base = start_server(MODEL, "--max-num-seqs", "1", "--num-threads", "1",
                                          "--max-waiting-requests", str(MAX_WAITING),
                                          "--request-timeout", str(DEFAULT_TIMEOUT_S), "--max-model-len", "1024",
                                          "--block-size", "16", name=NAME)

    @classmethod
    def tearDownClass(cls):
        code = stop_server(cls.proc)
        err = cls.proc.stderr.read()
        cls.proc.stderr.close()
        assert code == 0, f"serve exited with {code}: {err}"

    def post(self, body, path="/v1/completions"):
        return http(self.base + path, dict(body, model=NAME))

    def test_a_full_queue_is_503_with_retry_after(self):
        before = metrics(self.base)["minivllm:num_requests_rejected_total"]
        body = {"prompt": "Count to one hundred:", "max_tokens": 64, "temperature": 0, "ignore_eos": True,
                "request_timeout": 300}

        def send(_):
            data = json.dumps(dict(body, model=NAME)).encode()
            req = urllib.request.Request(self.base + "/v1/completions", data=data,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=300) as r:
                    return r.status, None, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.headers.get("Retry-After"), e.read().decode()

        with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
            results = list(pool.map(send, range(12)))
        statuses = sorted(s for s, _, _ in results)
        self.assertTrue(set(statuses) <= {200, 503}, statuses)
        # MAX_WAITING queued (then one of them runs) until the first finishes, ~a second away: a
        # burst of 12 overflows; those taken all finish.
        refused = [(h, b) for s, h, b in results if s == 503]
        self.assertGreaterEqual(len(refused), 4, statuses)
        self.assertGreaterEqual(statuses.count(200), MAX_WAITING, statuses)
        for retry_after, text in refused:
            self.assertEqual(retry_after, "1")
            err = json.loads(text)["error"]
            self.assertEqual((err["code"], err["type"]), (503, "service_unavailable"))
            self.assertIn("max_waiting_requests", err["message"])
        m = wait_idle(self, self.base)
        self.assertEqual(m["minivllm:num_requests_rejected_total"] - before, len(refused))

    def test_a_stream_past_its_deadline_ends_with_an_error_event(self):
        before = metrics(self.base)["minivllm:num_requests_timed_out_total"]
        t0 = time.time()
        status, text = self.post(dict(LONG, stream=True, request_timeout=0.5))
        self.assertEqual(status, 200)
        events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        self.assertEqual(events[-1], "[DONE]")
        err = json.loads(events[-2])["error"]
        self.assertIn("deadline", err["message"])
        self.assertLess(time.time() - t0, 20)
        m = wait_idle(self, self.base)
        self.assertEqual(m["minivllm:num_requests_timed_out_total"] - before, 1)

    def test_a_whole_response_past_its_deadline_is_an_error(self):
        status, text = self.post(dict(LONG, request_timeout=0.5))
        self.assertEqual(status, 500)
        self.assertIn("deadline", json.loads(text)["error"]["message"])
        wait_idle(self, self.base)

    def test_the_server_default_applies_without_request_timeout(self):
        t0 = time.time()
        status, text = self.post(LONG, "/v1/completions")
        self.assertEqual(status, 500, text)
        self.assertIn("deadline", json.loads(text)["error"]["message"])
        self.assertGreaterEqual(time.time() - t0, DEFAULT_TIMEOUT_S)
        wait_idle(self, self.base)
        # Its own, longer deadline lets a request run past the server's default.
        status, text = self.post(dict(LONG, max_tokens=4, request_timeout=600))
        self.assertEqual(status, 200, text)

    def test_a_bad_request_timeout_is_400_naming_it(self):
        for bad in (0, -1, "10", 1e12):
            status, text = self.post(dict(LONG, request_timeout=bad))
            self.assertEqual(status, 400, bad)
            self.assertEqual(json.loads(text)["error"]["param"], "request_timeout")


if __name__ == "__main__":
    sys.exit(main())
