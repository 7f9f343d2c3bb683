#!/usr/bin/env python3
"""Graceful stop of `minivllm serve` (SIGTERM) with the default model on the CPU: at once /health
answers 503 and new requests get 503; a stream that can finish within --shutdown-timeout finishes
normally; one that cannot ends with an error event and [DONE] after the timeout; the process then
exits 0.

Run by ctest like test_openai_client.py, whose helpers it uses; exits 77 (skipped) only when the
model or the `openai` package is missing.
"""
import http.client as httpclient
import json
import signal
import sys
import threading
import time
import unittest

# main: skips (77) without the model or the client, else runs this module's tests.
from test_openai_client import MODEL, http, main, start_server

NAME = "smol"
SHUTDOWN_TIMEOUT_S = 8


class SseReader(threading.Thread):
    """Streams one completion and keeps its `data:` payloads; `first` is set at the first one."""

    def __init__(self, base, body):
        super().__init__(daemon=True)
        host, port = base.split("//", 1)[1].rsplit(":", 1)
        self.conn = httpclient.HTTPConnection(host, int(port), timeout=120)
        self.body = json.dumps(dict(body, model=NAME, stream=True))
        self.events = []
        self.first = threading.Event()
        self.error = None

    def run(self):
        try:
            self.conn.request("POST", "/v1/completions", self.body, {"Content-Type": "application/json"})
            res = self.conn.getresponse()
            while True:
                line = res.readline()
                if not line:
                    break
                line = line.decode().strip()
                if line.startswith("data: "):
                    self.events.append(line[6:])
                    self.first.set()
        except Exception as e:  # noqa: BLE001 - kept for the assertion's message
            self.error = repr(e)
        finally:
            self.conn.close()
        self.first.set()


class GracefulStopTest(unittest.TestCase):
    def test_sigterm_drains_then_ends_the_rest_with_an_error(self):
        # One CPU thread: OpenMP's barriers stall when the cores are shared, and the timing below
        # needs steady steps more than fast ones.
        proc, base = start_server(MODEL, "--shutdown-timeout", str(SHUTDOWN_TIMEOUT_S), "--max-model-len", "8192",
                                  "--block-size", "16", "--num-threads", "1", name=NAME)
        try:
            # 64 tokens finish well within the timeout (~1 s); 8000 cannot (a few hundred tokens a
            # second at most on one CPU thread).
            short = SseReader(base, {"prompt": "Count to fifty:", "max_tokens": 64, "temperature": 0, "ignore_eos": True})
            long = SseReader(base, {"prompt": "Write a very long story.", "max_tokens": 8000, "temperature": 0,
                                    "ignore_eos": True})
            long.start()
            self.assertTrue(long.first.wait(60), "the long stream never started")
            short.start()
            self.assertTrue(short.first.wait(60), "the short stream never started")
            t0 = time.time()
            proc.send_signal(signal.SIGTERM)
            while http(base + "/health")[0] != 503:
                self.assertLess(time.time() - t0, 5, "/health still 200 after SIGTERM")
                time.sleep(0.02)
            status, text = http(base + "/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 2})
            self.assertEqual(status, 503, text)
            self.assertIn("shutting down", json.loads(text)["error"]["message"])

            short.join(60)
            self.assertIsNone(short.error)
            self.assertEqual(short.events[-1], "[DONE]")
            self.assertEqual(json.loads(short.events[-2])["choices"][0]["finish_reason"], "length", short.events[-2])
            self.assertLess(time.time() - t0, SHUTDOWN_TIMEOUT_S, "the short stream did not finish within the drain")

            long.join(60)
            self.assertIsNone(long.error)
            self.assertEqual(long.events[-1], "[DONE]")
            err = json.loads(long.events[-2])["error"]
            self.assertIn("shutdown timeout", err["message"])
            self.assertGreaterEqual(time.time() - t0, SHUTDOWN_TIMEOUT_S)

            self.assertEqual(proc.wait(timeout=30), 0, proc.stderr.read())
            self.assertLess(time.time() - t0, SHUTDOWN_TIMEOUT_S + 15)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
            proc.stderr.close()


if __name__ == "__main__":
    sys.exit(main())
