"""Seed 003's two-process gate with PyTorch (docs/hf.md).

Same-engine gate (the torch reference on both sides, declared tolerance 5e-5):
  process 1  `export`: runs the torch reference (ember_kv.torch_ref) on the prompt, takes the
             greedy resume token from the boundary logits, records the logits that
             *uninterrupted* inference (one forward over prompt + resume token, no cache
             reuse) gives after the resume token, and writes the prompt's cache to KVC1 with
             the Python writer (streaming, keys in ember's order).
  process 2  `resume`: rebuilds the cache from the KVC1 file (ember_kv.torch_cache, the HF
             legacy tuple), evaluates the resume token at absolute position P, and compares:
             pass = same next token and max |logit diff| <= tolerance. Writes a receipt
             (schemas/parity-receipt.schema.json) either way.
Cross-engine gate: `native` gives torch's own uninterrupted logits for the prefix and resume
token of any KVC1 file (ember's `kv export` + `kvc pack`); `resume` on ember's file against
them measures ember's cache in torch (f16 cache vs torch's f32: declared bound 0.05, the F32
bound of ../shared/models/README.md; measured values in docs/hf.md).

    python3 -m ember_kv.torch_gate export --model M.gguf|HF_DIR --prompt-ids 1,2,3 --kvc X.kvc \\
        --native-logits L.f32 [--cache-dtype f32|f16] [--model-identity HEX --tokenizer-identity HEX]
    python3 -m ember_kv.torch_gate native --model M --kvc X.kvc --output L.f32
    python3 -m ember_kv.torch_gate resume --model M --kvc X.kvc --native-logits L.f32 --receipt R.json \\
        [--tolerance 5e-5] [--assume-layout normal|neox] [--position-shift K]
    python3 -m ember_kv.torch_gate safetensors --kvc X.kvc --output C.safetensors [--force]
`export`'s KVC1 holds torch's cache, not an ember state: ember refuses it as one and names
`safetensors`, which writes the cache in the mlx layout and prints the `ember kv
import-safetensors ... --engine torch` line that makes it a foreign state (model-checked).
Exit status: 0 pass, 1 fail, 2 bad input. --assume-layout and --position-shift exist for the
negative tests only (a wrong key permutation or a shifted position must fail the gate).
"""
import argparse
import hashlib
import json
import os
import shlex
import sys

import numpy as np
import torch

from . import safetensors_cache, torch_cache
from .kvc1 import KVC1Error, read_kvc1
from .parity import parity_receipt
from .safetensors import SafetensorsError
from .torch_ref import TorchRef

SAME_ENGINE_TOLERANCE = 5e-5
CROSS_ENGINE_TOLERANCE = 0.05
_CACHE = {"f32": None, "f16": torch.float16, "bf16": torch.bfloat16}


def load(model, cache_dtype=None):
    if os.path.isdir(model):
        return TorchRef.from_checkpoint(model, cache_dtype=cache_dtype)
    return TorchRef.from_gguf(model, cache_dtype=cache_dtype)


def file_identity(model):
    """SHA-256 of the model's bytes (a GGUF, or config.json then *.safetensors in name order):
    a stand-in when ember's identity is not given; not ember's identity hash."""
    h = hashlib.sha256()
    paths = [model] if not os.path.isdir(model) else [os.path.join(model, n) for n in sorted(os.listdir(model))
                                                        if n == "config.json" or n.endswith(".safetensors")]
    for p in paths:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def uninterrupted(ref, prefix, resume):
    """Logits after the resume token from one forward over prefix + resume (no cache reuse)."""
    logits, _ = ref.forward(list(prefix) + [resume])
    return logits[-1].numpy()


def export(model, prompt_ids, kvc_path, native_path, cache_dtype="f32", model_identity=None,
           tokenizer_identity=None, force=False):
    ref = load(model, _CACHE[cache_dtype])
    boundary, past = ref.forward(prompt_ids)
    resume = int(boundary[-1].argmax())
    native = uninterrupted(ref, prompt_ids, resume)
    n = len(prompt_ids)
    ident = model_identity or file_identity(model)
    state = {
        "model": {"identity": ident, "architecture": ref.arch, "vocab_size": int(boundary.shape[1]),
                  "embedding_size": int(ref.config["hidden_size"]), "query_heads": ref.n_heads},
        "tokenizer": {"identity": tokenizer_identity or ident},
        "geometry": {"layers": ref.n_layers, "kv_heads": ref.n_kv, "head_dim": ref.head_dim, "positions": n},
        "rope": {"layout": "normal" if ref.arch == "llama" else "neox", "theta": ref.theta},
        "representation": {"dtype": cache_dtype, "byte_order": "little-endian",
                           "layout": "layer,kv_head,position,dim", "keys": "post-rope", "values": "projected"},
        "numerics": {"contract": "torch-ref", "engine_fingerprint": f"ember_kv.torch_ref;torch={torch.__version__};"
                     f"activations=f32;kv={cache_dtype}"},
        "prefix": {"count": n, "sha256": hashlib.sha256(np.asarray(prompt_ids, "<i4").tobytes()).hexdigest(),
                   "tokens": [int(t) for t in prompt_ids]},
        "resume": {"token": resume, "position": n, "selection": "greedy-argmax"},
    }
    torch_cache.from_legacy_cache(past, state, kvc_path, force=force)
    np.asarray(native, "<f4").tofile(native_path)
    return resume, native


