"""A small pure-PyTorch forward pass with Hugging Face semantics for llama, qwen2 and qwen3
(transformers' LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM, eager attention,
batch 1), written here as the stand-in for transformers on machines without it. It shares no
code with ember's engine; it takes a legacy past_key_values tuple and continues from it.

Weights come from an HF-layout checkpoint (config.json + *.safetensors, names as
transformers writes them) or from a GGUF (F32/F16/Q8_0 through ember_kv.gguf), whose llama
Q/K rows are un-permuted back to Hugging Face's rotate-half layout (the inverse of
llama.cpp's convert_hf_to_gguf.py permutation). `save_checkpoint` writes the HF layout, so
this module is also the "torch-written checkpoint" that `ember model import-hf` is tested on.

Semantics, as transformers (4.4x) computes them in float32:
  RMSNorm      x * rsqrt(mean(x^2) + eps) * w  (in f32)
  RoPE         inv_freq = 1 / theta^(arange(0, d, 2) / d); emb = cat(freqs, freqs);
               q * cos + rotate_half(q) * sin, rotate_half(x) = cat(-x[d/2:], x[:d/2])
  qwen3        per-head RMSNorm of q and k (q_norm, k_norm) before RoPE
  qwen2        biases on q, k, v (not o)
  attention    softmax(q k^T * d^-0.5 + causal mask) v, GQA by repeat_kv
  MLP          down(silu(gate(x)) * up(x))

Shapes: x (n, hidden); q (heads, n, d); cache K/V (1, kv_heads, seq, d) per layer.
`cache_dtype=torch.float16` rounds K and V to f16 as they enter the cache (and uses the
rounded values for the current tokens too, as ember and llama.cpp do), so a cache exported
as f16 holds exactly what the engine attends over.
"""
import glob
import json
import os

import numpy as np
import torch

from .safetensors import Safetensors, write_safetensors

