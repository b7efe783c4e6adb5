"""Real processes for the server tests: `ember serve` and redis-server on free loopback ports,
started, waited for with bounded loops, and stopped. Nothing is mocked; only the standard
library is used (http.client is the Python client)."""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

EMBER = os.environ.get("EMBER_BINARY", "build/ember")
SHARED = os.environ.get("EMBER_SHARED_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
MODEL_ID = "stories260K.gguf"
QWEN3_CONFIG = os.path.join(SHARED, "tokenizer", "qwen3", "tokenizer_config.json")


def end_process(proc, timeout, sig=signal.SIGTERM):
    """Sends sig to a running process, waits up to timeout seconds, then kills it."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmberServer:
    """`ember serve` on a free port; the port is read from its 'listening on' line."""

    def __init__(self, *args, env=None, model=MODEL):
        if not os.path.exists(model):
            raise AssertionError(f"missing shared model {model}")  # fail, not skip
        # The server's stderr goes to a file (a pipe nobody drains could fill and block it); stop()
        # keeps its text and removes the file, so test runs leave nothing in the temp directory.
        self.log = tempfile.NamedTemporaryFile(prefix="ember-serve-", suffix=".log", delete=False)
        self.stopped_stderr = None
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen([EMBER, "serve", "-m", model, "--port", "0", *args],
                                     stdout=subprocess.DEVNULL, stderr=self.log, env=e)
        deadline = time.monotonic() + 30
        self.port = None
        while time.monotonic() < deadline and self.port is None:
            if self.proc.poll() is not None:
                self.stop()
                raise AssertionError(f"ember serve exited {self.proc.returncode}: {self.stderr()}")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.stderr())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            self.stop()
            raise AssertionError("ember serve did not start within 30 s: " + self.stderr())

    def stderr(self):
        if self.stopped_stderr is not None:
            return self.stopped_stderr
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def request(self, method, path, body=None, headers=None, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read()
        c.close()
        ctype = r.getheader("Content-Type", "")
        payload = json.loads(raw) if ctype.startswith("application/json") else raw.decode("utf-8", "replace")
        return r.status, payload, r

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def metric(self, name):
        _, text, _ = self.request("GET", "/metrics")
        m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
        return float(m.group(1)) if m else None

    def stop(self, sig=signal.SIGTERM, timeout=20):
        end_process(self.proc, timeout, sig)
        if self.stopped_stderr is None:
            self.stopped_stderr = self.stderr()
            self.log.close()
            os.unlink(self.log.name)
        return self.proc.returncode


class RedisServer:
    def __init__(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="ember-serve-redis-")
        self.proc = subprocess.Popen(["/usr/bin/redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError("redis-server did not answer within 10 s")

    def uri(self):
        return f"redis://127.0.0.1:{self.port}"

    def stop(self):
        end_process(self.proc, 5)
        shutil.rmtree(self.dir, ignore_errors=True)


def ember_run(prompt, n, *args):
    """`ember run` of the same prompt: the reference a server response must equal."""
    r = subprocess.run([EMBER, "run", "--model", MODEL, "--prompt", prompt, "-n", str(n), "--quiet", *args],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    return out[:-1] if out.endswith("\n") else out


def sse_events(raw):
    """The JSON payloads of a server-sent event stream (and '[DONE]')."""
    out = []
    for block in raw.split("\n\n"):
        block = block.strip()
        if block.startswith("data: "):
            data = block[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out
