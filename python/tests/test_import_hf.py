"""`ember model import-hf` on checkpoints the torch reference writes (config.json +
model.safetensors in the Hugging Face layout): the llama Q/K permutation reproduces llama.cpp's
own GGUF of stories260K tensor for tensor; qwen2 and qwen3 round-trip to the same model
identity; ember's logits on the imported files are within the F32 bounds of
../shared/models/README.md of the torch reference; tokenizer.json becomes GGUF tokenizer
metadata that tokenizes identically; malformed checkpoints are refused naming the field."""
import json
import os
import shutil
import tempfile
import unittest

import numpy as np

from ember_kv.gguf import Gguf
from ember_kv.tiny_tokenizer import gpt2_tokenizer_json
from ember_kv.torch_ref import TorchRef
from tests.support import run_ember, shared_path
from tests.test_torch_ref import synth

IDS = [1, 317, 391, 266, 267, 337, 335, 265, 370, 352, 266, 268, 388, 432, 398, 311, 357, 336]
SYNTH_IDS = [5, 77, 120, 33, 250, 9, 64, 201, 17, 88, 140]


def ember_logits(model, ids, d, name):
    """ember run teacher-forced on its own greedy continuation: logits of the last prompt
    position and of 3 more steps, and the ids."""
    out = os.path.join(d, name + ".f32")
    run_ember("run", "--model", model, "--prompt-ids", ",".join(map(str, ids)), "-n", "4", "--ignore-eos",
              "--quiet", "--threads", "1", "--dump-logits", out, "--force")
    return np.fromfile(out, dtype="<f4").reshape(4, -1), np.fromfile(out + ".tokens", dtype="<i4")


def identity(model):
    return json.loads(run_ember("model", "inspect", model, "--json").stdout)["identity"]


