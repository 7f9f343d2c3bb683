#!/usr/bin/env python3
"""Graceful stop of `minivllm serve` (SIGTERM) with the default model on the CPU: at once /health
answers 503 and new requests get 503; a stream that can finish within --shutdown-timeout finishes
normally; one that cannot ends with an error event and [DONE] after the timeout; the process then
exits 0.

Run by ctest like test_openai_client.py, whose helpers it uses; exits 77 (skipped) only when the
model or the `openai` package is missing.
"""
import json
import signal
import sys
import time
import unittest

# main: skips (77) without the model or the client, else runs this module's tests.
from sse_stream import SseStream
from test_openai_client import MODEL, http, main, start_server

NAME = "smol"
SHUTDOWN_TIMEOUT_S = 15


class GracefulStopTest(unittest.TestCase):
    def test_sigterm_drains_then_ends_the_rest_with_an_error(self):
        # One CPU thread: OpenMP's barriers stall when the cores are shared, and the timing below
        # needs steady steps more than fast ones.
        proc, base = start_server(MODEL, "--shutdown-timeout", str(SHUTDOWN_TIMEOUT_S), "--max-model-len", "8192",
                                  "--block-size", "16", "--num-threads", "1", name=NAME)
        try:
            # The short stream is 48 tokens in when the signal comes: its last 16 finish well within
            # the timeout, even on a machine shared with other builds. 8000 tokens cannot (a few
            # hundred tokens a second at most on one CPU thread).
            short = SseStream(base, {"model": NAME, "prompt": "Count to fifty:", "max_tokens": 64, "temperature": 0,
                                     "ignore_eos": True})
            long = SseStream(base, {"model": NAME, "prompt": "Write a very long story.", "max_tokens": 8000,
                                    "temperature": 0, "ignore_eos": True})
            long.start()
            self.assertTrue(long.first.wait(60), "the long stream never started")
            short.start()
            deadline = time.time() + 120
            while len(short.events) < 48 and short.is_alive():
                self.assertLess(time.time(), deadline, "the short stream is too slow")
                time.sleep(0.01)
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
