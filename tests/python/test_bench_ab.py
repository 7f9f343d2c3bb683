"""tools/bench_ab.sh with stand-in binaries: each variant runs the binary and environment it names
(bin=PATH picks another build, as stop 103 compared two builds in one run), the medians and the
differences are each variant's own, and a variant naming a missing binary is refused before any run.
Needs no engine: the stand-ins print `minivllm bench --json`'s line. Runs in about a second."""
import os
import pathlib
import stat
import subprocess
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "bench_ab.sh"

# A stand-in `minivllm bench`: its figure is its own SPEED plus FAST from the environment.
STAND_IN = """#!/usr/bin/env bash
echo "a log line first"
echo "{\\"decode_tok_s\\": $(( SPEED + ${FAST:-0} )), \\"decode_time_s\\": 0.5}"
"""


class BenchAb(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def stand_in(self, name, speed):
        path = pathlib.Path(self.dir.name) / name
        path.write_text(STAND_IN.replace("SPEED", str(speed)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return str(path)

    def run_ab(self, *args):
        return subprocess.run(["bash", str(SCRIPT), "--model", self.dir.name, *args], capture_output=True, text=True,
                              timeout=60)

    def test_each_variant_runs_its_own_binary_and_environment(self):
        new, old = self.stand_in("minivllm", 100), self.stand_in("minivllm.old", 120)
        r = self.run_ab("--bin", new, "--rounds", "2", "new", f"old:bin={old}", "fast:FAST=10", f"oldfast:bin={old},FAST=5")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertIn("new round 2: 100.0 tok/s, 0.500 s", lines)
        self.assertIn("old round 1: 120.0 tok/s, 0.500 s", lines)
        self.assertIn("fast round 1: 110.0 tok/s, 0.500 s", lines)
        self.assertIn("oldfast round 2: 125.0 tok/s, 0.500 s", lines)
        summary = [line for line in lines if "median" in line]
        self.assertEqual(len(summary), 4)
        self.assertIn("(+20.0% against new)", summary[1])
        self.assertIn("(+25.0% against new)", summary[3])

    def test_a_missing_binary_is_refused_before_any_run(self):
        new = self.stand_in("minivllm", 100)
        missing = os.path.join(self.dir.name, "nowhere", "minivllm")
        r = self.run_ab("--bin", new, "new", f"old:bin={missing}")
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"variant old: no executable {missing}", r.stderr)
        self.assertNotIn("round", r.stdout)


if __name__ == "__main__":
    unittest.main()
