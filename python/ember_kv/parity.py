"""The two-process parity gate, process 2 (seed 003's "live gate").

Process 1 (ember) exported a prefix to KVC1 and recorded the logits that uninterrupted
inference produced after evaluating the resume token. This process, an independent numpy
implementation of the Hugging Face forward semantics (ref_forward.py), rebuilds the cache from
the KVC1 file through the Hugging Face layout adapter (hf.py), evaluates the resume token at
absolute position P, and compares its logits with ember's. The gate passes when the next token
agrees and max |logit difference| <= the declared tolerance. It writes a receipt
(schemas/parity-receipt.schema.json) either way.

    python3 -m ember_kv.parity --kvc X.kvc --model M.gguf --native-logits L.f32 \\
        --tolerance 0.05 --receipt R.json [--assume-layout normal|neox]
Exit status: 0 pass, 1 fail, 2 bad input.
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

from . import hf
from .kvc1 import KVC1Error, read_kvc1
from .ref_forward import RefModel

# The declared tolerance for ember (f32 with f16 cache and f16 attention operands, as
# llama.cpp's CPU path) against an f64 reference: the bound the models README gives for any
# correct engine against llama.cpp on F32 files.
DEFAULT_TOLERANCE = 0.05


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def parity_receipt(st, arch, model_path, kvc_path, resume_token, resumed, native_logits, tolerance, key_layout,
                   implementation):
    """The ember.parity-receipt.v1 of one resume: `resumed` (the logits after the resume token
    in the rebuilt cache) against `native_logits` (uninterrupted inference), pass when the next
    token agrees and max |diff| <= tolerance. st is the KVC1 state the cache came from. Shared by
    this numpy gate and ember_kv.torch_gate."""
    resumed = np.asarray(resumed, dtype=np.float64).reshape(-1)
    native = np.asarray(native_logits, dtype=np.float64).reshape(-1)
    if native.shape != resumed.shape:
        raise ValueError(f"native logits: expected {resumed.shape[0]} values, found {native.shape[0]}")
    diff = float(np.abs(resumed - native).max())
    native_next, resumed_next = int(native.argmax()), int(resumed.argmax())
    ok = native_next == resumed_next and diff <= tolerance
    return {
        "format": "ember.parity-receipt.v1",
        "model": {"identity": st["model"]["identity"], "arch": arch, "path": model_path},
        "tokenizer_identity": st["tokenizer"]["identity"],
        "kvc1_sha256": sha256_file(kvc_path),
        "prefix": {"n_tokens": len(st["prefix"]["tokens"]), "sha256": st["prefix"]["sha256"]},
        "resume_token": resume_token,
        "key_layout": key_layout,
        "tolerance": tolerance,
        "max_abs_logit_diff": diff,
        "native_next_token": native_next,
        "resumed_next_token": resumed_next,
        "implementation": implementation,
        "result": "pass" if ok else "fail",
    }


def run_gate(kvc_path, model_path, native_logits, tolerance=DEFAULT_TOLERANCE, assume_layout=None):
    """Returns (receipt dict, resumed logits). Raises ValueError/KVC1Error on bad input."""
    kvc = read_kvc1(kvc_path)
    if kvc.artifact_kind != "native":
        raise ValueError(f"{kvc_path}: artifact.kind: expected native, found {kvc.artifact_kind}")
    st = kvc.state
    ref = RefModel(model_path)
    g = st["geometry"]
    if st["model"]["architecture"] != ref.arch:
        raise ValueError(f"{kvc_path}: model.architecture: expected {ref.arch} (the GGUF's), found {st['model']['architecture']}")
    if (g["layers"], g["kv_heads"], g["head_dim"]) != (ref.n_layers, ref.n_kv, ref.head_dim):
        raise ValueError(f"{kvc_path}: geometry: expected {(ref.n_layers, ref.n_kv, ref.head_dim)}, "
                         f"found {(g['layers'], g['kv_heads'], g['head_dim'])}")
    resume, position = st["resume"]["token"], st["resume"]["position"]
    if position != g["positions"]:
        raise ValueError(f"{kvc_path}: resume.position: expected {g['positions']}, found {position}")
    cache = hf.to_hf_layers(kvc, dtype=np.float64, assume_layout=assume_layout)
    logits, _ = ref.forward([resume], cache)
    resumed = logits[-1]
    receipt = parity_receipt(st, ref.arch, model_path, kvc_path, resume, resumed, native_logits, tolerance,
                             f"{assume_layout or st['rope']['layout']} -> hf-rotate-half",
                             "python/ember_kv/ref_forward.py (numpy f64, Hugging Face semantics)")
    return receipt, resumed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kvc", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--native-logits", required=True, help="f32 little-endian [n_vocab] from ember")
    ap.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE)
    ap.add_argument("--receipt", required=True)
    ap.add_argument("--assume-layout", choices=["normal", "neox"], help="negative tests only")
    a = ap.parse_args(argv)
    try:
        native = np.fromfile(a.native_logits, dtype="<f4")
        receipt, _ = run_gate(a.kvc, a.model, native, a.tolerance, a.assume_layout)
    except (KVC1Error, ValueError, OSError) as e:
        print(f"parity: {e}", file=sys.stderr)
        return 2
    tmp = a.receipt + ".tmp"
    with open(tmp, "w") as f:
        json.dump(receipt, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, a.receipt)
    print(f"parity: {receipt['result']}: next token {receipt['native_next_token']} vs {receipt['resumed_next_token']}, "
          f"max |logit diff| {receipt['max_abs_logit_diff']:.3g} (tolerance {a.tolerance})")
    return 0 if receipt["result"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
