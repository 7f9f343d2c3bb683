#!/usr/bin/env python3
"""Engine death under load (issue 52), on the CPU backend: `minivllm serve --tensor-parallel-size 2`
with 32 streams in flight, and its tensor-parallel worker killed. Every stream ends with an error
event and [DONE]; /health answers 503; the process exits non-zero within 10 s (so a supervisor
restarts it); nothing new is left in /dev/shm.

The model is stories260K (../shared): its 8 heads split over two ranks, which SmolLM2-135M's 9 do
not. Run by ctest like test_openai_client.py; skipped (77) without the model or the client.
"""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

# main: skips (77) without the model or the client, else runs this module's tests.
from sse_stream import SseStream
from test_openai_client import SHARED, http, main, start_server

STORIES = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
NUM_STREAMS = 32


class EngineDeathTest(unittest.TestCase):
    def test_a_killed_worker_ends_every_stream_and_the_server(self):
        if not os.path.exists(STORIES):
            self.skipTest("stories260K not found")
        shm_before = set(os.listdir("/dev/shm"))
        # Every stream runs at once (max_num_seqs 32), each for 500 tokens: far longer than the
        # test takes to kill the worker once all have their first token.
        proc, base = start_server(STORIES, "--tensor-parallel-size", "2", "--max-model-len", "512",
                                  "--block-size", "16", "--max-num-seqs", str(NUM_STREAMS), "--num-threads", "1")
        try:
            workers = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
            self.assertEqual(len(workers), 1, "one worker for rank 1")
            body = {"model": STORIES, "prompt": "Once", "max_tokens": 500, "temperature": 0, "ignore_eos": True}
            streams = [SseStream(base, body, timeout=60) for _ in range(NUM_STREAMS)]
            for s in streams:
                s.start()
            deadline = time.time() + 60
            while not all(s.events or s.error for s in streams):
                self.assertLess(time.time(), deadline, "the streams never all started")
                time.sleep(0.002)
            self.assertEqual(http(base + "/health")[0], 200)
            os.kill(int(workers[0]), signal.SIGKILL)
            t0 = time.time()

            health = []
            while proc.poll() is None and time.time() - t0 < 15:
                try:
                    health.append(http(base + "/health")[0])
                except OSError:  # the listener has closed
                    break
                time.sleep(0.05)
            code = proc.wait(timeout=max(1, 10 - (time.time() - t0)))
            self.assertLess(time.time() - t0, 10, "serve took too long to exit")
            self.assertNotEqual(code, 0, "a dead engine must exit non-zero, so that a supervisor restarts it")
            self.assertIn(503, health)
            self.assertNotIn(200, health[1:])  # the first poll may come before the death is noticed

            for i, s in enumerate(streams):
                s.join(10)
                self.assertIsNone(s.error, f"stream {i}")
                self.assertEqual(s.status, 200, f"stream {i}")
                self.assertEqual(s.events[-1], "[DONE]", f"stream {i}: {s.events[-3:]}")
                err = json.loads(s.events[-2]).get("error")
                self.assertIsNotNone(err, f"stream {i} ended without an error event: {s.events[-2]}")
                self.assertIn("rank 1", err["message"])
            self.assertIn("the engine died", proc.stderr.read())
            self.assertEqual(set(os.listdir("/dev/shm")) - shm_before, set())
            time.sleep(0.2)
            self.assertFalse(os.path.exists(f"/proc/{workers[0]}"), "the killed worker was not reaped")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()


if __name__ == "__main__":
    sys.exit(main())
