#!/usr/bin/env python3
"""Determinism under load for `ember serve` (docs/serve.md).

Starts one redis-server and two `ember serve` processes that share it as their prefix store
and differ in --threads and EMBER_SIMD, then sends N requests drawn from a prompt set (greedy
and seeded sampling, with logprobs) at a random concurrency of 1-8, to either server at
random. Cold runs, RAM hits and Redis hits mix. It prints, per (prompt, parameters), the
number of distinct outputs (text and logprob bytes), which must be 1, and checks each against
`ember run` of the same prompt. Loopback only; every loop is bounded.

Usage: serve-determinism.py [--requests N] [--ember build/ember] [--model M.gguf] [--seed S]
Exit 0 when every (prompt, parameters) had one output equal to `ember run`, 1 otherwise."""
import argparse
import collections
import concurrent.futures
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve_http"))
import serve_fixture  # noqa: E402  (the tests' process fixtures: one way to start the servers)

PROMPTS = [
    "Once upon a time",
    "Lily wanted to play with the big red ball, but her mom said",
    "Tom and his dog went to the park. They saw a tall tree with a bird in it. The bird was singing",
    "Tom and his dog went to the park. They saw a tall tree with a bird in it. Tom wanted to",
    "One day, a little boy named Tim found a shiny rock in the garden. He showed it to his mom",
    "One day, a little boy named Tim found a shiny rock in the garden. He put it in his pocket and",
    "The sun was hot and the sky was blue. Sue and her friend Ben went to the beach to",
    "There was a big cat who liked to sleep all day.",
]
PARAMS = [
    {"temperature": 0},
    {"temperature": 0.8, "seed": 1},
    {"temperature": 1.0, "top_k": 40, "top_p": 0.9, "seed": 77},
]


def reference(prompt, params, n):
    args = []
    if params["temperature"] > 0:
        args += ["--temp", str(params["temperature"]), "--seed", str(params["seed"])]
        if "top_k" in params:
            args += ["--top-k", str(params["top_k"])]
        if "top_p" in params:
            args += ["--top-p", str(params["top_p"])]
    return serve_fixture.ember_run(prompt, n, *args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--ember", default=serve_fixture.EMBER)
    ap.add_argument("--model", default=serve_fixture.MODEL)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--seed", type=int, default=20261204)
    a = ap.parse_args()
    serve_fixture.EMBER = a.ember
    serve_fixture.MODEL = a.model
    model_id = os.path.basename(a.model)
    rng = random.Random(a.seed)
    simd_b = os.environ.get("EMBER_SIMD_B", "")  # the second server's path ("" = the best this CPU has)
    redis = serve_fixture.RedisServer()
    servers = []
    try:
        servers.append(serve_fixture.EmberServer("--store", redis.uri(), "--threads", "1", "--parallel", "4",
                                                 model=a.model, env={"EMBER_SIMD": "scalar"}))
        servers.append(serve_fixture.EmberServer("--store", redis.uri(), "--threads", "2", "--parallel", "8",
                                                 "--cache-ram", "0", model=a.model,
                                                 env={"EMBER_SIMD": simd_b} if simd_b else None))
        jobs = [(rng.randrange(len(PROMPTS)), rng.randrange(len(PARAMS)), rng.randrange(2))
                for _ in range(a.requests)]

        def send(job):
            p, q, s = job
            body = {"model": model_id, "prompt": PROMPTS[p], "max_tokens": a.max_tokens, "logprobs": 2}
            body.update(PARAMS[q])
            status, j, _ = servers[s].post("/v1/completions", body, timeout=300)
            if status != 200:
                raise RuntimeError(f"server {s}: HTTP {status}: {j}")
            c = j["choices"][0]
            return job, c["text"], json.dumps(c["logprobs"], sort_keys=True), j["ember"]["prefix"]["tier"]

        outputs = collections.defaultdict(set)
        texts = {}
        tiers = collections.Counter()
        t0 = time.monotonic()
        done = 0
        while done < len(jobs):
            width = rng.randint(1, 8)
            batch = jobs[done:done + width]
            with concurrent.futures.ThreadPoolExecutor(width) as ex:
                for (p, q, s), text, lp, tier in ex.map(send, batch):
                    outputs[(p, q)].add((text, lp))
                    texts[(p, q)] = text
                    tiers[(s, tier)] += 1
            done += len(batch)
        elapsed = time.monotonic() - t0
        bad = 0
        print(f"{len(jobs)} requests in {elapsed:.1f} s over 2 servers (threads 1 / 2, EMBER_SIMD scalar / "
              f"{simd_b or 'best'}), one shared Redis")
        print("prefix tiers served (server, tier): " + ", ".join(f"{k}={v}" for k, v in sorted(tiers.items())))
        print("prompt params  distinct  equals ember run")
        for (p, q), outs in sorted(outputs.items()):
            same = texts[(p, q)] == reference(PROMPTS[p], PARAMS[q], a.max_tokens)
            bad += len(outs) != 1 or not same
            print(f"{p:6d} {q:6d}  {len(outs):8d}  {'yes' if same else 'NO'}")
        print("distinct outputs per (prompt, parameters): " +
              ("1 everywhere" if bad == 0 else f"{bad} pair(s) with more than one or unequal to ember run"))
        return 0 if bad == 0 else 1
    finally:
        for s in servers:
            s.stop()
        redis.stop()


if __name__ == "__main__":
    sys.exit(main())
