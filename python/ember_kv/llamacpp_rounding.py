"""How close can any engine come to llama.cpp's reference logits? An f64 model of the f16
rounding points of llama.cpp's CPU path (no flash attention, f16 KV cache) for GGUF `llama`
files with F32/F16/Q8_0 weights, used to measure the noise floor of the comparison in
docs/numerics.md ("Accuracy"). Independent of ember's engine; analysis only.

Rounding points modelled (each optional, all on by default):
  act16  the input of every matmul with F16 weights is rounded to f16 (ggml converts src1 to
         the weight's vec_dot_type);
  act8   the input of every matmul with Q8_0 weights is quantized to Q8_0 blocks of 32
         (d = amax / 127 stored as f16, q = round(x * 127 / amax)), as ggml's AVX2
         quantize_row_q8_0 does;
  kv16   K (after RoPE) and V are stored in the f16 cache;
  q16    Q is rounded to f16 for the K product;
  p16    the softmax probabilities are rounded to f16 for the V product.
Everything else is exact f64. `perturb` multiplies every value by (1 + perturb * N(0, 1))
just before each f16 rounding: f32-sized noise (1e-7) stands in for the rounding order of
an f32 engine, which decides which near-tie values round up or down.

Usage: python3 -m ember_kv.llamacpp_rounding MODEL.gguf REF_STEM [REF_STEM ...]
  [--exact] [--perturb 1e-7 --seeds 4]; REF_STEM is a reference path without
  .tokens.i32 / .logits.f32 (48 rows each, ../shared/models/README.md).
"""
import argparse
import sys

import numpy as np

from .gguf import Gguf

F16_TYPE = 1
Q8_0_TYPE = 8
ALL_POINTS = ("act16", "act8", "kv16", "q16", "p16")


class Rounding:
    def __init__(self, points=ALL_POINTS, perturb=0.0, seed=0):
        self.points = set(points)
        self.perturb = perturb
        self.rng = np.random.default_rng(seed)

    def f16(self, point, x):
        if point not in self.points:
            return x
        if self.perturb:
            x = x * (1.0 + self.perturb * self.rng.standard_normal(x.shape))
        return x.astype(np.float16).astype(np.float64)

    def q8_0(self, x):
        """x (n, k) through Q8_0 activation blocks and back (exact dequantized values)."""
        if "act8" not in self.points:
            return x
        if self.perturb:
            x = x * (1.0 + self.perturb * self.rng.standard_normal(x.shape))
        b = x.reshape(x.shape[0], -1, 32)
        amax = np.abs(b).max(axis=-1, keepdims=True)
        d = (amax / 127.0).astype(np.float32).astype(np.float16).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(amax > 0, np.float32(127.0) / amax.astype(np.float32), 0.0)
        q = np.clip(np.round(b * inv), -127, 127)  # numpy rounds half to even, as ggml's SIMD
        return (q * d).reshape(x.shape)


class LlamaModel:
    def __init__(self, path):
        g = Gguf(path)
        m = g.metadata
        if m.get("general.architecture") != "llama":
            raise ValueError(f"{path}: general.architecture: expected llama, found {m.get('general.architecture')!r}")
        self.g = g
        self.n_embd = int(m["llama.embedding_length"])
        self.n_heads = int(m["llama.attention.head_count"])
        self.n_kv = int(m.get("llama.attention.head_count_kv", self.n_heads))
        self.head_dim = self.n_embd // self.n_heads
        self.n_layers = int(m["llama.block_count"])
        self.eps = float(m["llama.attention.layer_norm_rms_epsilon"])
        self.theta = float(m.get("llama.rope.freq_base", 10000.0))
        self.cache = {}

    def w(self, name):
        if name not in self.cache:
            self.cache[name] = self.g.tensor(name)
        return self.cache[name]

    def matmul(self, name, x, r):
        if self.g.tensor_types[name] == F16_TYPE:
            x = r.f16("act16", x)
        elif self.g.tensor_types[name] == Q8_0_TYPE:
            x = r.q8_0(x)
        return x @ self.w(name).T

    def norm(self, x, name):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.w(name)

    def logits(self, tokens, r):
        """Teacher-forced logits (n, vocab) for every position of `tokens`."""
        n, D, H, G = len(tokens), self.head_dim, self.n_heads, self.n_kv
        x = self.w("token_embd.weight")[np.asarray(tokens)]
        angle = np.outer(np.arange(n), self.theta ** (-np.arange(0, D, 2) / D))
        c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]

        def rope(t):  # GGML "normal" layout: adjacent pairs (2i, 2i + 1)
            a, b = t[..., 0::2], t[..., 1::2]
            out = np.empty_like(t)
            out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
            return out

        mask = np.triu(np.full((n, n), -np.inf), 1)
        for layer in range(self.n_layers):
            p = f"blk.{layer}."
            h = self.norm(x, p + "attn_norm.weight")
            q = r.f16("q16", rope(self.matmul(p + "attn_q.weight", h, r).reshape(n, H, D)))
            k = r.f16("kv16", rope(self.matmul(p + "attn_k.weight", h, r).reshape(n, G, D)))
            v = r.f16("kv16", self.matmul(p + "attn_v.weight", h, r).reshape(n, G, D))
            k, v = np.repeat(k, H // G, axis=1), np.repeat(v, H // G, axis=1)
            scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(D) + mask
            prob = np.exp(scores - scores.max(-1, keepdims=True))
            prob = r.f16("p16", prob / prob.sum(-1, keepdims=True))
            att = np.einsum("hts,shd->thd", prob, v).reshape(n, H * D)
            x = x + self.matmul(p + "attn_output.weight", att, r)
            h = self.norm(x, p + "ffn_norm.weight")
            gate, up = self.matmul(p + "ffn_gate.weight", h, r), self.matmul(p + "ffn_up.weight", h, r)
            x = x + self.matmul(p + "ffn_down.weight", gate / (1 + np.exp(-gate)) * up, r)
        h = self.norm(x, "output_norm.weight")
        head = "output.weight" if "output.weight" in self.g.tensor_types else "token_embd.weight"
        return self.matmul(head, h, r)


def load_reference(stem, steps=48):
    tokens = np.fromfile(stem + ".tokens.i32", dtype="<i4")
    rows = np.fromfile(stem + ".logits.f32", dtype="<f4").astype(np.float64)
    if len(tokens) <= steps or rows.size % steps:
        raise ValueError(f"{stem}: expected {steps} logits rows and more than {steps} tokens")
    return tokens, rows.reshape(steps, -1)


def worst_row_mean(model, stem, rounding, steps=48):
    """max over the reference rows of mean |ours - reference| (teacher forcing)."""
    tokens, ref = load_reference(stem, steps)
    prompt = len(tokens) - steps
    ours = model.logits(tokens[:-1], rounding)[prompt - 1:]
    return float(np.abs(ours - ref).mean(axis=1).max())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("stems", nargs="+")
    ap.add_argument("--exact", action="store_true", help="no rounding point at all (exact f64)")
    ap.add_argument("--perturb", type=float, default=0.0)
    ap.add_argument("--seeds", type=int, default=1)
    a = ap.parse_args(argv)
    model = LlamaModel(a.model)
    points = () if a.exact else ALL_POINTS
    for stem in a.stems:
        vals = [worst_row_mean(model, stem, Rounding(points, a.perturb, seed)) for seed in range(a.seeds)]
        print(f"{stem}: worst-row mean |diff| " + " ".join(f"{v:.4f}" for v in vals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