ARCHES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def unpermute_rows(w, n_head):
    """GGUF llama Q/K rows (per head: dims 2j, 2j+1 adjacent) -> HF rows (j, d/2 + j)."""
    d = w.shape[0] // n_head
    return w.reshape(n_head, d // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def config_from_gguf(m):
    arch = m["general.architecture"]
    if arch not in ARCHES:
        raise ValueError(f"general.architecture: expected llama|qwen2|qwen3, found {arch!r}")
    heads = int(m[f"{arch}.attention.head_count"])
    hidden = int(m[f"{arch}.embedding_length"])
    scaling = m.get(f"{arch}.rope.scaling.type", "none")
    if scaling != "none" and float(m.get(f"{arch}.rope.scaling.factor", 1.0)) != 1.0:
        raise ValueError(f"rope scaling {scaling!r} is not implemented by the reference")
    return {
        "model_type": arch, "architectures": [ARCHES[arch]],
        "hidden_size": hidden, "num_hidden_layers": int(m[f"{arch}.block_count"]),
        "num_attention_heads": heads,
        "num_key_value_heads": int(m.get(f"{arch}.attention.head_count_kv", heads)),
        "head_dim": int(m.get(f"{arch}.attention.key_length", hidden // heads)),
        "intermediate_size": int(m[f"{arch}.feed_forward_length"]),
        "rms_norm_eps": float(m[f"{arch}.attention.layer_norm_rms_epsilon"]),
        "rope_theta": float(m.get(f"{arch}.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(m.get(f"{arch}.context_length", 2048)),
    }


_GGUF_LAYER = {"attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
               "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
               "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
               "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
               "attn_v.bias": "self_attn.v_proj.bias", "attn_q_norm.weight": "self_attn.q_norm.weight",
               "attn_k_norm.weight": "self_attn.k_norm.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
               "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight"}


class TorchRef:
    def __init__(self, config, weights, dtype=torch.float32, cache_dtype=None):
        """config: an HF config.json dict; weights: {HF name: tensor} (cast to dtype)."""
        c = self.config = dict(config)
        self.arch = c.get("model_type")
        if self.arch not in ARCHES:
            raise ValueError(f"config.json: model_type: expected llama|qwen2|qwen3, found {self.arch!r}")
        self.dtype, self.cache_dtype = dtype, cache_dtype
        self.n_layers = int(c["num_hidden_layers"])
        self.n_heads = int(c["num_attention_heads"])
        self.n_kv = int(c.get("num_key_value_heads") or self.n_heads)
        self.head_dim = int(c.get("head_dim") or c["hidden_size"] // self.n_heads)
        self.eps = float(c["rms_norm_eps"])
        self.theta = float(c.get("rope_theta", 10000.0))
        if c.get("rope_scaling") not in (None, {}) and c["rope_scaling"].get("factor", 1.0) != 1.0:
            raise ValueError("config.json: rope_scaling: the reference implements none")
        self.w = {k: torch.as_tensor(v).to(dtype) for k, v in weights.items()}
        self.tied = "lm_head.weight" not in self.w
        self.config["tie_word_embeddings"] = self.tied
        d = self.head_dim
        self.inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))

    # --- loading and saving ---------------------------------------------------------------
    @classmethod
    def from_gguf(cls, path, **kw):
        from .gguf import Gguf

        g = Gguf(path)
        config = config_from_gguf(g.metadata)
        arch = config["model_type"]
        w = {"model.embed_tokens.weight": g.tensor("token_embd.weight"), "model.norm.weight": g.tensor("output_norm.weight")}
        if g.has("output.weight"):
            w["lm_head.weight"] = g.tensor("output.weight")
        config["vocab_size"] = int(w["model.embed_tokens.weight"].shape[0])
        config["attention_bias"] = g.has("blk.0.attn_q.bias")
        for i in range(config["num_hidden_layers"]):
            for gname, hname in _GGUF_LAYER.items():
                if not g.has(f"blk.{i}.{gname}"):
                    continue
                t = g.tensor(f"blk.{i}.{gname}")
                if arch == "llama" and gname.startswith("attn_q."):
                    t = unpermute_rows(t, config["num_attention_heads"])
                elif arch == "llama" and gname.startswith("attn_k."):
                    t = unpermute_rows(t, config["num_key_value_heads"])
                w[f"model.layers.{i}.{hname}"] = t
        return cls(config, {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in w.items()}, **kw)

    @classmethod
    def from_checkpoint(cls, directory, **kw):
        with open(os.path.join(directory, "config.json")) as f:
            config = json.load(f)
        w = {}
        files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
        if not files:
            raise ValueError(f"{directory}: no *.safetensors file")
        for p in files:
            st = Safetensors(p)
            for n in st.names():
                a = np.array(st.tensor(n))
                if st.dtype(n) == "BF16":
                    a = (a.astype(np.uint32) << 16).view(np.float32)
                w[n] = torch.from_numpy(a)
        if config.get("tie_word_embeddings", False):
            w.pop("lm_head.weight", None)
        return cls(config, w, **kw)

    def save_checkpoint(self, directory, dtype="F32"):
        """config.json + model.safetensors in the HF layout, weights as F32, F16 or BF16."""
        os.makedirs(directory, exist_ok=True)
        tensors = {}
        for n, t in self.w.items():
            if dtype == "BF16":
                tensors[n] = ("BF16", t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16))
            else:
                tensors[n] = (dtype, t.to(torch.float16 if dtype == "F16" else torch.float32).numpy())
        write_safetensors(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"}, force=True)
        c = dict(self.config, torch_dtype={"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype])
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)

    # --- forward ------------------------------------------------------------------------
    def _norm(self, x, w):
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * x32.to(self.dtype)

    def _rope(self, x, cos, sin):
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin

    def _to_cache(self, t):
        return t if self.cache_dtype is None else t.to(self.cache_dtype)

    @torch.no_grad()
    def forward(self, input_ids, past_key_values=None, position_offset=None):
        """Evaluates input_ids after the cached positions (at absolute positions from
        position_offset, default the cache length). Returns (logits (n, vocab) f32, the new
        legacy past_key_values tuple: ((K, V), ...) each (1, kv_heads, past + n, d), of
        cache_dtype when set)."""
        ids = torch.as_tensor(input_ids, dtype=torch.long).reshape(-1)
        n = ids.shape[0]
        past = 0 if past_key_values is None else int(past_key_values[0][0].shape[2])
        start = past if position_offset is None else int(position_offset)
        pos = torch.arange(start, start + n, dtype=torch.float32)
        freqs = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(self.dtype), emb.sin().to(self.dtype)
        mask = torch.full((n, past + n), float("-inf"), dtype=self.dtype).triu(past + 1)
        x = self.w["model.embed_tokens.weight"][ids]
        d, group, out = self.head_dim, self.n_heads // self.n_kv, []
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            w = lambda name: self.w.get(p + name)  # noqa: E731
            h = self._norm(x, w("input_layernorm.weight"))

            def proj(name, heads):
                y = h @ w(f"self_attn.{name}_proj.weight").T
                b = w(f"self_attn.{name}_proj.bias")
                y = y if b is None else y + b
                return y.reshape(n, heads, d).transpose(0, 1)
            q, k, v = proj("q", self.n_heads), proj("k", self.n_kv), proj("v", self.n_kv)
            if w("self_attn.q_norm.weight") is not None:  # qwen3
                q, k = self._norm(q, w("self_attn.q_norm.weight")), self._norm(k, w("self_attn.k_norm.weight"))
            q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
            k, v = self._to_cache(k), self._to_cache(v)
            if past_key_values is not None:
                k = torch.cat([past_key_values[i][0][0].to(k.dtype), k], dim=1)
                v = torch.cat([past_key_values[i][1][0].to(v.dtype), v], dim=1)
            out.append((k[None], v[None]))
            kr = k.to(self.dtype).repeat_interleave(group, dim=0)
            vr = v.to(self.dtype).repeat_interleave(group, dim=0)
            scores = (q @ kr.transpose(1, 2)) * (d ** -0.5) + mask
            att = torch.softmax(scores.to(torch.float32), dim=-1).to(self.dtype) @ vr
            x = x + att.transpose(0, 1).reshape(n, self.n_heads * d) @ w("self_attn.o_proj.weight").T
            h = self._norm(x, w("post_attention_layernorm.weight"))
            x = x + (torch.nn.functional.silu(h @ w("mlp.gate_proj.weight").T) * (h @ w("mlp.up_proj.weight").T)) \
                @ w("mlp.down_proj.weight").T
        head = self.w["model.embed_tokens.weight"] if self.tied else self.w["lm_head.weight"]
        logits = self._norm(x, self.w["model.norm.weight"]) @ head.T
        return logits.to(torch.float32), tuple(out)
