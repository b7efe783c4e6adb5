"""The two-process parity gate (docs/formats/kvc1.md, issue 8.3).

test_two_process_gate_*: process 1 is ember (exports the prefix to a KVC1 file and records the
logits of uninterrupted inference after the resume token); process 2 is
`python3 -m ember_kv.parity` (numpy Hugging Face semantics, cache rebuilt from the KVC1 file
through the adapter). Each writes a receipt that must validate against
schemas/parity-receipt.schema.json; a deliberately wrong key permutation must FAIL the gate.
"""
import hashlib
import json
import os
import tempfile
import unittest

import jsonschema
import numpy as np

from ember_kv import hf, parity
from ember_kv.ref_forward import RefModel
from tests.support import SOURCE_DIR, shared_path

SCHEMA = json.load(open(os.path.join(SOURCE_DIR, "schemas", "parity-receipt.schema.json")))


def reference_state(ref, tokens, resume):
    n = len(tokens)
    return {
        "model": {"architecture": ref.arch, "identity": "0" * 64},
        "tokenizer": {"identity": "1" * 64},
        "geometry": {"layers": ref.n_layers, "kv_heads": ref.n_kv, "head_dim": ref.head_dim, "positions": n},
        "rope": {"layout": "normal" if ref.arch == "llama" else "neox", "theta": ref.theta},
        "representation": {"dtype": "f16", "keys": "post-rope", "values": "projected"},
        "prefix": {"tokens": [int(t) for t in tokens],
                   "sha256": hashlib.sha256(np.asarray(tokens, "<i4").tobytes()).hexdigest()},
        "resume": {"token": resume, "position": n},
    }


class GateLogic(unittest.TestCase):
    """The gate's own logic with a cache the reference produced (one implementation): it must
    pass with the right key order and fail with the wrong one, for both RoPE layouts."""

    def test_gate_passes_right_order_and_fails_wrong_order(self):
        for model, wrong in (("stories260K.gguf", "neox"), ("synthetic/qwen2-bias-s5006.F32.gguf", "normal")):
            path = shared_path("models/" + model)
            ref = RefModel(path)
            tokens = [1, 403, 407, 261, 378, 280, 268, 275, 30]
            logits, cache = ref.forward(tokens)
            resume = int(logits[-1].argmax())
            full, _ = ref.forward(tokens + [resume])
            with tempfile.TemporaryDirectory() as d:
                kvc = os.path.join(d, "ref.kvc")
                state = reference_state(ref, tokens, resume)
                hf.from_hf_layers(cache, state, kvc)
                receipt, _ = parity.run_gate(kvc, path, full[-1])
                jsonschema.validate(receipt, SCHEMA)
                self.assertEqual(receipt["result"], "pass", receipt)
                self.assertLess(receipt["max_abs_logit_diff"], 0.02)  # f16 rounding of the cache only
                bad, _ = parity.run_gate(kvc, path, full[-1], assume_layout=wrong)
                jsonschema.validate(bad, SCHEMA)
                self.assertEqual(bad["result"], "fail", f"{model}: wrong key permutation passed: {bad}")
                self.assertGreater(bad["max_abs_logit_diff"], 10 * parity.DEFAULT_TOLERANCE)


if __name__ == "__main__":
    unittest.main()
