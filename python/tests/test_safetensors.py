"""safetensors in Python (ember_kv.safetensors, ember_kv.safetensors_cache) and against ember's
C++ reader and writer: hostile headers refused naming the field; a torch reference cache written
by Python in the mlx-lm and vLLM layouts imports into ember (`kv import-safetensors`) and ember
continues it with torch's own greedy tokens; ember's `kv export-safetensors` keys equal the
torch adapter's keys of the same state (both in Hugging Face order)."""
import json
import os
import re
import struct
import tempfile
import unittest

import numpy as np
import torch

from ember_kv import torch_cache
from ember_kv.safetensors import Safetensors, SafetensorsError, read_safetensors, write_safetensors
from ember_kv.safetensors_cache import read_mlx_cache, write_mlx_cache, write_vllm_cache
from ember_kv.torch_ref import TorchRef
from tests.support import run_ember, shared_path

IDS = [1, 317, 391, 266, 267, 337, 335, 265, 370, 352, 266, 268]


def raw(header, data_len, declared=None):
    h = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", declared if declared is not None else len(h)) + h + bytes(data_len)


class SafetensorsPython(unittest.TestCase):
    def test_round_trip_and_hostile_headers(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "a.safetensors")
            t = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "y": ("BF16", np.array([0x3F80], np.uint16))}
            write_safetensors(p, t, {"k": "v"})
            back, md = read_safetensors(p)
            np.testing.assert_array_equal(back["x"], t["x"])
            self.assertEqual(md, {"k": "v"})
            with open(p, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
            self.assertEqual((8 + n) % 8, 0)
            a = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
            cases = [
                (raw({"a": a}, 8, declared=1 << 62), "header length"),
                (raw({"a": a}, 8, declared=500), "header length"),
                (raw({"a": dict(a, dtype="F8_E4M3")}, 8), 'tensor "a".dtype'),
                (raw({"a": dict(a, data_offsets=[0, 80])}, 8), 'tensor "a".data_offsets'),
                (raw({"a": dict(a, shape=[3])}, 8), 'tensor "a".data_offsets'),
                (raw({"a": a, "b": dict(a, data_offsets=[4, 12])}, 12), 'tensor "b".data_offsets'),
                (raw({"a": dict(a, data_offsets=[4, 12])}, 12), "no hole"),
                (raw({"a": a}, 9), "file size"),
                (raw(b'{"a":1,"a":2}', 0), "header key"),
            ]
            for i, (data, field) in enumerate(cases):
                q = os.path.join(d, f"bad{i}.safetensors")
                with open(q, "wb") as f:
                    f.write(data)
                with self.assertRaises(SafetensorsError, msg=field) as cm:
                    Safetensors(q)
                self.assertIn(field, str(cm.exception))
                # ember's C++ reader refuses the same file (import needs a model; any will do)
                proc = run_ember("kv", "import-safetensors", q, "--model", shared_path("models/stories260K.gguf"),
                                 "--prompt-ids", "1", "--output", os.path.join(d, f"o{i}"), check=False)
                self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                self.assertIn(q, proc.stderr)
                self.assertIn({"header key": "duplicated"}.get(field, field), proc.stderr)

    def test_torch_cache_imports_into_ember_and_continues(self):
        """The torch reference's cache of stories260K (f32, HF key order), written by Python
        as mlx-lm and vLLM write it, becomes a foreign ember state (torch computed it) whose
        replay, asked for with --allow-foreign, continues with the tokens torch itself generates
        greedily; without the flag replay refuses it, as it refuses every other engine's cache."""
        model = shared_path("models/stories260K.gguf")
        ref = TorchRef.from_gguf(model)
        logits, past = ref.forward(IDS)
        want, ids, p = [], list(IDS), past
        nxt = int(logits[-1].argmax())
        for _ in range(6):
            want.append(nxt)
            lg, p = ref.forward([nxt], p)
            nxt = int(lg[-1].argmax())
        with tempfile.TemporaryDirectory() as d:
            for layout, writer in (("mlx", write_mlx_cache), ("vllm", write_vllm_cache)):
                src = os.path.join(d, layout)
                writer(src, past)
                snap = os.path.join(d, "snap-" + layout)
                out = run_ember("kv", "import-safetensors", src, "--layout", layout, "--model", model,
                                "--engine", "torch", "--prompt-ids", ",".join(map(str, ids)), "--output", snap).stdout
                # The model check (docs/formats/llamacpp-state.md): layer 0 and every layer, K and V.
                self.assertIn("model check passed (4 positions)", out)
                m = re.search(r"keys ([0-9.e+-]+) at layer 0 \(bound [0-9.e+-]+\), ([0-9.e+-]+) over every layer "
                              r"\(bound [0-9.e+-]+\); values ([0-9.e+-]+) \([0-9.e+-]+\), ([0-9.e+-]+) ", out)
                diff = [float(x) for x in m.groups()]
                self.assertLess(max(diff), 0.01, out)  # f32 -> f16 rounding and two engines' f32 sums
                with open(os.path.join(snap, "manifest.json")) as f:
                    manifest = json.load(f)
                self.assertEqual(manifest["resume"]["token"], want[0])
                self.assertEqual(manifest["format"], "ember.kv-foreign")
                self.assertEqual(manifest["foreign"]["engine"], "torch")
                self.assertEqual(manifest["foreign"]["format"], "safetensors-" + layout)
                self.assertEqual(manifest["foreign"]["details"], {"layout": layout})
                refused = run_ember("kv", "replay", "--snapshot", snap, "--model", model, "-n", "5", check=False)
                self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
                self.assertIn("--allow-foreign", refused.stderr)
                # replay prints the resume token and the 5 tokens it selects after it
                rep = run_ember("kv", "replay", "--allow-foreign", "--snapshot", snap, "--model", model,
                                "-n", "5").stdout
                text = run_ember("detokenize", "--model", model, "--ids", ",".join(map(str, want))).stdout
                self.assertEqual(rep.rstrip("\n"), text.rstrip("\n"))
                self.assertTrue(rep.strip())

    def test_ember_export_keys_match_torch_adapter(self):
        model = shared_path("models/stories260K.gguf")
        with tempfile.TemporaryDirectory() as d:
            snap, kvc, st = (os.path.join(d, n) for n in ("s", "s.kvc", "s.safetensors"))
            run_ember("kv", "export", "--model", model, "--prompt-ids", ",".join(map(str, IDS)), "--output", snap)
            run_ember("kvc", "pack", snap, kvc)
            run_ember("kv", "export-safetensors", snap, "--output", st)
            mine = read_mlx_cache(st, 5)
            theirs = torch_cache.to_legacy_cache(kvc)
            for (k, v), (tk, tv) in zip(mine, theirs):
                np.testing.assert_array_equal(k.view(np.uint16), tk.view(torch.int16).numpy().view(np.uint16))
                np.testing.assert_array_equal(v.view(np.uint16), tv.view(torch.int16).numpy().view(np.uint16))
            md = Safetensors(st).metadata
            self.assertEqual(md["2.0"], "KVCache")
            self.assertEqual(md["1.ember_key_order"], "hf-rotate-half")


if __name__ == "__main__":
    unittest.main()