class ImportHf(unittest.TestCase):
    def convert(self, ref, d, name, dtype="F32", extra=()):
        ckpt, out = os.path.join(d, name), os.path.join(d, name + ".gguf")
        ref.save_checkpoint(ckpt, dtype)
        run_ember("model", "import-hf", ckpt, "--output", out, "--no-tokenizer", *extra)
        return ckpt, out

    def check_logits(self, imported, ckpt, ids, d, bound=0.05):
        """ember on the imported GGUF vs the torch reference on the checkpoint (F32 bound)."""
        ember, toks = ember_logits(imported, ids, d, "imp")
        torch_logits, _ = TorchRef.from_checkpoint(ckpt).forward(toks[:-1])
        got = torch_logits.numpy()[len(ids) - 1:]
        diff = float(np.abs(got - ember).max())
        self.assertLess(diff, bound)
        np.testing.assert_array_equal(got.argmax(1), ember.argmax(1))
        return diff

    def test_llama_permutation_reproduces_llama_cpps_gguf(self):
        """stories260K.gguf (llama.cpp's file) -> HF checkpoint -> import-hf: every tensor
        byte-identical to llama.cpp's (so the Q/K permutation is the converter's), the
        llama.* metadata equal except the two keys llama.cpp's HF converter writes and its
        llama2.c converter does not, and ember's logits bit-identical to the original's."""
        original = shared_path("models/stories260K.gguf")
        with tempfile.TemporaryDirectory() as d:
            ckpt, out = self.convert(TorchRef.from_gguf(original), d, "stories")
            a, b = Gguf(original), Gguf(out)
            self.assertEqual(sorted(a.tensor_types), sorted(b.tensor_types))
            for n in a.tensor_types:
                np.testing.assert_array_equal(a.tensor(n), b.tensor(n), n)
            keys = {k for k in set(a.metadata) | set(b.metadata) if k.startswith("llama.")}
            differ = {k for k in keys if a.metadata.get(k) != b.metadata.get(k)}
            self.assertEqual(differ, {"llama.rope.freq_base", "llama.vocab_size"})
            self.assertEqual(b.metadata["llama.rope.freq_base"], 10000.0)
            mine, _ = ember_logits(out, IDS, d, "a")
            theirs, _ = ember_logits(original, IDS, d, "b")
            np.testing.assert_array_equal(mine, theirs)
            diff = self.check_logits(out, ckpt, IDS, d)
            print(f"\nimport-hf stories260K: ember vs torch max |diff| {diff:.3g}", flush=True)

    def test_qwen2_and_qwen3_round_trip_to_the_same_identity(self):
        with tempfile.TemporaryDirectory() as d:
            for model, ids in ((shared_path("models/synthetic/qwen2-bias-s5006.F32.gguf"), IDS),
                               (synth("qwen3", d), SYNTH_IDS)):
                ref = TorchRef.from_gguf(model)
                ckpt, out = self.convert(ref, d, ref.arch + "-hf")
                self.assertEqual(identity(out), identity(model), model)
                diff = self.check_logits(out, ckpt, ids, d)
                print(f"\nimport-hf {ref.arch}: ember vs torch max |diff| {diff:.3g}", flush=True)

    def test_f16_and_bf16_checkpoints(self):
        """Half-precision checkpoints import (matrices kept as f16 / bf16) and stay within the
        F32 bound of the torch reference run on the same checkpoint."""
        with tempfile.TemporaryDirectory() as d:
            model = synth("llama", d)
            for dtype, flag in (("F16", "f16"), ("BF16", "bf16")):
                ckpt, out = self.convert(TorchRef.from_gguf(model), d, "llama-" + flag, dtype, ("--type", flag))
                g = Gguf(out)
                self.assertEqual(g.tensor_types["blk.0.attn_q.weight"], {"f16": 1, "bf16": 30}[flag])
                self.assertEqual(g.tensor_types["blk.0.attn_norm.weight"], 0)
                if flag == "f16":  # ember_kv.gguf reads F16, not BF16; ember itself runs both
                    self.check_logits(out, ckpt, SYNTH_IDS, d)
                else:
                    ember_logits(out, SYNTH_IDS, d, "bf16")

    def test_tokenizer_json_becomes_gguf_metadata(self):
        with tempfile.TemporaryDirectory() as d:
            model = synth("qwen2", d)
            ckpt = os.path.join(d, "ck")
            TorchRef.from_gguf(model).save_checkpoint(ckpt)
            with open(os.path.join(ckpt, "tokenizer.json"), "w") as f:
                json.dump(gpt2_tokenizer_json(290), f)
            out = os.path.join(d, "t.gguf")
            res = run_ember("model", "import-hf", ckpt, "--output", out).stdout
            self.assertIn("tokenizer 290 tokens (+10 padding to vocab_size)", res)
            g = Gguf(out)
            self.assertEqual(g.metadata["tokenizer.ggml.model"], "gpt2")
            self.assertEqual(len(g.metadata["tokenizer.ggml.tokens"]), 300)
            self.assertEqual(g.metadata["tokenizer.ggml.token_type"][-1], 5)  # padding: unused
            text = "the cat in the hat<|endoftext|> sat on the mat"
            a = json.loads(run_ember("tokenize", "--model", out, "--prompt", text, "--json").stdout)
            b = json.loads(run_ember("tokenize", "--tokenizer", os.path.join(ckpt, "tokenizer.json"), "--prompt", text,
                                     "--json").stdout)
            self.assertEqual(a["ids"], b["ids"])
            # the padding is a trailing unused run, which the identity ignores
            self.assertEqual(a["tokenizer"]["identity"], b["tokenizer"]["identity"])
            self.assertIn(289, a["ids"])  # the special token
            # A tokenizer larger than the embedding is refused by name.
            shutil.copy(shared_path("tokenizer/qwen3/tokenizer.json"), os.path.join(ckpt, "tokenizer.json"))
            p = run_ember("model", "import-hf", ckpt, "--output", os.path.join(d, "u.gguf"), check=False)
            self.assertEqual(p.returncode, 2)
            self.assertIn("vocabulary: expected at most 300 tokens (config.json vocab_size)", p.stderr)

    def test_malformed_checkpoints_are_refused_naming_the_field(self):
        from ember_kv.safetensors import read_safetensors, write_safetensors
        with tempfile.TemporaryDirectory() as d:
            base = os.path.join(d, "base")
            TorchRef.from_gguf(synth("qwen3", d)).save_checkpoint(base)
            tensors, _ = read_safetensors(os.path.join(base, "model.safetensors"))
            with open(os.path.join(base, "config.json")) as f:
                config = json.load(f)

            def case(name, cfg=None, edit=None):
                ck = os.path.join(d, name)
                os.makedirs(ck)
                t = dict(tensors)
                if edit:
                    edit(t)
                write_safetensors(os.path.join(ck, "model.safetensors"), t)
                with open(os.path.join(ck, "config.json"), "w") as f:
                    json.dump(dict(config, **(cfg or {})), f)
                p = run_ember("model", "import-hf", ck, "--no-tokenizer", "--output", os.path.join(d, name + ".gguf"),
                              check=False)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertFalse(os.path.exists(os.path.join(d, name + ".gguf")))
                return p.stderr

            self.assertIn('tensor "model.layers.1.mlp.up_proj.weight": expected present',
                          case("missing", edit=lambda t: t.pop("model.layers.1.mlp.up_proj.weight")))
            self.assertIn('tensor "model.layers.2.mlp.up_proj.weight": expected a qwen3 weight',
                          case("extra", edit=lambda t: t.update({"model.layers.2.mlp.up_proj.weight": np.zeros(2, np.float32)})))
            self.assertIn('tensor "model.norm.weight".shape: expected [64]',
                          case("shape", edit=lambda t: t.update({"model.norm.weight": np.zeros(65, np.float32)})))
            self.assertIn('tensor "model.norm.weight".dtype: expected F32|F16|BF16',
                          case("dtype", edit=lambda t: t.update({"model.norm.weight": np.zeros(64, np.int32)})))
            self.assertIn("rope_scaling: expected null", case("scaling", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}))
            self.assertIn("model_type: expected llama|qwen2|qwen3", case("arch", {"model_type": "mistral"}))
            self.assertIn("num_key_value_heads: expected a divisor", case("gqa", {"num_key_value_heads": 3}))
            self.assertIn("architectures: expected", case("class", {"architectures": ["LlamaForCausalLM"]}))


if __name__ == "__main__":
    unittest.main()
