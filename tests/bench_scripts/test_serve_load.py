"""bench/serve_load.py end to end on the smallest shared model: the table has one row per
concurrency with the requests it was asked for, the long-prefix line reads a cold and a hit
TTFT, and flags the served context cannot hold are bad use named in one line (exit 2) before
any request is sent, not a traceback."""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "serve_load.py")
EMBER = os.environ["EMBER_BINARY"]
MODEL = os.path.join(os.environ["EMBER_SHARED_DIR"], "models", "stories260K.gguf")  # context 128


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, "--ember", EMBER, "--model", MODEL, "--threads", "2", *args],
                          capture_output=True, text=True, timeout=300)


class ServeLoadTest(unittest.TestCase):
    def test_rows_per_concurrency_and_the_prefix_hit(self):
        r = run("--concurrency", "1,2", "--requests", "2", "--prompt-tokens", "48", "--gen-tokens", "8",
                "--prefix-tokens", "100")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"CPU .+, EMBER_SIMD .+, --threads 2")
        self.assertRegex(r.stdout, r"\n +1 +2 +[\d.]+ +[\d.]+ +[\d.]+\n")
        self.assertRegex(r.stdout, r"\n +2 +4 +[\d.]+ +[\d.]+ +[\d.]+\n")
        self.assertRegex(r.stdout, r"100-token prompt: TTFT cold [\d.]+ s, repeated \(RAM prefix hit\) [\d.]+ s")

    def test_prompt_past_the_served_context_is_bad_use(self):
        for flags, found in ((("--prompt-tokens", "128", "--gen-tokens", "32"), "160"),
                             (("--prompt-tokens", "16", "--prefix-tokens", "2048"), "2052")):
            r = run(*flags)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertEqual(r.stderr.strip().count("\n"), 0, r.stderr)
            self.assertRegex(r.stderr, rf"serve_load\.py: --\S+ .*expected at most the served context, "
                                       rf"128 tokens, found {found}$")
            self.assertNotIn("Traceback", r.stderr)

    def test_missing_or_unreadable_model_is_one_line(self):
        r = subprocess.run([sys.executable, SCRIPT, "--ember", EMBER, "--model", MODEL + ".missing"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--model: no such file", r.stderr)
        r = subprocess.run([sys.executable, SCRIPT, "--ember", EMBER, "--model", SCRIPT],  # not a GGUF
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr.strip().count("\n"), 0, r.stderr)
        self.assertRegex(r.stderr, r"^serve_load\.py: ember serve exited \d+: ember: .*serve_load\.py: header")


if __name__ == "__main__":
    unittest.main()
