"""bench/pairs_vs_llama_bench.py end to end, with `ember bench` standing in for llama-bench
(it takes llama-bench's command line and writes its jsonl fields), on the smallest shared
model: the pairs run, the table has one row per test with medians, ranges and the ratio, and
bad input gets one line and the documented exit status."""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "pairs_vs_llama_bench.py")
EMBER = os.environ["EMBER_BINARY"]
MODEL = os.path.join(os.environ["EMBER_SHARED_DIR"], "models", "stories260K.gguf")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, "--ember", EMBER, *args],
                          capture_output=True, text=True, timeout=300)


class PairsTest(unittest.TestCase):
    def test_pairs_make_one_row_per_test(self):
        r = run("--llama-bench", f"{EMBER} bench", "--model", MODEL, "--simd", "scalar",
                "--pairs", "2", "--", "-p", "16", "-n", "4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(re.findall(r"pair [12]: pp16 [\d.]+ / [\d.]+ = [\d.]+, tg4 ", r.stderr)), 2,
                         r.stderr)
        num = r"[\d.]+ \([\d.]+-[\d.]+\)"
        for test in ("pp16", "tg4"):
            self.assertRegex(r.stdout, rf"\| stories260K\.gguf \| scalar \| {test} \| {num} \| {num} \| {num} \|")
        self.assertIn("EMBER_SIMD=scalar", r.stdout)

    def test_missing_model_is_bad_use(self):
        r = run("--llama-bench", f"{EMBER} bench", "--model", MODEL + ".missing")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip().count("\n"), 0, r.stderr)
        self.assertIn("--model: no such file", r.stderr)

    def test_failing_engine_is_named(self):
        r = run("--llama-bench", f"{EMBER} bench --no-such-flag", "--model", MODEL, "--pairs", "1",
                "--", "-p", "8", "-n", "0")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip().count("\n"), 0, r.stderr)
        self.assertIn("llama-bench exited", r.stderr)

    def test_pairs_out_of_range(self):
        r = run("--llama-bench", f"{EMBER} bench", "--model", MODEL, "--pairs", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--pairs: expected 1 to 100, found 0", r.stderr)


if __name__ == "__main__":
    unittest.main()
