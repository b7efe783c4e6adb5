"""The Hugging Face layout adapter: the key permutation is checked numerically against the
two RoPE conventions, the reference forward against llama.cpp's logits, and the KVC1 round trip
through the HF layout."""
import os
import tempfile
import unittest

import numpy as np

from ember_kv import hf
from ember_kv.gguf import Gguf
from ember_kv.kvc1 import read_kvc1
from ember_kv.ref_forward import RefModel
from tests.support import shared_path


def rope_adjacent(x, positions, theta):
    """ggml rope mode 0 (GGUF llama): rotate pairs (2j, 2j+1) by pos * theta^(-2j/d)."""
    d = x.shape[-1]
    freq = theta ** (-np.arange(0, d, 2) / d)
    ang = positions[:, None] * freq[None, :]
    c, s = np.cos(ang), np.sin(ang)
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
    return out


class HfLayoutTest(unittest.TestCase):
    def test_permutation_round_trips(self):
        k = np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
        np.testing.assert_array_equal(hf.hf_to_ember_keys(hf.ember_to_hf_keys(k, "normal"), "normal"), k)
        np.testing.assert_array_equal(hf.ember_to_hf_keys(k, "normal")[0, 0], [0, 2, 4, 6, 1, 3, 5, 7])
        np.testing.assert_array_equal(hf.ember_to_hf_keys(k, "neox"), k)
        with self.assertRaises(ValueError):
            hf.ember_to_hf_keys(k, "glm")

    def test_llama_post_rope_keys_map_exactly(self):
        """GGUF weights + adjacent-pair RoPE (ember's order), permuted per head, equal the HF
        reference's keys (un-permuted weights + rotate-half)."""
        path = shared_path("models/stories260K.gguf")
        g, ref = Gguf(path), RefModel(path)
        toks = np.array([1, 403, 407, 261, 378])
        _, cache = ref.forward(toks)
        x = ref.embd[toks]
        h = ref._norm(x, ref.layers[0]["attn_norm"])
        k_gguf = (h @ g.tensor("blk.0.attn_k.weight").T).reshape(len(toks), ref.n_kv, ref.head_dim).transpose(1, 0, 2)
        k_ember = rope_adjacent(k_gguf, np.arange(len(toks), dtype=np.float64), ref.theta)
        k_hf = cache[0][0][0]
        np.testing.assert_allclose(hf.ember_to_hf_keys(k_ember, "normal"), k_hf, atol=1e-12)
        self.assertGreater(np.abs(k_ember - k_hf).max(), 1e-3, "the permutation must matter for llama")

    def test_reference_forward_matches_llama_cpp(self):
        """The numpy reference agrees with llama.cpp's logits (teacher forcing) within the
        models README's bound for F32 files: max 0.05, and the same argmax on every row."""
        cases = [("stories260K.gguf", "reference/stories260K.p2"),
                 ("synthetic/llama-gqa-s5005.F32.gguf", "synthetic/llama-gqa-s5005.F32"),
                 ("synthetic/qwen2-bias-s5006.F32.gguf", "synthetic/qwen2-bias-s5006.F32")]
        for model, stem in cases:
            m = RefModel(shared_path("models/" + model))
            toks = np.fromfile(shared_path(f"models/{stem}.tokens.i32"), dtype=np.int32)
            want = np.fromfile(shared_path(f"models/{stem}.logits.f32"), dtype=np.float32)
            want = want.reshape(-1, m.lm_head.shape[0])
            n_prompt = len(toks) - want.shape[0]
            got, _ = m.forward(toks[:-1])
            got = got[n_prompt - 1:]
            self.assertLess(np.abs(got - want).max(), 0.05, model)
            np.testing.assert_array_equal(got.argmax(1), want.argmax(1), model)

    def test_kvc1_round_trip_through_hf_layout(self):
        rng = np.random.default_rng(3)
        layers = [(rng.standard_normal((1, 2, 4, 8)).astype(np.float16).astype(np.float32),
                   rng.standard_normal((1, 2, 4, 8)).astype(np.float16).astype(np.float32)) for _ in range(3)]
        state = {"geometry": {"layers": 3, "kv_heads": 2, "head_dim": 8, "positions": 4},
                 "rope": {"layout": "normal"}, "representation": {"dtype": "f16", "keys": "post-rope"}}
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "h.kvc")
            hf.from_hf_layers(layers, state, p)
            f = read_kvc1(p)
            back = hf.to_hf_layers(f)
            for (k, v), (k2, v2) in zip(layers, back):
                np.testing.assert_array_equal(k, k2)
                np.testing.assert_array_equal(v, v2)
            # stored in ember order: the first key head row is the permuted one
            np.testing.assert_array_equal(f.layer(0)[0][0], hf.hf_to_ember_keys(layers[0][0][0, 0], "normal"))

    def test_dynamic_cache_is_optional(self):
        layers = [(np.zeros((1, 1, 2, 4), np.float32), np.zeros((1, 1, 2, 4), np.float32))]
        try:
            import transformers  # noqa: F401
            import torch  # noqa: F401
        except ImportError:
            with self.assertRaises(ImportError):
                hf.to_dynamic_cache(layers)
            return
        cache = hf.to_dynamic_cache(layers)
        self.assertEqual(cache.get_seq_length(), 2)


if __name__ == "__main__":
    unittest.main()
