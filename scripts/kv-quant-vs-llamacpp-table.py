#!/usr/bin/env python3
"""The table of docs/results/kv-quant-vs-llamacpp.md: llama.cpp's mean KLD per -ctk/-ctv pair
(the "Mean    KLD:" line of each llama-perplexity --kl-divergence log, named
MODEL.K.V.rot-on|off.log) against ember's `study kv-quant` in-loop and prefix figures (the
JSONs scripts/kv-quant-vs-llamacpp.sh writes), with the Spearman rank correlation over the
pairs and the ratio of means per pair.

    scripts/kv-quant-vs-llamacpp-table.py LLAMA_LOG_DIR EMBER_JSON_DIR
"""
import glob
import json
import os
import re
import sys


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb)


def ember_kl(path):
    """(k type, v type) -> KL mean of one study JSON."""
    out = {}
    for c in json.load(open(path))["configs"]:
        out[(c["cache_type_k"], c["cache_type_v"])] = c["kl"]["mean"]
    return out


def main(llama_dir, ember_dir):
    rows, approx = {}, set()
    for f in sorted(glob.glob(os.path.join(llama_dir, "*.rot-*.log"))):
        m = re.match(r"(.+\.F32)\.([a-z0-9_]+)\.([a-z0-9_]+)\.rot-(on|off)\.log$", os.path.basename(f))
        if not m:
            continue
        kld = re.search(r"Mean\s+KLD:\s+([0-9.eE+-]+)", open(f, errors="replace").read())
        value = float(kld.group(1)) if kld else None
        c9 = f[: -len(".log")] + ".c9.log"
        if value is None and os.path.exists(c9):
            # A run whose log lost its statistics, repeated with --chunks 9 against a 9-chunk
            # base: the chunk-8 line's running mean KLD (5 decimals) is the 8-chunk mean.
            line = re.search(r"^ +8 +\S+ ± +\S+ +\S+ ± +\S+ +(\S+) ±", open(c9, errors="replace").read(), re.M)
            if line:
                value = float(line.group(1))
                approx.add((m.group(1), m.group(4), m.group(2), m.group(3)))
        if value is not None:
            rows.setdefault((m.group(1), m.group(4)), {})[(m.group(2), m.group(3))] = value
    for (model, rot), llama in sorted(rows.items()):
        erot = "llamacpp" if rot == "on" else "none"
        inloop = ember_kl(os.path.join(ember_dir, f"{model}.{erot}.in-loop.json"))
        prefix_path = os.path.join(ember_dir, f"{model}.{erot}.prefix.json")
        prefix = ember_kl(prefix_path) if os.path.exists(prefix_path) else {}
        pairs = sorted(llama, key=lambda p: llama[p])
        print(f"\n{model}, llama.cpp rotation {rot} (ember --rotation {erot})\n")
        print("| -ctk / -ctv | llama.cpp mean KLD | ember in-loop | ratio | ember prefix | ratio |")
        print("|---|---|---|---|---|---|")
        for p in pairs:
            a, b = llama[p], inloop[p]
            c = prefix.get(p)
            pc = f"{c:.4g} | {c / a:.2f}" if c is not None else "- | -"
            star = "*" if (model, rot, p[0], p[1]) in approx else ""
            print(f"| {p[0]} / {p[1]} | {a:.4g}{star} | {b:.4g} | {b / a:.2f} | {pc} |")
        s_in = spearman([llama[p] for p in pairs], [inloop[p] for p in pairs])
        line = f"\nSpearman over {len(pairs)} pairs: in-loop {s_in:.3f}"
        if prefix:
            line += f", prefix {spearman([llama[p] for p in pairs], [prefix[p] for p in pairs]):.3f}"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
