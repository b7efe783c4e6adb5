"""The two-process parity gate on real ember output (issue 8.3), in CTest (python_tests).
Process 1 is ember (run with
--dump-logits for the logits of uninterrupted inference after the resume token; kv export;
kvc pack), process 2 is `python3 -m ember_kv.parity`. Each run writes a receipt that must
validate against schemas/parity-receipt.schema.json and `ember contract validate`; a
deliberately wrong key permutation must FAIL the gate."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import jsonschema
import numpy as np

from tests.support import SOURCE_DIR, run_ember, shared_path

with open(os.path.join(SOURCE_DIR, "schemas", "parity-receipt.schema.json")) as _f:
    SCHEMA = json.load(_f)

PROMPT = "Lily wanted to play with the big red ball, but her mom said"


def process_1(model, work):
    """ember, as separate processes: uninterrupted greedy inference recording the logits of
    the step after the resume token; export of the prefix; packing it into KVC1."""
    logits = os.path.join(work, "native.f32")
    run_ember("run", "--model", model, "--prompt", PROMPT, "-n", "2", "--ignore-eos", "--quiet",
              "--threads", "1", "--dump-logits", logits)
    run_ember("kv", "export", "--model", model, "--prompt", PROMPT, "--output", os.path.join(work, "snap"))
    kvc = os.path.join(work, "prefix.kvc")
    run_ember("kvc", "pack", os.path.join(work, "snap"), kvc)
    rows = np.fromfile(logits, dtype="<f4").reshape(2, -1)
    tokens = np.fromfile(logits + ".tokens", dtype="<i4")
    np.asarray(rows[1]).astype("<f4").tofile(os.path.join(work, "next.f32"))
    return kvc, os.path.join(work, "next.f32"), tokens


def process_2(kvc, model, logits, receipt, assume_layout=None):
    args = [sys.executable, "-m", "ember_kv.parity", "--kvc", kvc, "--model", model,
            "--native-logits", logits, "--receipt", receipt]
    if assume_layout:
        args += ["--assume-layout", assume_layout]
    env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE_DIR, "python"))
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    if not os.path.exists(receipt):
        return proc, None
    with open(receipt) as f:
        return proc, json.load(f)


class TwoProcessGate(unittest.TestCase):
    """ember (process 1) against the numpy Hugging Face semantics (process 2), on the real
    model and on synthetic llama and qwen2 models (F32)."""

    def gate(self, model_rel, wrong_layout):
        model = shared_path("models/" + model_rel)
        with tempfile.TemporaryDirectory() as work:
            kvc, next_logits, tokens = process_1(model, work)
            proc, receipt = process_2(kvc, model, next_logits, os.path.join(work, "receipt.json"))
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            jsonschema.validate(receipt, SCHEMA)
            self.assertEqual(receipt["result"], "pass")
            # The container's resume token is the token uninterrupted inference chose first.
            self.assertEqual(receipt["resume_token"], int(tokens[-2]))
            self.assertLessEqual(receipt["max_abs_logit_diff"], receipt["tolerance"])
            # ember's own CLI agrees that the receipt is a valid contract document.
            run_ember("contract", "validate", os.path.join(work, "receipt.json"))
            bad_path = os.path.join(work, "wrong.json")
            proc, bad = process_2(kvc, model, next_logits, bad_path, assume_layout=wrong_layout)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            jsonschema.validate(bad, SCHEMA)
            self.assertEqual(bad["result"], "fail")
            return receipt

    def test_replay_accepts_kvc1_like_a_directory(self):
        """`ember kv replay` resumes from the .kvc exactly as from the snapshot directory."""
        model = shared_path("models/stories260K.gguf")
        with tempfile.TemporaryDirectory() as work:
            snap = os.path.join(work, "snap")
            run_ember("kv", "export", "--model", model, "--prompt", PROMPT, "--output", snap)
            run_ember("kvc", "pack", snap, os.path.join(work, "p.kvc"))
            a = run_ember("kv", "replay", "--snapshot", snap, "--model", model, "-n", "8")
            b = run_ember("kv", "replay", "--snapshot", os.path.join(work, "p.kvc"), "--model", model, "-n", "8")
            self.assertEqual(a.stdout, b.stdout)
            self.assertTrue(a.stdout.strip())

    def test_two_process_gate_stories260k(self):
        r = self.gate("stories260K.gguf", "neox")
        print(f"\nparity stories260K: max |logit diff| {r['max_abs_logit_diff']:.3g}", file=sys.stderr)

    def test_two_process_gate_synthetic_llama(self):
        r = self.gate("synthetic/llama-gqa-s5005.F32.gguf", "neox")
        print(f"\nparity llama-gqa: max |logit diff| {r['max_abs_logit_diff']:.3g}", file=sys.stderr)

    def test_two_process_gate_synthetic_qwen2(self):
        r = self.gate("synthetic/qwen2-bias-s5006.F32.gguf", "normal")
        print(f"\nparity qwen2-bias: max |logit diff| {r['max_abs_logit_diff']:.3g}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
