"""The llama.cpp rounding model behind docs/numerics.md "Accuracy".

1. The f16 rounding points ember's attention copies from llama.cpp (f16 cache, Q and the
   softmax weights in f16) are real: with them an f64 pass lands far closer to llama.cpp's
   stories260K F32 logits than the exact f64 pass does, on every prompt.
2. The F16 file's per-row bound cannot be met reliably: f32-sized noise before the f16
   roundings (which is all that separates two faithful f32 engines) moves the worst-row mean
   of even the full llama.cpp recipe across the README's 0.005.
3. The Q8_0 activation recipe ember uses is llama.cpp's exactly: one of a few f32-noise
   draws reproduces llama.cpp's Q8_0 logits to 1e-4, the others differ by whole rounding
   flips (0.05-0.1), and without the activation quantization no draw comes close.
"""
import unittest

from ember_kv.llamacpp_rounding import ALL_POINTS, LlamaModel, Rounding, worst_row_mean
from tests.support import shared_path


class LlamaCppRoundingTest(unittest.TestCase):
    def test_f16_rounding_points_explain_most_of_the_f32_difference(self):
        model = LlamaModel(shared_path("models/stories260K.gguf"))
        for prompt in ("p1", "p2", "p3"):
            stem = shared_path(f"models/reference/stories260K.{prompt}.tokens.i32")[: -len(".tokens.i32")]
            exact = worst_row_mean(model, stem, Rounding(points=()))
            recipe = worst_row_mean(model, stem, Rounding(ALL_POINTS))
            print(f"stories260K {prompt}: exact f64 {exact:.4f}, with llama.cpp's f16 points {recipe:.4f}")
            self.assertGreater(exact, 0.0045, prompt)  # measured 0.0050 / 0.0068 / 0.0065
            self.assertLess(recipe, 0.6 * exact, prompt)  # measured 0.0016 / 0.0015 / 0.0028

    def test_f16_file_bound_is_within_rounding_noise(self):
        model = LlamaModel(shared_path("models/stories260K-F16.gguf"))
        stem = shared_path("models/reference/stories260K-F16.p2.tokens.i32")[: -len(".tokens.i32")]
        values = [worst_row_mean(model, stem, Rounding(ALL_POINTS, perturb=1e-7, seed=s)) for s in range(4)]
        print("stories260K-F16 p2, recipe + 1e-7 noise, worst-row mean:", " ".join(f"{v:.4f}" for v in values))
        self.assertGreater(max(values), 0.005)       # measured 0.0078 - 0.0133
        self.assertGreater(max(values) - min(values), 0.002)

    def test_q8_0_activation_recipe_reproduces_llamacpp(self):
        model = LlamaModel(shared_path("models/stories260K-Q8_0.gguf"))
        stem = shared_path("models/reference/stories260K-Q8_0.p1.tokens.i32")[: -len(".tokens.i32")]
        draws = [worst_row_mean(model, stem, Rounding(ALL_POINTS, perturb=1e-7, seed=s)) for s in range(6)]
        without = worst_row_mean(model, stem, Rounding([p for p in ALL_POINTS if p != "act8"]))
        print("stories260K-Q8_0 p1, recipe + 1e-7 noise:", " ".join(f"{v:.6f}" for v in draws),
              f"| without the 8-bit activations: {without:.4f}")
        self.assertLess(min(draws), 1e-4)  # measured 1e-6 (seed 4)
        self.assertGreater(without, 0.1)   # measured 0.147


if __name__ == "__main__":
    unittest.main()
