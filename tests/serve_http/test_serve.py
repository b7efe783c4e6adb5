"""`ember serve` end to end: real server processes on loopback, real clients (Python's
http.client, curl, the official OpenAI Node client), a real redis-server for the shared tier.
Each test says what it checks in its name."""
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from serve_fixture import (EMBER, MODEL_ID, QWEN3_CONFIG, EmberServer, RedisServer, ember_run, sse_events)

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPTS = [
    "Once upon a time",
    "Lily wanted to play with the big red ball, but her mom said",
    "Tom and his dog went to the park. They saw a tall tree with a bird in it. The bird was singing",
    "One day, a little boy named Tim found a shiny rock in the garden. He showed it to",
]


def completion(server, prompt, **kw):
    body = {"model": MODEL_ID, "prompt": prompt, "max_tokens": 20, "temperature": 0}
    body.update(kw)
    status, j, _ = server.post("/v1/completions", body)
    assert status == 200, j
    return j


class ServeCompletions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = EmberServer("--parallel", "4", "--threads", "2", "--tokenizer-config", QWEN3_CONFIG)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_greedy_and_seeded_completions_equal_ember_run(self):
        for p in PROMPTS[:2]:
            j = completion(self.server, p, max_tokens=20)
            self.assertEqual(j["choices"][0]["text"], ember_run(p, 20))
            s = completion(self.server, p, max_tokens=20, temperature=0.8, top_k=40, top_p=0.95, seed=11)
            self.assertEqual(s["choices"][0]["text"], ember_run(p, 20, "--temp", "0.8", "--top-k", "40",
                                                                "--top-p", "0.95", "--seed", "11"))

    def test_response_names_model_contract_engine_and_prefix_tier(self):
        j = completion(self.server, PROMPTS[0], max_tokens=3)
        self.assertEqual(j["object"], "text_completion")
        self.assertEqual(j["ember"]["numerics"], "canonical-v1")
        self.assertTrue(j["ember"]["engine"].startswith("canonical-v1;"))
        self.assertEqual(len(j["ember"]["model_identity"]), 64)
        self.assertEqual(j["system_fingerprint"], j["ember"]["engine"])
        self.assertIn(j["ember"]["prefix"]["tier"], ("none", "ram"))
        self.assertEqual(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"] + j["usage"]["completion_tokens"])

    def test_repeated_request_is_a_ram_hit_with_the_same_bits(self):
        p = PROMPTS[2] + " a song about the sun and the moon"
        a = completion(self.server, p, max_tokens=16, temperature=0.9, seed=5, logprobs=3)
        b = completion(self.server, p, max_tokens=16, temperature=0.9, seed=5, logprobs=3)
        self.assertEqual(b["ember"]["prefix"]["tier"], "ram")
        self.assertGreaterEqual(b["usage"]["prompt_tokens_details"]["cached_tokens"], 16)
        self.assertEqual(a["choices"][0]["text"], b["choices"][0]["text"])
        self.assertEqual(a["choices"][0]["logprobs"], b["choices"][0]["logprobs"])  # floats: exact

    def test_concurrent_requests_equal_their_sequential_answers(self):
        jobs = [(p, t, s) for p in PROMPTS for (t, s) in ((0, 0), (0.7, 3))]
        want = {job: completion(self.server, job[0], temperature=job[1], seed=job[2], logprobs=1)
                for job in jobs}
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            got = list(ex.map(lambda job: (job, completion(self.server, job[0], temperature=job[1], seed=job[2],
                                                           logprobs=1)), jobs * 2))
        for job, j in got:
            self.assertEqual(j["choices"][0]["text"], want[job]["choices"][0]["text"], job)
            self.assertEqual(j["choices"][0]["logprobs"], want[job]["choices"][0]["logprobs"], job)

    def test_streamed_text_equals_whole_text(self):
        whole = completion(self.server, PROMPTS[1], max_tokens=24)
        status, raw, r = self.server.post("/v1/completions", {"model": MODEL_ID, "prompt": PROMPTS[1],
                                                              "max_tokens": 24, "temperature": 0, "stream": True,
                                                              "stream_options": {"include_usage": True}})
        self.assertEqual(status, 200)
        self.assertTrue(r.getheader("Content-Type").startswith("text/event-stream"))
        ev = sse_events(raw)
        self.assertEqual(ev[-1], "[DONE]")
        self.assertEqual("".join(e["choices"][0]["text"] for e in ev[:-1] if e["choices"]), whole["choices"][0]["text"])
        self.assertEqual(ev[-2]["usage"]["completion_tokens"], whole["usage"]["completion_tokens"])
        self.assertEqual([e for e in ev[:-1] if e["choices"] and e["choices"][0]["finish_reason"]][0]
                         ["choices"][0]["finish_reason"], "length")

    def test_chat_equals_ember_run_of_the_rendered_conversation(self):
        messages = [{"role": "user", "content": "Once upon a time"}]
        status, j, _ = self.server.post("/v1/chat/completions", {"model": MODEL_ID, "messages": messages,
                                                                 "max_tokens": 12, "temperature": 0})
        self.assertEqual(status, 200, j)
        self.assertEqual(j["choices"][0]["message"]["role"], "assistant")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump(messages, f)
            f.flush()
            r = subprocess.run([EMBER, "run", "--model", self.server_model(), "--messages", f.name,
                                "--tokenizer-config", QWEN3_CONFIG, "--add-generation-prompt", "-n", "12", "--quiet"],
                               capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(j["choices"][0]["message"]["content"], r.stdout.decode()[:-1])

    def server_model(self):
        from serve_fixture import MODEL
        return MODEL

    def test_stop_strings_cut_the_text_and_finish_with_stop(self):
        whole = completion(self.server, PROMPTS[0], max_tokens=30)["choices"][0]["text"]
        stop = whole[10:14]
        j = completion(self.server, PROMPTS[0], max_tokens=30, stop=[stop])
        self.assertEqual(j["choices"][0]["text"], whole[:whole.index(stop)])
        self.assertEqual(j["choices"][0]["finish_reason"], "stop")

    def test_llama_server_routes(self):
        status, j, _ = self.server.post("/completion", {"prompt": PROMPTS[0], "n_predict": 20, "temperature": 0,
                                                        "return_tokens": True})
        self.assertEqual(status, 200, j)
        self.assertEqual(j["content"], ember_run(PROMPTS[0], 20))
        status, d, _ = self.server.post("/detokenize", {"tokens": j["tokens"]})
        self.assertEqual(d["content"], j["content"])
        status, t, _ = self.server.post("/tokenize", {"content": "Once upon a time"})
        self.assertEqual(status, 200)
        status, d, _ = self.server.post("/detokenize", {"tokens": t["tokens"]})
        self.assertEqual(d["content"].strip(), "Once upon a time")
        for path in ("/health", "/props", "/slots", "/v1/models"):
            status, body, _ = self.server.request("GET", path)
            self.assertEqual(status, 200, path)
        status, text, _ = self.server.request("GET", "/metrics")
        for name in ("ember_requests_total", "ember_prefix_lookups_total{tier=\"ram\"}",
                     "ember_time_to_first_token_seconds_bucket", "ember_inter_token_seconds_count",
                     "ember_queue_depth", "ember_step_sequences_bucket"):
            self.assertIn(name, text)

    def test_curl_gets_the_same_answer(self):
        body = json.dumps({"model": MODEL_ID, "prompt": PROMPTS[1], "max_tokens": 10, "temperature": 0})
        r = subprocess.run(["curl", "-sS", "--max-time", "60", f"http://127.0.0.1:{self.server.port}/v1/completions",
                            "-H", "Content-Type: application/json", "-d", body], capture_output=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["choices"][0]["text"], ember_run(PROMPTS[1], 10))

    def test_official_openai_node_client(self):
        node_modules = os.path.join(HERE, "node_modules", "openai")
        self.assertTrue(os.path.isdir(node_modules),
                        "npm ci --prefix tests/serve_http (scripts/install-deps.sh) installs the openai client")
        r = subprocess.run(["node", os.path.join(HERE, "openai_client.mjs"), f"http://127.0.0.1:{self.server.port}/v1",
                            MODEL_ID], capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        out = json.loads(r.stdout)
        prompt = "Once upon a time, there was a little dog named Max. Max liked to"
        self.assertEqual(out["completion"], ember_run(prompt, 24))
        self.assertEqual(out["completion_streamed"], out["completion"])
        self.assertEqual(out["completion_finish"], "length")
        self.assertEqual(out["completion_streamed_finish"], "length")
        self.assertEqual(len(out["completion_logprobs"]), 24)
        self.assertTrue(out["system_fingerprint"].startswith("canonical-v1"))
        self.assertEqual(out["chat_role"], "assistant")
        self.assertEqual(out["chat_streamed"], out["chat"])
        self.assertEqual(out["chat_stream_usage"]["completion_tokens"], 16)
        self.assertEqual(out["unknown_model"]["status"], 404)
        self.assertEqual(out["unknown_model"]["code"], "model_not_found")


class ServeBadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = EmberServer("--parallel", "2", "--max-body", "64", "--ctx-size", "64")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def refused(self, body, status=400, path="/v1/completions", needle=None):
        s, j, _ = self.server.post(path, body)
        self.assertEqual(s, status, j)
        self.assertIn("error", j)
        self.assertEqual(set(j["error"]), {"message", "type", "param", "code"})
        self.assertNotIn("\n", j["error"]["message"])
        if needle:
            self.assertIn(needle, j["error"]["message"])
        return j["error"]

    def test_each_bad_request_is_a_4xx_in_openais_shape(self):
        self.refused("{not json", needle="JSON")
        self.refused({"model": MODEL_ID, "prompt": 5}, needle="prompt")
        self.refused({"model": MODEL_ID, "prompt": "a", "max_tokens": "9"}, needle="max_tokens")
        self.refused({"model": MODEL_ID, "prompt": "a", "bogus": True}, needle="bogus")
        self.assertEqual(self.refused({"model": "gpt-4", "prompt": "a"}, status=404)["code"], "model_not_found")
        self.refused(b'{"model": "stories260K.gguf", "prompt": "caf\xe9"}', needle="UTF-8")
        self.refused({"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}]},
                     path="/v1/chat/completions", needle="chat template")
        self.refused(b"x" * (65 * 1024), status=413)
        s, j, _ = self.server.request("GET", "/no/such/route")
        self.assertEqual(s, 404)
        self.assertIn("error", j)

    def test_prompt_past_the_context_names_the_limit(self):
        e = self.refused({"model": MODEL_ID, "prompt": "Once upon a time " * 40})
        self.assertEqual(e["code"], "context_length_exceeded")
        self.assertIn("64", e["message"])

    def test_huge_max_tokens_is_bounded_by_the_context(self):
        j = completion(self.server, PROMPTS[0], max_tokens=1 << 24, ignore_eos=True)
        u = j["usage"]
        self.assertEqual(j["choices"][0]["finish_reason"], "length")
        self.assertLessEqual(u["prompt_tokens"] + u["completion_tokens"], 65)


class ServeFaults(unittest.TestCase):
    def test_api_key_guards_every_route_but_health(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("s3cret-key\n")
        try:
            server = EmberServer("--api-key-file", f.name)
        finally:
            os.unlink(f.name)  # the server read it at start
        try:
            s, j, _ = server.post("/v1/completions", {"model": MODEL_ID, "prompt": "a", "max_tokens": 1})
            self.assertEqual(s, 401)
            self.assertEqual(j["error"]["type"], "authentication_error")
            s, _, _ = server.request("GET", "/metrics", headers={"Authorization": "Bearer wrong"})
            self.assertEqual(s, 401)
            s, _, _ = server.request("GET", "/health")
            self.assertEqual(s, 200)
            s, j, _ = server.post("/v1/completions", {"model": MODEL_ID, "prompt": "a", "max_tokens": 1},
                                  headers={"Authorization": "Bearer s3cret-key"})
            self.assertEqual(s, 200, j)
        finally:
            server.stop()

    def test_client_gone_mid_stream_frees_its_sequence(self):
        server = EmberServer("--parallel", "1", "--ctx-size", "128")
        try:
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            body = json.dumps({"model": MODEL_ID, "prompt": "Once", "max_tokens": 120, "stream": True,
                               "ignore_eos": True, "temperature": 0})
            sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
            got = b""
            while b"data: " not in got:
                chunk = sock.recv(4096)
                self.assertNotEqual(chunk, b"", "the stream ended before its first event")
                got += chunk
            sock.close()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not server.metric("ember_requests_cancelled_total"):
                time.sleep(0.05)
            self.assertEqual(server.metric("ember_requests_cancelled_total"), 1)
            # The one slot is free again: a new request is served.
            self.assertEqual(completion(server, "Once", max_tokens=2)["usage"]["completion_tokens"], 2)
        finally:
            server.stop()

    def test_connections_past_the_limit_get_503_and_stalled_clients_are_dropped(self):
        server = EmberServer("--max-connections", "2", "--timeout", "2")
        try:
            idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(2)]
            for s in idle:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # headers never finished
            time.sleep(0.3)
            s, j, _ = server.request("GET", "/health", timeout=10)
            self.assertEqual(s, 503, j)
            self.assertEqual(j["error"]["code"], "too_many_connections")
            # The stalled clients are dropped after --timeout: the server answers again.
            t0 = time.monotonic()
            for s_ in idle:
                while s_.recv(4096):  # the server may answer 400 to the half request, then closes
                    pass
                s_.close()
            self.assertLess(time.monotonic() - t0, 8)
            deadline = time.monotonic() + 10
            status = 0
            while time.monotonic() < deadline and status != 200:
                status = server.request("GET", "/health")[0]
                time.sleep(0.1)
            self.assertEqual(status, 200)
        finally:
            server.stop()

    def test_sigterm_ends_in_flight_requests_within_the_grace(self):
        server = EmberServer("--parallel", "2", "--grace-ms", "500", "--ctx-size", "128")
        results = []

        def long_request():
            results.append(server.post("/v1/completions", {"model": MODEL_ID, "prompt": "Once", "max_tokens": 120,
                                                           "ignore_eos": True, "temperature": 0})[0])
        t = threading.Thread(target=long_request)
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        rc = server.stop(signal.SIGTERM, timeout=15)
        self.assertLess(time.monotonic() - t0, 10)
        t.join(15)
        self.assertEqual(rc, 0, server.stderr())
        self.assertIn(results[0], (200, 503))
        self.assertIn("stopped", server.stderr())


class ServeSlots(unittest.TestCase):
    def test_slot_saved_by_one_server_restores_in_another_with_the_same_bits(self):
        d = tempfile.mkdtemp(prefix="ember-slots-")
        a = b = None
        try:
            a = EmberServer("--slot-save-path", d, "--parallel", "1")
            p = PROMPTS[3]
            cold = completion(a, p, max_tokens=10, temperature=0.6, seed=4, logprobs=2)
            s, j, _ = a.post("/slots/0?action=save", {"filename": "story.bin"})
            self.assertEqual(s, 200, j)
            self.assertGreaterEqual(j["n_saved"], cold["usage"]["prompt_tokens"])
            self.assertTrue(os.path.exists(os.path.join(d, "story.bin.ember.json")))
            # The file is a llama.cpp sequence state: ember's own llama.cpp reader takes it.
            r = subprocess.run([EMBER, "kv", "import-llamacpp", os.path.join(d, "story.bin"), "--model",
                                self.model(), "--output", os.path.join(d, "imported")], capture_output=True,
                               timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            for bad in ("../x.bin", ".hidden", "a/b", ""):
                s, j, _ = a.post("/slots/0?action=save", {"filename": bad})
                self.assertEqual(s, 400, bad)
            s, j, _ = a.post("/slots/0?action=explode", {"filename": "x"})
            self.assertEqual(s, 400)
            b = EmberServer("--slot-save-path", d, "--parallel", "1")
            s, j, _ = b.post("/slots/0?action=restore", {"filename": "story.bin"})
            self.assertEqual(s, 200, j)
            self.assertEqual(j["n_restored"], cold["usage"]["prompt_tokens"] + 9)
            hit = completion(b, p, max_tokens=10, temperature=0.6, seed=4, logprobs=2)
            self.assertEqual(hit["ember"]["prefix"]["tier"], "ram")
            self.assertEqual(hit["choices"][0]["logprobs"], cold["choices"][0]["logprobs"])
            # A state whose bytes changed (or without its sidecar) is not restored.
            with open(os.path.join(d, "story.bin"), "r+b") as f:
                f.seek(-3, os.SEEK_END)
                f.write(b"\x01")
            s, j, _ = b.post("/slots/0?action=restore", {"filename": "story.bin"})
            self.assertEqual(s, 400)
            self.assertIn("state_sha256", j["error"]["message"])
            s, j, _ = b.post("/slots/0?action=restore", {"filename": "missing.bin"})
            self.assertEqual(s, 404)
            s, j, _ = b.post("/slots/0?action=erase", {})
            self.assertEqual((s, j["n_erased"]), (200, cold["usage"]["prompt_tokens"] + 9))
        finally:
            for srv in (a, b):
                if srv:
                    srv.stop()
            shutil.rmtree(d, ignore_errors=True)

    def test_slot_files_need_a_save_path(self):
        server = EmberServer()
        try:
            s, j, _ = server.post("/slots/0?action=save", {"filename": "x.bin"})
            self.assertEqual(s, 501, j)
        finally:
            server.stop()

    def model(self):
        from serve_fixture import MODEL
        return MODEL


class ServeSharedStore(unittest.TestCase):
    def test_two_servers_share_prefixes_through_redis_with_the_same_bits(self):
        redis = RedisServer()
        a = b = None
        try:
            # Different threads and SIMD paths; b has no RAM tier, so its hit comes from Redis.
            a = EmberServer("--store", redis.uri(), "--threads", "1", env={"EMBER_SIMD": "scalar"})
            b = EmberServer("--store", redis.uri(), "--threads", "2", "--cache-ram", "0")
            p = PROMPTS[2]
            cold = completion(a, p, max_tokens=12, temperature=0.5, seed=9, logprobs=2)
            self.assertEqual(cold["ember"]["prefix"]["tier"], "none")
            hit = completion(b, p, max_tokens=12, temperature=0.5, seed=9, logprobs=2)
            self.assertEqual(hit["ember"]["prefix"]["tier"], "store")
            self.assertGreaterEqual(hit["usage"]["prompt_tokens_details"]["cached_tokens"], 16)
            self.assertEqual(hit["choices"][0]["text"], cold["choices"][0]["text"])
            self.assertEqual(hit["choices"][0]["logprobs"], cold["choices"][0]["logprobs"])
            # Redis gone mid-life: the prefix is computed, the client sees no error, metrics count it.
            redis.stop()
            again = completion(b, p, max_tokens=12, temperature=0.5, seed=9, logprobs=2)
            self.assertEqual(again["ember"]["prefix"]["tier"], "none")
            self.assertEqual(again["choices"][0]["logprobs"], cold["choices"][0]["logprobs"])
            self.assertGreaterEqual(b.metric("ember_store_errors_total"), 1)
        finally:
            for s in (a, b):
                if s:
                    s.stop()
            redis.stop()

    def test_store_witness_makes_a_save_spot_checkable_and_kv_exports(self):
        # --store-witness 16 records what kv export records (its manifest differs in "producer"
        # alone, so in the seal), and kv verify --spot runs the witness again over the stored rows.
        from serve_fixture import MODEL
        work = tempfile.mkdtemp(prefix="ember-serve-witness-")
        server = None
        p = PROMPTS[2]
        try:
            server = EmberServer("--store", "dir:" + work + "/s", "--store-witness", "16")
            completion(server, p, max_tokens=2, temperature=0)
        finally:
            if server:
                server.stop()
        try:
            def ember(*args):
                r = subprocess.run([EMBER, *args], capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, " ".join(args) + ": " + r.stdout + r.stderr)
                return r.stdout
            seals = [line.split()[0] for line in ember("store", "ls", "dir:" + work + "/s").splitlines()]
            self.assertEqual(len(seals), 1, seals)
            ember("store", "get", "dir:" + work + "/s", seals[0], "-o", work + "/got")
            ember("kv", "export", "-m", MODEL, "-p", p, "-o", work + "/snap")
            saved, exported = (json.load(open(work + d + "/manifest.json")) for d in ("/got", "/snap"))
            self.assertEqual(saved["producer"], "ember serve")
            for m in (saved, exported):
                del m["producer"], m["seal"]
            self.assertEqual(saved, exported)
            self.assertEqual(len(saved["proof"]["witness_tokens"]), 16)
            spot = json.loads(ember("kv", "verify", work + "/got", "-m", MODEL, "--spot", "2", "--json"))
            self.assertEqual(spot["spot"]["witness"], {"status": "ok", "tokens": 16})
        finally:
            shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    unittest.main()
