"""The pure-PyTorch reference (ember_kv.torch_ref): against llama.cpp's logits and the numpy
f64 reference on the shared models, against ember on synthetic qwen3 (which neither of those
covers), continuation from a past_key_values tuple, and the HF checkpoint round trip."""
import os
import tempfile
import unittest

import numpy as np
import torch

from ember_kv.ref_forward import RefModel
from ember_kv.torch_ref import TorchRef
from tests.support import run_ember, shared_path

CASES = [("stories260K.gguf", "reference/stories260K.p2"),
         ("synthetic/llama-gqa-s5005.F32.gguf", "synthetic/llama-gqa-s5005.F32"),
         ("synthetic/qwen2-bias-s5006.F32.gguf", "synthetic/qwen2-bias-s5006.F32")]
SYNTH = {"llama": ["--arch", "llama", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
                   "--ffn", "128", "--vocab", "300"],
         "qwen2": ["--arch", "qwen2", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
                   "--ffn", "128", "--vocab", "300", "--qkv-bias", "--tied"],
         "qwen3": ["--arch", "qwen3", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
                   "--head-dim", "32", "--ffn", "128", "--vocab", "300", "--qk-norm"]}
PROMPT_IDS = [5, 77, 120, 33, 250, 9, 64, 201, 17, 88, 140]


def synth(arch, directory, seed=11):
    path = os.path.join(directory, f"{arch}.gguf")
    run_ember("model", "synth", *SYNTH[arch], "--type", "f32", "--seed", str(seed), "-o", path)
    return path


def ember_logits(model, ids, steps, directory):
    """ember run with teacher forcing of its own greedy tokens: (logits [steps, vocab], all ids)."""
    out = os.path.join(directory, "ember.f32")
    run_ember("run", "--model", model, "--prompt-ids", ",".join(map(str, ids)), "-n", str(steps),
              "--ignore-eos", "--quiet", "--threads", "1", "--dump-logits", out, "--force")
    tokens = np.fromfile(out + ".tokens", dtype="<i4")
    return np.fromfile(out, dtype="<f4").reshape(steps, -1), tokens


class TorchRefTest(unittest.TestCase):
    def test_matches_llama_cpp_and_numpy_reference(self):
        """F32 bound of ../shared/models/README.md against llama.cpp (max 0.05, same argmax on
        every row); within 2e-4 of the numpy f64 reference (f32 rounding only)."""
        for model, stem in CASES:
            path = shared_path("models/" + model)
            m = TorchRef.from_gguf(path)
            toks = np.fromfile(shared_path(f"models/{stem}.tokens.i32"), dtype=np.int32)
            want = np.fromfile(shared_path(f"models/{stem}.logits.f32"), dtype=np.float32)
            want = want.reshape(-1, m.config["vocab_size"])
            n_prompt = len(toks) - want.shape[0]
            got, _ = m.forward(toks[:-1])
            got = got.numpy()
            self.assertLess(np.abs(got[n_prompt - 1:] - want).max(), 0.05, model)
            np.testing.assert_array_equal(got[n_prompt - 1:].argmax(1), want.argmax(1), model)
            f64, _ = RefModel(path).forward(toks[:-1])
            self.assertLess(np.abs(got - f64).max(), 2e-4, model)

    def test_matches_ember_on_synthetic_llama_qwen2_qwen3(self):
        """With an f16 cache (ember's), the reference agrees with ember's logits within the F32
        bound and picks the same token on every row."""
        with tempfile.TemporaryDirectory() as d:
            for arch in SYNTH:
                model = synth(arch, d)
                ember, toks = ember_logits(model, PROMPT_IDS, 6, d)
                m = TorchRef.from_gguf(model, cache_dtype=torch.float16)
                self.assertEqual(m.arch, arch)
                got, _ = m.forward(toks[:-1])
                got = got.numpy()[len(PROMPT_IDS) - 1:]
                diff = np.abs(got - ember).max()
                self.assertLess(diff, 0.05, arch)
                np.testing.assert_array_equal(got.argmax(1), ember.argmax(1), arch)

    def test_continues_from_past_key_values(self):
        """prefill(prompt) then forward(rest, past) = one forward over everything (f32
        rounding of different matmul shapes only); a shifted position does not."""
        m = TorchRef.from_gguf(shared_path("models/stories260K.gguf"))
        ids = [1, 403, 407, 261, 378, 322, 263, 509, 98]
        whole, past_all = m.forward(ids)
        a, past = m.forward(ids[:5])
        self.assertEqual(tuple(past[0][0].shape), (1, m.n_kv, 5, m.head_dim))
        b, past2 = m.forward(ids[5:], past)
        self.assertLess((torch.cat([a, b]) - whole).abs().max().item(), 5e-5)
        self.assertEqual(past2[0][0].shape[2], len(ids))
        shifted, _ = m.forward(ids[5:], past, position_offset=6)
        self.assertGreater((shifted - b).abs().max().item(), 1e-2)

    def test_checkpoint_round_trip(self):
        """save_checkpoint writes the HF layout; reading it back gives the same logits (F32
        bit for bit, F16/BF16 weights within their rounding)."""
        m = TorchRef.from_gguf(shared_path("models/synthetic/qwen2-bias-s5006.F32.gguf"))
        ids = [1, 464, 314, 182, 197, 52]
        want, _ = m.forward(ids)
        with tempfile.TemporaryDirectory() as d:
            for dtype, bound in (("F32", 0.0), ("F16", 0.05), ("BF16", 0.5)):
                p = os.path.join(d, dtype)
                m.save_checkpoint(p, dtype)
                back = TorchRef.from_checkpoint(p)
                self.assertTrue(back.tied)
                got, _ = back.forward(ids)
                self.assertLessEqual((got - want).abs().max().item(), bound, dtype)


if __name__ == "__main__":
    unittest.main()
