#!/usr/bin/env python3
"""The Hugging Face transformers check, for a machine that has transformers (and torch).

Not run in CI or on the development machines (Debian 12 packages torch but not transformers);
docs/hf.md says so. It checks, against transformers itself, what the torch stand-in
(ember_kv.torch_ref) checks elsewhere:

  1. builds a small random Qwen2ForCausalLM (seeded), saves it (config.json + safetensors);
  2. ember_kv.torch_ref on that checkpoint vs transformers: the stand-in's semantics (<= 1e-4);
  3. `ember model import-hf` -> GGUF; ember's logits vs transformers' (F32 bound 0.05, same argmax);
  4. cross engine: `ember kv export` + `kvc pack` -> KVC1 -> ember_kv.torch_cache ->
     DynamicCache -> transformers resumes the resume token at position P; vs transformers'
     uninterrupted run over prefix + resume token: same next token, max |diff| <= 0.05;
  5. same engine, two processes: transformers' own cache -> KVC1 (Python writer, f32) in this
     process; a second process rebuilds a DynamicCache from the file and resumes; vs the
     uninterrupted run: same next token, max |diff| <= 5e-5.
Writes OUT/receipt.json (every figure) and exits 0 when every check passes, 1 otherwise.

    PYTHONPATH=python python3 scripts/hf-transformers-check.py --ember build/ember --out /tmp/hfcheck
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from ember_kv import torch_cache  # noqa: E402
from ember_kv.tiny_tokenizer import gpt2_tokenizer_json  # noqa: E402
from ember_kv.torch_ref import TorchRef  # noqa: E402

PREFIX = [1, 17, 93, 201, 44, 5, 250, 120, 33, 77, 9, 64]


def ember(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True)
    out = p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        raise SystemExit(f"ember {' '.join(args)} failed ({p.returncode}):\n{out}")
    return out


def build_model(directory, seed):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rope_theta=1e6,
                      rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():  # larger than the default init, so that logits are not all near 0
        for p in model.parameters():
            if p.dim() >= 1:
                p.normal_(0.0, 0.08)
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
    model.save_pretrained(directory, safe_serialization=True)
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:  # kv export needs a tokenizer
        json.dump(gpt2_tokenizer_json(300), f)
    return model


@torch.no_grad()
def hf_logits(model, ids, past=None):
    out = model(input_ids=torch.tensor([ids]), past_key_values=past, use_cache=True)
    return out.logits[0].float().numpy(), out.past_key_values


def state_for(model_identity, n, resume, cfg):
    return {
        "model": {"identity": model_identity, "architecture": "qwen2", "vocab_size": cfg.vocab_size,
                  "embedding_size": cfg.hidden_size, "query_heads": cfg.num_attention_heads},
        "tokenizer": {"identity": model_identity},
        "geometry": {"layers": cfg.num_hidden_layers, "kv_heads": cfg.num_key_value_heads,
                     "head_dim": cfg.hidden_size // cfg.num_attention_heads, "positions": n},
        "rope": {"layout": "neox", "theta": cfg.rope_theta},
        "representation": {"dtype": "f32", "byte_order": "little-endian", "layout": "layer,kv_head,position,dim",
                           "keys": "post-rope", "values": "projected"},
        "numerics": {"contract": "transformers", "engine_fingerprint": "transformers;f32"},
        "prefix": {"count": n, "sha256": hashlib.sha256(np.asarray(PREFIX, "<i4").tobytes()).hexdigest(),
                   "tokens": PREFIX},
        "resume": {"token": resume, "position": n, "selection": "greedy-argmax"},
    }


def resume_process(hf_dir, kvc, native, out):
    """Process 2 of the same-engine gate: only the checkpoint and the KVC1 file."""
    from transformers import AutoModelForCausalLM

    from ember_kv.kvc1 import read_kvc1

    model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    f = read_kvc1(kvc)
    cache = torch_cache.to_dynamic_cache(f)
    logits, _ = hf_logits(model, [f.state["resume"]["token"]], cache)
    resumed = logits[-1].astype(np.float64)
    ref = np.fromfile(native, dtype="<f4").astype(np.float64)
    with open(out, "w") as f:
        json.dump({"max_abs_logit_diff": float(np.abs(resumed - ref).max()),
                   "native_next": int(ref.argmax()), "resumed_next": int(resumed.argmax())}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ember", required=True, help="the ember binary")
    ap.add_argument("--out", required=True, help="work directory (created)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--resume-process", nargs=4, metavar=("HF_DIR", "KVC", "NATIVE", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.resume_process:
        resume_process(*a.resume_process)
        return 0
    import transformers

    os.makedirs(a.out, exist_ok=True)
    hf_dir, gguf = os.path.join(a.out, "qwen2-hf"), os.path.join(a.out, "qwen2.gguf")
    model = build_model(hf_dir, a.seed)
    cfg = model.config
    r = {"transformers": transformers.__version__, "torch": torch.__version__, "checks": {}}

    # 2. the stand-in against transformers
    want, _ = hf_logits(model, PREFIX)
    mine, _ = TorchRef.from_checkpoint(hf_dir).forward(PREFIX)
    r["checks"]["torch_ref_vs_transformers"] = d2 = float(np.abs(mine.numpy() - want).max())

    # 3. import-hf and ember's logits (teacher forcing over ember's greedy continuation)
    ember(a.ember, "model", "import-hf", hf_dir, "--output", gguf, "--force")
    dump = os.path.join(a.out, "ember.f32")
    ember(a.ember, "run", "--model", gguf, "--prompt-ids", ",".join(map(str, PREFIX)), "-n", "4", "--ignore-eos",
          "--quiet", "--threads", "1", "--dump-logits", dump, "--force")
    e_logits = np.fromfile(dump, dtype="<f4").reshape(4, -1)
    toks = np.fromfile(dump + ".tokens", dtype="<i4")
    t_logits, _ = hf_logits(model, [int(t) for t in toks[:-1]])
    t_logits = t_logits[len(PREFIX) - 1:]
    r["checks"]["ember_vs_transformers"] = d3 = float(np.abs(e_logits - t_logits).max())
    same_argmax = bool((e_logits.argmax(1) == t_logits.argmax(1)).all())

    # 4. cross engine: ember's KVC1 -> DynamicCache -> transformers resume
    snap, kvc = os.path.join(a.out, "snap"), os.path.join(a.out, "ember.kvc")
    ember(a.ember, "kv", "export", "--model", gguf, "--prompt-ids", ",".join(map(str, PREFIX)), "--output", snap, "--force")
    ember(a.ember, "kvc", "pack", snap, kvc, "--force")
    from ember_kv.kvc1 import read_kvc1
    resume = read_kvc1(kvc).state["resume"]["token"]
    cache = torch_cache.to_dynamic_cache(kvc, dtype=torch.float32)
    resumed, _ = hf_logits(model, [resume], cache)
    native, _ = hf_logits(model, PREFIX + [resume])
    r["checks"]["cross_engine_ember_kvc1_to_transformers"] = d4 = float(np.abs(resumed[-1] - native[-1]).max())
    cross_next = int(resumed[-1].argmax()) == int(native[-1].argmax())

    # 5. same engine, two processes: transformers' cache -> KVC1 -> (process 2) -> resume
    boundary, past = hf_logits(model, PREFIX)
    t_resume = int(boundary[-1].argmax())
    t_kvc, t_native = os.path.join(a.out, "transformers.kvc"), os.path.join(a.out, "native.f32")
    torch_cache.from_legacy_cache(past, state_for("0" * 64, len(PREFIX), t_resume, cfg), t_kvc, force=True)
    np.asarray(hf_logits(model, PREFIX + [t_resume])[0][-1], "<f4").tofile(t_native)
    p2 = os.path.join(a.out, "process2.json")
    subprocess.run([sys.executable, __file__, "--ember", a.ember, "--out", a.out, "--resume-process", hf_dir, t_kvc,
                    t_native, p2], check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                       [os.path.join(os.path.dirname(HERE), "python")] + os.environ.get("PYTHONPATH", "").split(os.pathsep))))
    with open(p2) as f:
        g = json.load(f)
    r["checks"]["same_engine_two_process"] = d5 = g["max_abs_logit_diff"]

    ok = {"torch_ref": d2 <= 1e-4, "import_hf": d3 <= 0.05 and same_argmax, "cross_engine": d4 <= 0.05 and cross_next,
          "same_engine": d5 <= 5e-5 and g["native_next"] == g["resumed_next"]}
    r["pass"] = ok
    r["result"] = "pass" if all(ok.values()) else "fail"
    with open(os.path.join(a.out, "receipt.json"), "w") as f:
        json.dump(r, f, indent=2, sort_keys=True)
    print(json.dumps(r, indent=2, sort_keys=True))
    return 0 if r["result"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
