"""The Hugging Face cache layout: per layer, K and V as [batch, kv_heads, seq, head_dim].

KVC1 stores keys post-RoPE in ember's order. For `rope.layout == "normal"` (GGUF `llama`
files: llama.cpp's converter permutes Hugging Face's Q/K weight rows so RoPE rotates adjacent
pairs (2i, 2i+1)), a Hugging Face llama model expects keys in rotate-half order, pairs
(i, i + d/2). Per head: HF[j] = ember[2j], HF[d/2 + j] = ember[2j + 1] for j < d/2. For
`rope.layout == "neox"` (qwen2, qwen3) both orders already agree. Values are never permuted.
"""
import numpy as np

from .kvc1 import DTYPE_CODES, Kvc1, manifest_seal, write_kvc1


def key_permutation(head_dim, rope_layout, to_hf=True):
    """Indices along head_dim taking ember's key order to Hugging Face's rotate-half order
    (to_hf) or back; None for neox (the two orders agree). One definition for numpy arrays and
    torch tensors: both gather with k[..., perm]."""
    if rope_layout == "neox":
        return None
    if rope_layout != "normal":
        raise ValueError(f"rope layout: expected normal|neox, found {rope_layout!r}")
    forward = np.concatenate([np.arange(0, head_dim, 2), np.arange(1, head_dim, 2)])
    return forward if to_hf else np.argsort(forward)


def ember_to_hf_keys(k, rope_layout):
    """Keys [..., head_dim] from ember's order to Hugging Face's rotate-half order."""
    perm = key_permutation(k.shape[-1], rope_layout, to_hf=True)
    return k if perm is None else k[..., perm]


def hf_to_ember_keys(k, rope_layout):
    """Inverse of ember_to_hf_keys."""
    perm = key_permutation(k.shape[-1], rope_layout, to_hf=False)
    return k if perm is None else k[..., perm]


def _to_float(a, dtype_name, out_dtype):
    if dtype_name == "bf16":  # uint16 bit patterns -> float32
        return (a.astype(np.uint32) << 16).view(np.float32).astype(out_dtype)
    return a.astype(out_dtype)


def to_hf_layers(kvc: Kvc1, dtype=np.float32, assume_layout=None):
    """[(K, V)] per layer, each [1, kv_heads, positions, head_dim] of `dtype`, keys in the order
    the Hugging Face model of this architecture expects (from state.rope.layout).
    assume_layout overrides the container's RoPE layout: only the parity gate's negative tests
    use it, to prove that a wrong key permutation fails the gate."""
    layout = assume_layout or kvc.state["rope"]["layout"]
    rep = kvc.state["representation"]
    if rep.get("keys") != "post-rope":
        raise ValueError(f"{kvc.path}: representation.keys: expected post-rope, found {rep.get('keys')!r}")
    out = []
    for i in range(kvc.state["geometry"]["layers"]):
        k, v = kvc.layer(i)
        k = _to_float(k, rep["dtype"], dtype)
        v = _to_float(v, rep["dtype"], dtype)
        k = ember_to_hf_keys(k, layout)
        out.append((k[None, ...], v[None, ...]))
    return out


def from_hf_layers(layers, state, path, artifact=None, force=False):
    """Writes a KVC1 file from Hugging Face layout arrays ([1, kv_heads, seq, head_dim] per
    layer) and a `state` object (the snapshot manifest fields: geometry, rope, representation,
    identities, prefix, resume). Keys are converted back to ember's order; arrays are cast to
    state.representation.dtype (f16 or f32)."""
    dtype = state["representation"]["dtype"]
    if dtype not in ("f16", "f32"):
        raise ValueError(f"representation.dtype: expected f16|f32 for writing from numpy, found {dtype!r}")
    np_dtype = np.float16 if dtype == "f16" else np.float32
    layers = list(layers)
    for k, v in layers:
        if k.ndim != 4 or k.shape[0] != 1 or v.shape != k.shape:
            raise ValueError(f"layer arrays: expected [1, kv_heads, seq, head_dim], found {k.shape} {v.shape}")
    layout = state["rope"]["layout"]

    class Converted:
        """Each tensor converted when the streaming writer asks for it (twice: hash and write
        pass), so the converted cache is never held whole."""

        def __len__(self):
            return 2 * len(layers)

        def __getitem__(self, i):
            k, v = layers[i // 2]
            if i % 2:
                return np.asarray(v[0]).astype(np_dtype)
            return hf_to_ember_keys(np.asarray(k[0]), layout).astype(np_dtype)

    tensors = Converted()
    if "seal" in state:
        # A full ember manifest: its seal must describe what is written (an edited state, or
        # payload hashes recomputed by the caller, would otherwise be refused by ember's reader).
        # An unsigned reseal only: a signature over the old seal cannot be carried over.
        state = {k: v for k, v in state.items() if k != "signature"}
        state["seal"] = manifest_seal(state)
    header = {"artifact": artifact or {"kind": "native"}, "format": "ember.kvc1", "state": state}
    assert dtype in DTYPE_CODES
    return write_kvc1(path, header, tensors, force=force)


def to_dynamic_cache(layers):
    """A transformers DynamicCache holding the layers (torch tensors). Requires torch and
    transformers; raises ImportError naming what is missing otherwise."""
    import torch  # noqa: F401  (optional dependency)
    from transformers import DynamicCache

    cache = DynamicCache()
    for i, (k, v) in enumerate(layers):
        cache.update(torch.from_numpy(np.ascontiguousarray(k)), torch.from_numpy(np.ascontiguousarray(v)), i)
    return cache
