"""KVC1 <-> torch tensors in the Hugging Face layout (ember_kv.torch_cache): bits preserved for
f16 and bf16, exact widening to f32 on request, the llama key permutation as hf.py does, the
streaming writer, and a byte-identical round trip of a real ember KVC1 file through torch."""
import os
import tempfile
import unittest

import numpy as np
import torch

from ember_kv import hf, torch_cache
from ember_kv.kvc1 import read_kvc1, write_kvc1
from tests.support import run_ember, shared_path

LAYERS, HEADS, POS, DIM = 3, 2, 5, 8


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def state(dtype, layout="normal"):
    return {"geometry": {"layers": LAYERS, "kv_heads": HEADS, "head_dim": DIM, "positions": POS},
            "rope": {"layout": layout}, "representation": {"dtype": dtype, "keys": "post-rope"}}


def header(dtype, layout="normal"):
    return {"artifact": {"kind": "native"}, "format": "ember.kvc1", "state": state(dtype, layout)}


def bit_tensors(np_dtype, seed=5):
    """Every 16-bit pattern class: random bits (finite ones), plus -0, subnormals, max."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(2 * LAYERS):
        bits = rng.integers(0, 1 << 16, size=(HEADS, POS, DIM), dtype=np.uint16)
        inf_nan = 0x7F80 if np_dtype == np.uint16 else 0x7C00  # exponent all ones: refused by ember
        bits[(bits & inf_nan) == inf_nan] = 0x3C00
        bits[0, 0, :4] = [0x8000, 0x0001, 0x03FF, 0x7BFF]
        out.append(bits.view(np_dtype))
    return out


class TorchCacheTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def round_trip(self, dtype_name, np_dtype, torch_dtype):
        data = bit_tensors(np_dtype)
        write_kvc1(self.path("a.kvc"), header(dtype_name), data)
        past = torch_cache.to_legacy_cache(self.path("a.kvc"))
        self.assertEqual(len(past), LAYERS)
        for i, (k, v) in enumerate(past):
            self.assertEqual(tuple(k.shape), (1, HEADS, POS, DIM))
            self.assertEqual(k.dtype, torch_dtype)
            # values: the same bits; keys: the same bits in HF order
            np.testing.assert_array_equal(v[0].view(torch.int16).numpy().view(np.uint16), data[2 * i + 1].view(np.uint16))
            want_k = hf.ember_to_hf_keys(data[2 * i].view(np.uint16), "normal")
            np.testing.assert_array_equal(k[0].view(torch.int16).numpy().view(np.uint16), want_k)
        torch_cache.from_legacy_cache(past, state(dtype_name), self.path("b.kvc"))
        self.assertEqual(read_bytes(self.path("a.kvc")), read_bytes(self.path("b.kvc")))

    def test_f16_bits_preserved(self):
        self.round_trip("f16", np.float16, torch.float16)

    def test_bf16_bits_preserved(self):
        self.round_trip("bf16", np.uint16, torch.bfloat16)

    def test_f32_on_request_widens_exactly(self):
        data = bit_tensors(np.float16)
        write_kvc1(self.path("a.kvc"), header("f16", "neox"), data)
        past = torch_cache.to_legacy_cache(self.path("a.kvc"), dtype=torch.float32)
        for i, (k, v) in enumerate(past):
            self.assertEqual(k.dtype, torch.float32)
            np.testing.assert_array_equal(k[0].numpy(), data[2 * i].astype(np.float32))  # neox: no permutation
            np.testing.assert_array_equal(v[0].numpy(), data[2 * i + 1].astype(np.float32))

    def test_permutation_matches_numpy_adapter_and_inverts(self):
        k = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
        hfk = torch_cache.ember_to_hf_keys(k, "normal")
        np.testing.assert_array_equal(hfk.numpy(), hf.ember_to_hf_keys(k.numpy(), "normal"))
        np.testing.assert_array_equal(torch_cache.hf_to_ember_keys(hfk, "normal").numpy(), k.numpy())
        self.assertTrue(torch.equal(torch_cache.ember_to_hf_keys(k, "neox"), k))
        with self.assertRaises(ValueError):
            torch_cache.ember_to_hf_keys(k, "glm")

    def test_streaming_writer_takes_callables(self):
        data = bit_tensors(np.float16)
        calls = []

        def make(i):
            def f():
                calls.append(i)
                return data[i]
            return f
        write_kvc1(self.path("a.kvc"), header("f16"), data)
        write_kvc1(self.path("b.kvc"), header("f16"), [make(i) for i in range(len(data))])
        self.assertEqual(read_bytes(self.path("a.kvc")), read_bytes(self.path("b.kvc")))
        # one hashing pass, then one writing pass, one tensor at a time in table order
        self.assertEqual(calls, list(range(len(data))) * 2)

    def test_bad_shapes_refused(self):
        past = tuple((torch.zeros(1, HEADS, POS, DIM), torch.zeros(1, HEADS, POS, DIM)) for _ in range(LAYERS))
        with self.assertRaisesRegex(ValueError, "layers"):
            torch_cache.from_legacy_cache(past[:2], state("f16"), self.path("x.kvc"))
        bad = past[:2] + ((torch.zeros(1, HEADS, POS + 1, DIM), torch.zeros(1, HEADS, POS, DIM)),)
        with self.assertRaisesRegex(ValueError, r"past_key_values\[2\]"):
            torch_cache.from_legacy_cache(bad, state("f16"), self.path("x.kvc"))
        self.assertFalse(os.path.exists(self.path("x.kvc")))

    def test_ember_kvc1_round_trips_byte_identically_through_torch(self):
        """ember's own KVC1 (kv export + kvc pack of stories260K, a llama: keys permuted) ->
        torch legacy tuple -> Python writer gives the same bytes, seal included."""
        model = shared_path("models/stories260K.gguf")
        snap, a = self.path("snap"), self.path("e.kvc")
        run_ember("kv", "export", "--model", model, "--prompt", "Once upon a time", "--output", snap)
        run_ember("kvc", "pack", snap, a)
        kvc = read_kvc1(a)
        self.assertEqual(kvc.state["rope"]["layout"], "normal")
        past = torch_cache.to_legacy_cache(kvc)
        self.assertEqual(past[0][0].dtype, torch.float16)
        torch_cache.from_legacy_cache(past, kvc.state, self.path("t.kvc"))
        self.assertEqual(read_bytes(a), read_bytes(self.path("t.kvc")))
        run_ember("kvc", "verify", self.path("t.kvc"))

    def test_dynamic_cache(self):
        data = bit_tensors(np.float16)
        write_kvc1(self.path("a.kvc"), header("f16"), data)
        try:
            import transformers  # noqa: F401
        except ImportError:
            with self.assertRaises(ImportError):
                torch_cache.to_dynamic_cache(self.path("a.kvc"))
            return
        cache = torch_cache.to_dynamic_cache(self.path("a.kvc"))
        self.assertEqual(cache.get_seq_length(), POS)
        torch_cache.from_legacy_cache(cache, state("f16"), self.path("b.kvc"))
        self.assertEqual(read_bytes(self.path("a.kvc")), read_bytes(self.path("b.kvc")))


if __name__ == "__main__":
    unittest.main()
