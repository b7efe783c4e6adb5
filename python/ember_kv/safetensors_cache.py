"""KV caches as safetensors, in the layouts other runtimes write (docs/formats/safetensors-cache.md),
with the same checks as ember's C++ reader (src/kv/safetensors_cache.cpp). Arrays are in the
Hugging Face layout: per layer K and V [1, kv_heads, seq, head_dim], keys in rotate-half order
(mlx-lm and vLLM run Hugging Face weights); torch tensors are accepted and converted.

  mlx   one file: "{i}.0" keys, "{i}.1" values; metadata "0.{i}" = "", "1.<key>" = user
        metadata, "2.{i}" = "KVCache" (mlx-lm's save_prompt_cache of a list of KVCache)
  vllm  a directory: "model.layers.{i}.self_attn.attn.safetensors", each one tensor "kv_cache"
        [2, seq, kv_heads * head_dim] (vLLM's example KV connector)

Neither records the model or the prefix: a reader must be told both.
"""
import os
import tempfile

import numpy as np

from .safetensors import Safetensors, SafetensorsError, write_safetensors

_DT = {"F16": np.float16, "F32": np.float32}


def _np(a):
    if hasattr(a, "detach"):  # a torch tensor
        import torch
        t = a.detach().cpu()
        if t.dtype == torch.bfloat16:
            return "BF16", t.contiguous().view(torch.int16).numpy().view(np.uint16)
        a = t.numpy()
    a = np.ascontiguousarray(a)
    return {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32"}[a.dtype], a


def vllm_file(i):
    return f"model.layers.{i}.self_attn.attn.safetensors"


def write_mlx_cache(path, past, metadata=None, force=False):
    """past: ((K, V), ...) each [1, kv_heads, seq, head_dim] (numpy or torch, F16/BF16/F32)."""
    tensors, md = {}, {}
    for i, (k, v) in enumerate(past):
        tensors[f"{i}.0"], tensors[f"{i}.1"] = _np(k), _np(v)
        md[f"0.{i}"], md[f"2.{i}"] = "", "KVCache"
    for key, val in (metadata or {}).items():
        md[f"1.{key}"] = str(val)
    write_safetensors(path, tensors, md, force=force)


def write_vllm_cache(directory, past, force=False):
    if os.path.exists(directory) and not force:
        raise FileExistsError(f"{directory}: already exists; refusing to overwrite it (pass force=True)")
    parent = os.path.dirname(os.path.abspath(directory))
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(directory) + ".tmp-", dir=parent)
    for i, (k, v) in enumerate(past):
        (dk, k), (dv, v) = _np(k), _np(v)
        kv = np.stack([k[0].transpose(1, 0, 2).reshape(k.shape[2], -1), v[0].transpose(1, 0, 2).reshape(v.shape[2], -1)])
        write_safetensors(os.path.join(tmp, vllm_file(i)), {"kv_cache": (dk, kv)})
    if os.path.exists(directory):
        import shutil
        shutil.rmtree(directory)
    os.replace(tmp, directory)


def read_mlx_cache(path, layers):
    """The legacy tuple of numpy arrays (BF16 as uint16 bits) from an mlx-lm prompt cache."""
    st = Safetensors(path)
    want = {f"{i}.{kv}" for i in range(layers) for kv in (0, 1)}
    for n in st.names():
        if n not in want:
            raise SafetensorsError(path, f'tensor "{n}"', f'only "{{layer}}.0" / "{{layer}}.1" for layers 0..{layers - 1}',
                                   "an unexpected tensor")
    for i in range(layers):
        c = st.metadata.get(f"2.{i}")
        if c is not None and c != "KVCache":
            raise SafetensorsError(path, f"__metadata__.2.{i}", '"KVCache" (a plain mlx-lm cache)', c)
    out = []
    for i in range(layers):
        pair = []
        for kv in (0, 1):
            n = f"{i}.{kv}"
            if n not in st.entries:
                raise SafetensorsError(path, f'tensor "{n}"', "present", "none")
            if st.dtype(n) not in ("F16", "BF16", "F32"):
                raise SafetensorsError(path, f'tensor "{n}".dtype', "F16|BF16|F32", st.dtype(n))
            a = np.array(st.tensor(n))
            if a.ndim != 4 or a.shape[0] != 1:
                raise SafetensorsError(path, f'tensor "{n}".shape', "[1, kv_heads, positions, head_dim]", list(a.shape))
            pair.append(a)
        out.append(tuple(pair))
    return tuple(out)
