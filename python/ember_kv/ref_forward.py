"""An independent numpy implementation of the Hugging Face forward semantics of `llama` and
`qwen2` (transformers' LlamaForCausalLM / Qwen2ForCausalLM, eager attention), in float64,
reading weights from an F32/F16 GGUF. Written for the parity gate: it shares no code with
ember's engine.

GGUF `llama` files store the Q and K projection rows permuted for adjacent-pair RoPE
(llama.cpp's converter); this module un-permutes them into Hugging Face's rotate-half layout,
so its keys are in Hugging Face order and a KVC1 cache must go through hf.to_hf_layers to match.

Shapes: x (n, n_embd); q (n_heads, n, d); cache K/V (1, n_kv, seq, d) per layer.
"""
import numpy as np

from .gguf import Gguf


def unpermute_rows(w, n_head):
    """GGUF llama Q/K rows (per head: dims 2j, 2j+1 adjacent) -> HF rows (j, d/2 + j)."""
    rows = w.shape[0]
    d = rows // n_head
    return w.reshape(n_head, d // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class RefModel:
    def __init__(self, gguf_path):
        g = Gguf(gguf_path)
        self.arch = arch = g.metadata["general.architecture"]
        if arch not in ("llama", "qwen2"):
            raise ValueError(f"{gguf_path}: architecture {arch!r}: the reference implements llama and qwen2")
        m = g.metadata
        self.n_layers = int(m[f"{arch}.block_count"])
        self.n_embd = int(m[f"{arch}.embedding_length"])
        self.n_heads = int(m[f"{arch}.attention.head_count"])
        self.n_kv = int(m.get(f"{arch}.attention.head_count_kv", self.n_heads))
        self.head_dim = int(m.get(f"{arch}.attention.key_length", self.n_embd // self.n_heads))
        self.eps = float(m[f"{arch}.attention.layer_norm_rms_epsilon"])
        self.theta = float(m.get(f"{arch}.rope.freq_base", 10000.0))
        scaling = m.get(f"{arch}.rope.scaling.type", "none")
        if scaling not in ("none",) and float(m.get(f"{arch}.rope.scaling.factor", 1.0)) != 1.0:
            raise ValueError(f"{gguf_path}: rope scaling {scaling!r} is not implemented by the reference")
        self.embd = g.tensor("token_embd.weight")
        self.out_norm = g.tensor("output_norm.weight")
        self.lm_head = g.tensor("output.weight") if g.has("output.weight") else self.embd
        self.layers = []
        for i in range(self.n_layers):
            p = f"blk.{i}."
            wq, wk = g.tensor(p + "attn_q.weight"), g.tensor(p + "attn_k.weight")
            bq = g.tensor(p + "attn_q.bias") if g.has(p + "attn_q.bias") else None
            bk = g.tensor(p + "attn_k.bias") if g.has(p + "attn_k.bias") else None
            if arch == "llama":
                wq, wk = unpermute_rows(wq, self.n_heads), unpermute_rows(wk, self.n_kv)
                bq = None if bq is None else unpermute_rows(bq, self.n_heads)
                bk = None if bk is None else unpermute_rows(bk, self.n_kv)
            self.layers.append(dict(
                attn_norm=g.tensor(p + "attn_norm.weight"), wq=wq, wk=wk, wv=g.tensor(p + "attn_v.weight"),
                bq=bq, bk=bk, bv=g.tensor(p + "attn_v.bias") if g.has(p + "attn_v.bias") else None,
                wo=g.tensor(p + "attn_output.weight"), ffn_norm=g.tensor(p + "ffn_norm.weight"),
                gate=g.tensor(p + "ffn_gate.weight"), up=g.tensor(p + "ffn_up.weight"),
                down=g.tensor(p + "ffn_down.weight")))
        d = self.head_dim
        self.inv_freq = 1.0 / (self.theta ** (np.arange(0, d, 2, dtype=np.float64) / d))

    def _norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def _rope(self, x, positions):
        """HF apply_rotary_pos_emb: x * cos + rotate_half(x) * sin; x (heads, n, d)."""
        freqs = np.outer(positions.astype(np.float64), self.inv_freq)  # (n, d/2)
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb), np.sin(emb)
        half = x.shape[-1] // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rot * sin

    def forward(self, tokens, cache=None):
        """Evaluates `tokens` after the cached positions. cache: list of (K, V) per layer,
        each (1, n_kv, seq, d), or None. Returns (logits (n, vocab), new cache)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        past = 0 if cache is None else cache[0][0].shape[2]
        positions = np.arange(past, past + n)
        x = self.embd[tokens]
        d, group = self.head_dim, self.n_heads // self.n_kv
        new_cache = []
        mask = np.triu(np.full((n, past + n), -np.inf), k=past + 1)
        for li, L in enumerate(self.layers):
            h = self._norm(x, L["attn_norm"])
            q = h @ L["wq"].T + (0 if L["bq"] is None else L["bq"])
            k = h @ L["wk"].T + (0 if L["bk"] is None else L["bk"])
            v = h @ L["wv"].T + (0 if L["bv"] is None else L["bv"])
            q = self._rope(q.reshape(n, self.n_heads, d).transpose(1, 0, 2), positions)
            k = self._rope(k.reshape(n, self.n_kv, d).transpose(1, 0, 2), positions)
            v = v.reshape(n, self.n_kv, d).transpose(1, 0, 2)
            if cache is not None:
                k = np.concatenate([np.asarray(cache[li][0][0], dtype=np.float64), k], axis=1)
                v = np.concatenate([np.asarray(cache[li][1][0], dtype=np.float64), v], axis=1)
            new_cache.append((k[None], v[None]))
            kr, vr = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)  # repeat_kv
            scores = q @ kr.transpose(0, 2, 1) / np.sqrt(d) + mask
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            att = (scores / scores.sum(axis=-1, keepdims=True)) @ vr  # (heads, n, d)
            x = x + att.transpose(1, 0, 2).reshape(n, self.n_heads * d) @ L["wo"].T
            h = self._norm(x, L["ffn_norm"])
            g = h @ L["gate"].T
            x = x + ((g / (1.0 + np.exp(-g))) * (h @ L["up"].T)) @ L["down"].T
        return self._norm(x, self.out_norm) @ self.lm_head.T, new_cache
