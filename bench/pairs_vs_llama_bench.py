#!/usr/bin/env python3
"""ember bench against llama-bench on the same GGUF, in pairs (docs/engine.md "Measured").

The VMs these tables come from drift by a third within minutes, so one run of each engine
says little. A pair is one llama-bench run and one `ember bench` run with the same flags,
back to back; the script alternates N pairs per model and prints, per test, each engine's
median tok/s (range) and the median of the pairs' ratios (range), the docs' table row, with
the CPU, the commands and the UTC window the row needs beside it. Nothing else should run
meanwhile. llama.cpp is not built by this repository: build it (de3ff81, the source
node-llama-cpp 3.22.1 ships) outside it, as docs/engine.md says, and pass its llama-bench;
a command line with arguments works too, for a wrapper that sets LD_LIBRARY_PATH.

Usage: bench/pairs_vs_llama_bench.py --llama-bench PATH --model M.gguf [--model M2.gguf ...]
       [--ember build/ember] [--simd avx2] [--threads 2] [--pairs 5] [-- BENCH FLAGS]
BENCH FLAGS go to both engines unchanged (default: -p 512 -n 0), e.g. `-- -p 0 -n 128` or
`-- -p 8192 -n 0 -fa 1` (ember accepts and ignores llama-bench's GPU and attention flags).
Exit status: 0 done, 1 an engine failed or their tests differ, 2 bad use."""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys

from report import cpu_name, shown


def fail(msg, code=1):
    print("pairs_vs_llama_bench: " + msg, file=sys.stderr)
    sys.exit(code)


def test_name(t):
    """llama-bench's name for one result: pp512, tg128, pp512+tg128, with ' @ dD' at depth."""
    p, g, d = int(t.get("n_prompt", 0)), int(t.get("n_gen", 0)), int(t.get("n_depth", 0))
    name = "+".join(x for x in (f"pp{p}" if p else "", f"tg{g}" if g else "") if x)
    return name + (f" @ d{d}" if d else "")


def run_engine(label, argv, env):
    """One engine run: {test name: tok/s} from its jsonl lines."""
    try:
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    except FileNotFoundError:
        fail(f"{label}: no such program: {argv[0]}")
    except subprocess.TimeoutExpired:
        fail(f"{label}: no result within an hour: {shlex.join(argv)}")
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        fail(f"{label} exited {r.returncode}: {last[:300]!r} ({shlex.join(argv)})")
    out = {}
    for line in r.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            t = json.loads(line)
        except json.JSONDecodeError:
            fail(f"{label}: a jsonl line that is not JSON: {line[:120]!r}")
        if "avg_ts" not in t:
            fail(f"{label}: a result without avg_ts: {line[:120]!r}")
        out[test_name(t)] = float(t["avg_ts"])
    if not out:
        fail(f"{label}: no jsonl result on stdout ({shlex.join(argv)})")
    return out


def summary(xs, fmt):
    return f"{fmt % statistics.median(xs)} ({fmt % min(xs)}-{fmt % max(xs)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-bench", required=True, help="llama-bench, or a command line that runs it")
    ap.add_argument("--model", action="append", required=True, help="GGUF file (repeatable)")
    ap.add_argument("--ember", default="build/ember")
    ap.add_argument("--simd", help="EMBER_SIMD for ember (default: its own choice)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("flags", nargs="*", help="after --: flags for both engines (default -p 512 -n 0)")
    a = ap.parse_args()
    if not 1 <= a.pairs <= 100:
        fail(f"--pairs: expected 1 to 100, found {a.pairs}", 2)
    if not 1 <= a.threads <= 1024:
        fail(f"--threads: expected 1 to 1024, found {a.threads}", 2)
    for m in a.model:
        if not os.path.isfile(m):
            fail(f"--model: no such file: {shown(m)}", 2)
    flags = a.flags or ["-p", "512", "-n", "0"]
    llama = shlex.split(a.llama_bench)
    if not llama:
        fail("--llama-bench: expected a program, found an empty string", 2)
    ember_env = dict(os.environ, EMBER_SIMD=a.simd) if a.simd else None
    common = ["-t", str(a.threads), *flags, "-r", "1", "-o", "jsonl"]

    start = datetime.datetime.now(datetime.timezone.utc)
    print(f"# CPU: {cpu_name()}; ember path: {a.simd or 'its default'}; pairs per model: {a.pairs}")
    print(f"#   {shlex.join(llama + ['-m', 'M', *common])}")
    print(f"#   {'EMBER_SIMD=' + a.simd + ' ' if a.simd else ''}{shlex.join([a.ember, 'bench', '-m', 'M', *common])}")
    rows = []
    for m in a.model:
        ll, em = {}, {}
        for i in range(a.pairs):
            lr = run_engine("llama-bench", llama + ["-m", m, *common], None)
            er = run_engine("ember bench", [a.ember, "bench", "-m", m, *common], ember_env)
            if set(lr) != set(er):
                fail(f"{shown(m)}: the engines ran different tests: llama-bench {sorted(lr)}, ember {sorted(er)}")
            for name in lr:
                ll.setdefault(name, []).append(lr[name])
                em.setdefault(name, []).append(er[name])
            print(f"# {shown(os.path.basename(m))} pair {i + 1}: " +
                  ", ".join(f"{n} {lr[n]:.1f} / {er[n]:.1f} = {er[n] / lr[n]:.2f}" for n in lr),
                  file=sys.stderr, flush=True)
        for name in ll:
            ratios = [e / l for l, e in zip(ll[name], em[name])]
            rows.append(f"| {shown(os.path.basename(m))} | {a.simd or 'default'} | {name} | "
                        f"{summary(ll[name], '%.1f')} | {summary(em[name], '%.1f')} | "
                        f"{summary(ratios, '%.2f')} |")
    end = datetime.datetime.now(datetime.timezone.utc)
    print(f"# {start:%Y-%m-%d %H:%M} to {end:%H:%M} UTC")
    print("| model | path | test | llama.cpp tok/s | ember tok/s | pair ratio |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
