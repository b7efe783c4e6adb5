"""KVC1 <-> PyTorch tensors in the Hugging Face cache layout.

Per layer, K and V are torch tensors [batch=1, kv_heads, seq, head_dim], the layout of
transformers' `DynamicCache` and of the legacy `past_key_values` tuple
`((k0, v0), (k1, v1), ...)` that `DynamicCache.from_legacy_cache` takes.

dtype-exact: by default a tensor keeps the container's element type, bit for bit (f16 ->
torch.float16, bf16 -> torch.bfloat16 from the stored bit patterns, f32 -> torch.float32);
`dtype=torch.float32` (or float64) widens exactly. Writing back, tensors already in the
container's type are written without any arithmetic, so KVC1 -> torch -> KVC1 is byte-identical.

Keys: KVC1 stores post-RoPE keys in ember's order; for `rope.layout == "normal"` (GGUF llama)
a Hugging Face llama model expects rotate-half order, so each key head is permuted exactly as
hf.py does (HF[j] = ember[2j], HF[d/2 + j] = ember[2j + 1]); `neox` (qwen2, qwen3) is
already in Hugging Face order. Values are never permuted. The permutation is pure indexing:
no bit of any element changes.
"""
import numpy as np
import torch

from .hf import key_permutation
from .kvc1 import DTYPE_CODES, Kvc1, manifest_seal, read_kvc1, write_kvc1

_TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
_NUMPY = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32}


def ember_to_hf_keys(k, rope_layout):
    """Keys [..., head_dim] (torch) from ember's order to Hugging Face's rotate-half order
    (the permutation of hf.key_permutation, gathered in torch)."""
    perm = key_permutation(k.shape[-1], rope_layout, to_hf=True)
    return k if perm is None else k[..., torch.as_tensor(perm)]


def hf_to_ember_keys(k, rope_layout):
    """Inverse of ember_to_hf_keys."""
    perm = key_permutation(k.shape[-1], rope_layout, to_hf=False)
    return k if perm is None else k[..., torch.as_tensor(perm)]


def _tensor(a, dtype_name):
    """A torch tensor sharing nothing with the (read-only) mapping, the container's bits."""
    a = np.array(a, copy=True)
    if dtype_name == "bf16":  # torch has no uint16: reinterpret the bits through int16
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def to_legacy_cache(kvc, dtype=None, assume_layout=None, device="cpu"):
    """The legacy past_key_values tuple ((K, V), ...) of a KVC1 file (a path or a Kvc1): each
    [1, kv_heads, positions, head_dim], keys in Hugging Face order. dtype None keeps the
    container's element type bit for bit; a torch dtype converts (exactly, for widening).
    assume_layout overrides state.rope.layout: only negative tests use it."""
    if not isinstance(kvc, Kvc1):
        kvc = read_kvc1(kvc)
    st = kvc.state
    layout = assume_layout or st["rope"]["layout"]
    rep = st["representation"]
    if rep.get("keys") != "post-rope":
        raise ValueError(f"{kvc.path}: representation.keys: expected post-rope, found {rep.get('keys')!r}")
    out = []
    for i in range(st["geometry"]["layers"]):
        k, v = (_tensor(a, rep["dtype"]) for a in kvc.layer(i))
        if dtype is not None:
            k, v = k.to(dtype), v.to(dtype)
        k = ember_to_hf_keys(k, layout).contiguous()
        out.append((k[None].to(device), v[None].to(device)))
    return tuple(out)


def _numpy_of(t, dtype_name):
    """torch tensor -> numpy array of the container's element type (bf16 as uint16 bits).
    A tensor already of that type is reinterpreted, not converted."""
    t = t.detach().to("cpu").to(_TORCH[dtype_name]).contiguous()
    if dtype_name == "bf16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def from_legacy_cache(past, state, path, artifact=None, force=False):
    """Writes a KVC1 file from a legacy past_key_values tuple (or a DynamicCache) and a
    `state` (the snapshot manifest fields: geometry, rope, representation, and whatever
    identity, prefix and resume fields the producer has). Keys go back to ember's order;
    tensors are cast to state.representation.dtype (f16, bf16 or f32: a tensor already of that
    type is written bit for bit). Streams: each layer's K and V is converted only when the
    writer asks for it (twice: once to hash, once to write), never the whole cache at once.
    Returns the trailer (32 bytes)."""
    past = legacy_of(past)
    dtype = state["representation"]["dtype"]
    if dtype not in _TORCH:
        raise ValueError(f"representation.dtype: expected f16|bf16|f32, found {dtype!r}")
    layout = state["rope"]["layout"]
    g = state["geometry"]
    want = (1, g["kv_heads"], g["positions"], g["head_dim"])
    if len(past) != g["layers"]:
        raise ValueError(f"past_key_values: expected {g['layers']} layers (state.geometry.layers), found {len(past)}")
    for i, (k, v) in enumerate(past):
        if tuple(k.shape) != want or tuple(v.shape) != want:
            raise ValueError(f"past_key_values[{i}]: expected {list(want)} [batch, kv_heads, seq, head_dim], "
                             f"found K {list(k.shape)} V {list(v.shape)}")

    def key(i):
        return lambda: _numpy_of(hf_to_ember_keys(past[i][0][0], layout), dtype)

    def value(i):
        return lambda: _numpy_of(past[i][1][0], dtype)

    tensors = []
    for i in range(len(past)):
        tensors += [key(i), value(i)]
    if "seal" in state:
        # A full ember manifest: reseal so ember's reader accepts what is written (unsigned:
        # a signature over the old seal cannot be carried over). See hf.from_hf_layers.
        state = {k: v for k, v in state.items() if k != "signature"}
        state["seal"] = manifest_seal(state)
    header = {"artifact": artifact or {"kind": "native"}, "format": "ember.kvc1", "state": state}
    assert dtype in DTYPE_CODES
    return write_kvc1(path, header, tensors, force=force)


def legacy_of(cache):
    """A legacy tuple from a legacy tuple/list or a transformers DynamicCache (either its
    to_legacy_cache() or, in newer versions, its per-layer keys/values)."""
    if isinstance(cache, (tuple, list)):
        return tuple((k, v) for k, v in cache)
    if hasattr(cache, "to_legacy_cache"):
        return tuple((k, v) for k, v in cache.to_legacy_cache())
    if hasattr(cache, "layers"):
        return tuple((layer.keys, layer.values) for layer in cache.layers)
    raise TypeError(f"past_key_values: expected a tuple of (K, V) or a DynamicCache, found {type(cache).__name__}")


def to_dynamic_cache(kvc, dtype=None, assume_layout=None, device="cpu"):
    """A transformers DynamicCache of a KVC1 file. Requires transformers; raises ImportError
    otherwise (the legacy tuple from to_legacy_cache needs only torch)."""
    from transformers import DynamicCache

    past = kvc if isinstance(kvc, tuple) else to_legacy_cache(kvc, dtype, assume_layout, device)
    if hasattr(DynamicCache, "from_legacy_cache"):
        return DynamicCache.from_legacy_cache(past)
    cache = DynamicCache()
    for i, (k, v) in enumerate(past):
        cache.update(k, v, i)
    return cache


def numpy_dtype(dtype_name):
    return _NUMPY[dtype_name]
