#!/usr/bin/env python3
"""ember serve and llama-server side by side on the same GGUF and the same request stream
(docs/serve.md "Speed"): aggregate generated tokens per second, and how many (prompt,
parameters) pairs got more than one distinct output over the stream.

The stream: R rounds; each round sends every (prompt, parameters) pair once, in a shuffled
order, from C concurrent clients, so the same request meets different batch neighbours and,
from the second round on, a prompt prefix cached by the server (llama-server's `cache_prompt`,
its default; ember's RAM tier). Parameters: greedy, and seeded sampling. llama-server is not
built by this repository: build llama.cpp (de3ff81, the source node-llama-cpp 3.22.1 ships)
outside it and pass --llama-server PATH.

Usage: bench/serve_vs_llama_server.py --model M.gguf --llama-server PATH [--ember build/ember]
       [--threads 2] [--parallel 4] [--clients 4] [--rounds 3] [--gen-tokens 32] [--ctx 512]
       [--preamble-words 0]"""
import argparse
import collections
import concurrent.futures
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve_http"))
import serve_fixture  # noqa: E402
from report import BenchError, cpu_name, run_main, shown  # noqa: E402

PROMPTS = [
    "Once upon a time there was a small town by the sea where",
    "The quick brown fox jumps over the lazy dog and then",
    "In the beginning of the year, the committee decided that",
    "She opened the old wooden box and found a letter that said",
    "The recipe calls for two cups of flour, one egg and",
    "After the long winter, the farmers in the valley began to",
]
PARAMS = [{"temperature": 0}, {"temperature": 0.8, "seed": 3, "top_k": 40, "top_p": 0.95}]
# With --preamble-words N every prompt opens with the first N words of this text (repeated as
# needed): the requests then share a long prefix, so a server reuses its cached part and
# computes the rest in whatever batch it is in, and each prefill is long enough to be split
# among batch neighbours.
PREAMBLE = ("One day a little girl named Lily went to the park with her mom. The sun was warm and "
            "the sky was blue. Lily saw a big red ball under a tree and ran to get it. A small dog "
            "came and wanted to play too. They played all day, and when it was time to go home, "
            "Lily said goodbye to the dog and gave it a hug.").split()


class LlamaServer:
    def __init__(self, path, model, threads, parallel, ctx):
        self.port = serve_fixture.free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([path, "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
                                      "-np", str(parallel), "-t", str(threads), "-c", str(ctx * parallel)],
                                     stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise BenchError(f"llama-server exited {self.proc.returncode}; its log: {self.log.name}")
            time.sleep(0.2)
        self.stop(keep_log=True)
        raise BenchError("llama-server did not become healthy in 120 s; its log: " + self.log.name)

    def stop(self, keep_log=False):
        serve_fixture.end_process(self.proc, 20)
        self.log.close()
        if not keep_log:
            os.unlink(self.log.name)  # a run that went well leaves nothing behind


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/completion", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        j = json.loads(raw)
    except ValueError:
        raise BenchError(f"port {port} answered HTTP {r.status} with no JSON: {raw[:200]!r}") from None
    if r.status != 200:
        why = j.get("error", {}).get("message", j) if isinstance(j, dict) else j
        raise BenchError(f"port {port} answered HTTP {r.status}: {why}")
    return j


def preamble(words):
    return " ".join(PREAMBLE[i % len(PREAMBLE)] for i in range(words))


def run_stream(port, jobs, clients, gen, lead):
    outputs = collections.defaultdict(list)

    def one(job):
        p, q = job
        prompt = f"{lead} {PROMPTS[p]}" if lead else PROMPTS[p]
        body = {"prompt": prompt, "n_predict": gen, "cache_prompt": True, "return_tokens": True}
        body.update(PARAMS[q])
        j = post(port, body)
        return job, json.dumps(j["tokens"]), j.get("tokens_predicted", 0)  # ids: random models decode to little text

    t0 = time.monotonic()
    tokens = 0
    with concurrent.futures.ThreadPoolExecutor(clients) as ex:
        for job, text, n in ex.map(one, jobs):
            outputs[job].append(text)
            tokens += n
    return outputs, tokens / (time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--ember", default=serve_fixture.EMBER)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--preamble-words", type=int, default=0,
                    help="a shared opening of this many words before every prompt (default 0)")
    a = ap.parse_args()
    if a.preamble_words < 0:
        ap.error(f"--preamble-words: expected 0 or more, found {a.preamble_words}")
    for flag, path in (("--llama-server", a.llama_server), ("--ember", a.ember)):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            ap.error(f"{flag}: expected an executable file, found {path!r}")
    if not os.path.isfile(a.model):
        ap.error(f"--model: no such file {a.model!r}")
    serve_fixture.EMBER = a.ember
    rng = random.Random(7)
    jobs = []
    for _ in range(a.rounds):
        r = [(p, q) for p in range(len(PROMPTS)) for q in range(len(PARAMS))]
        rng.shuffle(r)
        jobs += r
    lead = preamble(a.preamble_words)
    cpu = cpu_name()
    print(f"model {shown(os.path.basename(a.model))}; CPU {cpu}, {os.cpu_count()} logical CPUs; {len(jobs)} requests, "
          f"{a.clients} clients, {a.gen_tokens} tokens each, a shared opening of {a.preamble_words} words; "
          f"command: {' '.join(sys.argv)}")
    results = {}
    for name in ("llama-server", "ember serve"):
        if name == "llama-server":
            srv = LlamaServer(a.llama_server, a.model, a.threads, a.parallel, a.ctx)
        else:
            try:
                srv = serve_fixture.EmberServer("--parallel", str(a.parallel), "--threads", str(a.threads), "-c",
                                                str(a.ctx), model=a.model)
            except AssertionError as e:  # the test fixture's way of saying the server did not start
                raise BenchError(str(e).strip()) from None
        ok = False
        try:
            post(srv.port, {"prompt": "warm up", "n_predict": 2, "temperature": 0})
            outputs, tps = run_stream(srv.port, jobs, a.clients, a.gen_tokens, lead)
            ok = True
        finally:
            if isinstance(srv, LlamaServer):
                srv.stop(keep_log=not ok)
            else:
                srv.stop()
        changed = [job for job, outs in outputs.items() if len(set(outs)) > 1]
        greedy = sum(1 for _, q in changed if PARAMS[q]["temperature"] == 0)
        results[name] = outputs
        print(f"{name:>12}: {tps:7.2f} generated tok/s; pairs with more than one output: {len(changed)} of "
              f"{len(outputs)} ({greedy} greedy, {len(changed) - greedy} sampled)")
    ours, theirs = results["ember serve"], results["llama-server"]
    same = sum(1 for job in ours if ours[job][0] == theirs[job][0])
    print(f"first outputs equal across the two engines: {same} of {len(ours)} "
          "(not expected: different kernels)")


if __name__ == "__main__":
    run_main("serve_vs_llama_server.py", main)
