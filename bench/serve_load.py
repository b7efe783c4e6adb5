#!/usr/bin/env python3
"""Throughput and latency of `ember serve` (docs/serve.md "Speed").

For one model: starts `ember serve --parallel 8`, then at each concurrency C in 1, 2, 4, 8 runs
C clients that each stream R requests (a distinct prompt of P tokens per request, so nothing is
a prefix hit; G generated tokens, greedy, ignore_eos) and reports the aggregate generated
tokens per second and the time to first token (p50, p99). Then a long-prefix hit: one cold
request with a prompt of H tokens, and the same prompt again (restored from RAM), TTFT of each.
Absolute figures depend on the machine: each run prints the CPU, the SIMD path and the command.

Usage: bench/serve_load.py --model M.gguf [--ember build/ember] [--threads N] [--prompt-tokens P]
       [--gen-tokens G] [--requests R] [--prefix-tokens H]
A model can be made with `ember model synth --preset qwen2.5-0.5b --type q8_0 --seed 1 -o M.gguf`."""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve_http"))
import serve_fixture  # noqa: E402
from report import BenchError, cpu_name, run_main, shown  # noqa: E402


def stream_one(port, body):
    """(TTFT seconds, generated tokens) of one streamed completion."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    t0 = time.monotonic()
    c.request("POST", "/completion", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raw = r.read()
        c.close()
        try:
            why = json.loads(raw)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            why = raw[:200].decode("utf-8", "replace")
        raise BenchError(f"the server answered HTTP {r.status}: {why}")
    ttft = None
    n = 0
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: "):
                continue
            j = json.loads(event[6:])
            if j.get("stop"):
                n = j["tokens_predicted"]
            elif ttft is None:
                ttft = time.monotonic() - t0
    c.close()
    if ttft is None:
        raise BenchError("the server's stream ended before its first token")
    return ttft, n


def prompt_ids(i, n, vocab):
    return [1 + (i * 7919 + t * 104729) % (vocab - 1) for t in range(n)]


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ember", default=serve_fixture.EMBER)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--prefix-tokens", type=int, default=2048)
    ap.add_argument("--concurrency", default="1,2,4,8")
    a = ap.parse_args()
    serve_fixture.EMBER = a.ember
    if not os.path.isfile(a.model):
        ap.error(f"--model: no such file {a.model!r}")
    try:
        server = serve_fixture.EmberServer("--parallel", "8", "--threads", str(a.threads), "--cache-ram", "4096",
                                           model=a.model)
    except AssertionError as e:  # the test fixture's way of saying the server did not start
        raise BenchError(str(e).strip()) from None
    try:
        _, models, _ = server.request("GET", "/v1/models")
        vocab = models["data"][0]["meta"]["n_vocab"]
        n_ctx = models["data"][0]["meta"]["n_ctx"]
        for flag, need in (("--prompt-tokens P + --gen-tokens G", a.prompt_tokens + a.gen_tokens),
                           ("--prefix-tokens H + 4", a.prefix_tokens + 4)):
            if need > n_ctx:
                raise BenchError(f"{flag}: expected at most the served context, {n_ctx} tokens, found {need}",
                                 status=2)
        engine = models["data"][0]["meta"]["engine"]
        cpu = cpu_name()
        simd = os.environ.get("EMBER_SIMD", "best present")
        print(f"model {shown(os.path.basename(a.model))} ({engine}); CPU {cpu}, {os.cpu_count()} logical CPUs, "
              f"EMBER_SIMD {simd}, --threads {a.threads}")
        print(f"command: {' '.join(sys.argv)}")
        print(f"{'clients':>7} {'requests':>8} {'gen tok/s':>10} {'TTFT p50 s':>11} {'TTFT p99 s':>11}")
        base = 0
        for conc in [int(x) for x in a.concurrency.split(",")]:
            ttfts, counts, errors = [], [], []
            lock = threading.Lock()

            def client(k):
                try:
                    for r in range(a.requests):
                        i = base + k * a.requests + r
                        body = {"prompt": prompt_ids(i, a.prompt_tokens, vocab), "n_predict": a.gen_tokens,
                                "temperature": 0, "ignore_eos": True, "stream": True}
                        t, n = stream_one(server.port, body)
                        with lock:
                            ttfts.append(t)
                            counts.append(n)
                except (BenchError, OSError, http.client.HTTPException) as e:
                    with lock:
                        errors.append(e)
            t0 = time.monotonic()
            ts = [threading.Thread(target=client, args=(k,)) for k in range(conc)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            wall = time.monotonic() - t0
            if errors:
                raise BenchError(f"{len(errors)} of {conc} clients failed; the first: {errors[0]}")
            base += conc * a.requests
            print(f"{conc:>7} {len(counts):>8} {sum(counts) / wall:>10.2f} {statistics.median(ttfts):>11.3f} "
                  f"{percentile(ttfts, 0.99):>11.3f}")
        body = {"prompt": prompt_ids(10 ** 6, a.prefix_tokens, vocab), "n_predict": 4, "temperature": 0,
                "ignore_eos": True, "stream": True}
        cold, _ = stream_one(server.port, body)
        hit, _ = stream_one(server.port, body)
        print(f"{a.prefix_tokens}-token prompt: TTFT cold {cold:.3f} s, repeated (RAM prefix hit) {hit:.3f} s "
              f"({cold / hit:.1f}x)")
    finally:
        server.stop()


if __name__ == "__main__":
    run_main("serve_load.py", main)