def resume(model, kvc_path, native_logits, tolerance=SAME_ENGINE_TOLERANCE, assume_layout=None, position_shift=0):
    """Returns (receipt, resumed logits)."""
    kvc = read_kvc1(kvc_path)
    if kvc.artifact_kind != "native":
        raise ValueError(f"{kvc_path}: artifact.kind: expected native, found {kvc.artifact_kind}")
    st = kvc.state
    dtype = st["representation"]["dtype"]
    ref = load(model, _CACHE[dtype])
    g = st["geometry"]
    if st["model"]["architecture"] != ref.arch:
        raise ValueError(f"{kvc_path}: model.architecture: expected {ref.arch} (the model's), found {st['model']['architecture']}")
    if (g["layers"], g["kv_heads"], g["head_dim"]) != (ref.n_layers, ref.n_kv, ref.head_dim):
        raise ValueError(f"{kvc_path}: geometry: expected {(ref.n_layers, ref.n_kv, ref.head_dim)}, "
                         f"found {(g['layers'], g['kv_heads'], g['head_dim'])}")
    token, position = st["resume"]["token"], st["resume"]["position"]
    if position != g["positions"]:
        raise ValueError(f"{kvc_path}: resume.position: expected {g['positions']}, found {position}")
    past = torch_cache.to_legacy_cache(kvc, assume_layout=assume_layout)
    logits, _ = ref.forward([token], past, position_offset=position + position_shift)
    resumed = logits[-1].numpy().astype(np.float64)
    receipt = parity_receipt(
        st, ref.arch, model, kvc_path, token, resumed, native_logits, tolerance,
        f"{assume_layout or st['rope']['layout']} -> hf-rotate-half"
        + (f"; position shifted by {position_shift}" if position_shift else ""),
        f"python/ember_kv/torch_ref.py (PyTorch {torch.__version__}, f32, Hugging Face semantics), "
        f"cache {dtype} via ember_kv.torch_cache")
    return receipt, resumed


def to_safetensors(kvc_path, output, force=False):
    """Writes a KVC1 file's cache as mlx-layout safetensors (keys in Hugging Face order, the
    file's dtype), the form in which ember takes another engine's K/V. Returns the `ember kv
    import-safetensors` command that brings it in (M.gguf: the model torch ran)."""
    kvc = read_kvc1(kvc_path)
    safetensors_cache.write_mlx_cache(output, torch_cache.to_legacy_cache(kvc), force=force)
    ids = ",".join(str(int(t)) for t in kvc.state["prefix"]["tokens"])
    return (f"ember kv import-safetensors {shlex.quote(output)} --model M.gguf --prompt-ids {ids} --engine torch "
            f"-o STATE_DIR")


def _ids(text):
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--prompt-ids: expected comma-separated integers, found {text!r}") from None
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError("--prompt-ids: expected at least one non-negative id")
    return ids


def _write_json(path, value):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m ember_kv.torch_gate", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="process 1: torch prefill, uninterrupted logits, KVC1")
    e.add_argument("--model", required=True)
    e.add_argument("--prompt-ids", required=True, type=_ids)
    e.add_argument("--kvc", required=True)
    e.add_argument("--native-logits", required=True)
    e.add_argument("--cache-dtype", choices=list(_CACHE), default="f32")
    e.add_argument("--model-identity")
    e.add_argument("--tokenizer-identity")
    e.add_argument("--force", action="store_true")
    n = sub.add_parser("native", help="torch's uninterrupted logits for a KVC1 file's prefix and resume token")
    n.add_argument("--model", required=True)
    n.add_argument("--kvc", required=True)
    n.add_argument("--output", required=True)
    r = sub.add_parser("resume", help="process 2: rebuild from KVC1, resume, compare, receipt")
    r.add_argument("--model", required=True)
    r.add_argument("--kvc", required=True)
    r.add_argument("--native-logits", required=True)
    r.add_argument("--receipt", required=True)
    r.add_argument("--tolerance", type=float, default=SAME_ENGINE_TOLERANCE)
    r.add_argument("--assume-layout", choices=["normal", "neox"], help="negative tests only")
    r.add_argument("--position-shift", type=int, default=0, help="negative tests only")
    t = sub.add_parser("safetensors", help="a KVC1 file's cache as mlx-layout safetensors, for ember kv import-safetensors")
    t.add_argument("--kvc", required=True)
    t.add_argument("--output", required=True)
    t.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "export":
            token, _ = export(a.model, a.prompt_ids, a.kvc, a.native_logits, a.cache_dtype, a.model_identity,
                              a.tokenizer_identity, a.force)
            print(f"torch_gate: wrote {a.kvc} ({len(a.prompt_ids)} positions, resume token {token}) and {a.native_logits}")
            return 0
        if a.cmd == "safetensors":
            command = to_safetensors(a.kvc, a.output, a.force)
            print(f"torch_gate: wrote {a.output} (mlx layout); bring it into ember with:\n{command}")
            return 0
        if a.cmd == "native":
            st = read_kvc1(a.kvc).state
            ref = load(a.model, None)
            np.asarray(uninterrupted(ref, st["prefix"]["tokens"], st["resume"]["token"]), "<f4").tofile(a.output)
            return 0
        native = np.fromfile(a.native_logits, dtype="<f4")
        receipt, _ = resume(a.model, a.kvc, native, a.tolerance, a.assume_layout, a.position_shift)
    except (KVC1Error, SafetensorsError, ValueError, KeyError, OSError) as ex:  # FileExistsError is an OSError
        print(f"torch_gate: {ex}", file=sys.stderr)
        return 2
    _write_json(a.receipt, receipt)
    print(f"torch_gate: {receipt['result']}: next token {receipt['native_next_token']} vs {receipt['resumed_next_token']}, "
          f"max |logit diff| {receipt['max_abs_logit_diff']:.3g} (tolerance {a.tolerance:g})")
    return 0 if receipt["result"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
