"""KVC1 in Python: round trips, canonical bytes, and each named rejection built by editing a
valid file (the same rules as src/kv/kvc1.cpp; test_parity.py checks the two agree on files)."""
import hashlib
import json
import os
import struct
import tempfile
import unittest

import numpy as np

from ember_kv import kvc1
from ember_kv.kvc1 import KVC1Error, parse_kvc1, read_kvc1, write_kvc1
from tests.support import SOURCE_DIR, run_ember

LAYERS, HEADS, POS, DIM = 2, 2, 5, 8


def header(dtype="f16", artifact=None):
    return {"artifact": artifact or {"kind": "native"}, "format": "ember.kvc1",
            "state": {"geometry": {"layers": LAYERS, "kv_heads": HEADS, "head_dim": DIM, "positions": POS},
                      "representation": {"dtype": dtype}, "note": "test"}}


def tensors(dtype=np.float16):
    rng = np.random.default_rng(7)
    return [rng.standard_normal((HEADS, POS, DIM)).astype(dtype) for _ in range(2 * LAYERS)]


class Kvc1Test(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "a.kvc")
        self.data = tensors()
        write_kvc1(self.path, header(), self.data)
        self.ok = open(self.path, "rb").read()

    def tearDown(self):
        self.dir.cleanup()

    def reject(self, data, code, what):
        with self.assertRaises(KVC1Error, msg=what) as cm:
            parse_kvc1(bytes(data), "x.kvc")
        self.assertEqual(cm.exception.code, code, f"{what}: {cm.exception}")
        self.assertIn(f"[{code}]", str(cm.exception))

    def entry(self, i):
        hl = struct.unpack_from("<Q", self.ok, 16)[0]
        return (32 + hl + 7) // 8 * 8 + 80 * i

    def test_round_trip_and_canonical(self):
        f = read_kvc1(self.path)
        self.assertEqual(f.header, header())
        self.assertEqual(f.artifact_kind, "native")
        for i, t in enumerate(f.tensors):
            np.testing.assert_array_equal(t.array, self.data[i])
            self.assertEqual(t.layer, i // 2)
            self.assertEqual(t.kind, "V" if i % 2 else "K")
        p2 = os.path.join(self.dir.name, "b.kvc")
        write_kvc1(p2, header(), self.data)
        self.assertEqual(open(p2, "rb").read(), self.ok)
        with self.assertRaises(FileExistsError):
            write_kvc1(p2, header(), self.data)
        f32 = os.path.join(self.dir.name, "c.kvc")
        write_kvc1(f32, header("f32"), tensors(np.float32))
        self.assertEqual(read_kvc1(f32).tensors[0].array.dtype, np.float32)

    def test_preamble_edits(self):
        ok = bytearray(self.ok)
        b = bytearray(ok); b[0] = ord("X"); self.reject(b, "bad-magic", "magic")
        b = bytearray(ok); struct.pack_into("<H", b, 4, 1); self.reject(b, "unsupported-version", "version 1")
        b = bytearray(ok); struct.pack_into("<H", b, 4, 3); self.reject(b, "unsupported-version", "version 3")
        b = bytearray(ok); struct.pack_into("<H", b, 6, 1); self.reject(b, "unknown-flag", "flag")
        for bit in range(8):  # every flip of the kind byte: unknown, or contradicting the header
            b = bytearray(ok); b[28] ^= 1 << bit; self.reject(b, "unknown-kind", f"kind bit {bit}")
        b = bytearray(ok); b[30] = 1; self.reject(b, "nonzero-reserved", "reserved")
        b = bytearray(ok); b[28] = 2  # relabelled in byte and header alike: the trailer catches it
        i = b.index(b'"kind":"native"'); b[i:i + 15] = b'"kind":"mapped"'; self.reject(b, "trailer-hash-mismatch", "relabel")
        self.reject(ok[:-1], "truncated", "one byte short")
        self.reject(ok[:40], "truncated", "cut in header")
        self.reject(ok + b"\0", "trailing-bytes", "trailing byte")

    def test_header_edits(self):
        def edit(a, b):
            self.assertEqual(len(a), len(b))
            i = self.ok.index(a)
            return self.ok[:i] + b + self.ok[i + len(a):]
        self.reject(edit(b'"native"', b'"nativf"'), "bad-header", "artifact kind")
        self.reject(edit(b'"f16"', b'"f17"'), "unknown-dtype", "header dtype")
        self.reject(edit(b'"layers":2', b'"layers":3'), "bad-table", "layers")
        self.reject(edit(b'"note":"test"', b'"note": "tes"'), "non-canonical-header", "whitespace")
        self.reject(edit(b'"note":"test"', b'"note":"no","note":"x"'[:13]), "bad-header", "malformed")

    def test_table_edits(self):
        ok = self.ok
        b = bytearray(ok); b[self.entry(1) + 5] = 7; self.reject(b, "unknown-dtype", "dtype code")
        b = bytearray(ok); struct.pack_into("<I", b, self.entry(2), 0); self.reject(b, "bad-table", "layer order")
        b = bytearray(ok); struct.pack_into("<Q", b, self.entry(0) + 40, 162); self.reject(b, "bad-length", "length")
        off0 = struct.unpack_from("<Q", ok, self.entry(0) + 32)[0]
        off1 = struct.unpack_from("<Q", ok, self.entry(1) + 32)[0]
        b = bytearray(ok); struct.pack_into("<Q", b, self.entry(1) + 32, off1 + 8); self.reject(b, "misaligned-offset", "misaligned")
        b = bytearray(ok); struct.pack_into("<Q", b, self.entry(3) + 32, 1 << 50); self.reject(b, "offset-out-of-range", "range")
        b = bytearray(ok); struct.pack_into("<Q", b, self.entry(1) + 32, off0); self.reject(b, "overlapping-tensors", "overlap")
        b = bytearray(ok); struct.pack_into("<Q", b, self.entry(0) + 32, off1); struct.pack_into("<Q", b, self.entry(1) + 32, off0)
        self.reject(b, "non-canonical-layout", "swapped")

    def test_payload_and_hash_edits(self):
        off0 = struct.unpack_from("<Q", self.ok, self.entry(0) + 32)[0]
        length = struct.unpack_from("<Q", self.ok, self.entry(0) + 40)[0]
        b = bytearray(self.ok); b[off0 + length] = 1; self.reject(b, "nonzero-padding", "padding")
        b = bytearray(self.ok); b[off0 + 3] ^= 0x10; self.reject(b, "tensor-hash-mismatch", "payload bit")
        b[self.entry(0) + 48:self.entry(0) + 80] = hashlib.sha256(bytes(b[off0:off0 + length])).digest()
        self.reject(b, "trailer-hash-mismatch", "payload and table edited")
        b = bytearray(self.ok); b[-1] ^= 1; self.reject(b, "trailer-hash-mismatch", "trailer")

    def test_mapped_artifact(self):
        p = os.path.join(self.dir.name, "m.kvc")
        write_kvc1(p, header(artifact={"kind": "mapped"}), self.data)
        self.assertEqual(read_kvc1(p).artifact_kind, "mapped")
        self.assertEqual(open(p, "rb").read()[28], kvc1.KIND_CODES["mapped"])
        with self.assertRaises(KVC1Error):  # provenance lives in the sealed state, not in artifact
            write_kvc1(os.path.join(self.dir.name, "n.kvc"), header(artifact={"kind": "mapped", "mapper_hash": "a" * 64}),
                       self.data)

    def test_python_writes_embers_bytes_for_every_kind(self):
        """Re-writing each seed ember wrote (native, mapped, f32) from its parsed header and
        tensor views gives the same bytes: the two writers are byte-compatible."""
        corpus = os.path.join(SOURCE_DIR, "fuzz", "corpus", "kvc1")
        kinds = set()
        for seed in sorted(os.listdir(corpus)):
            f = read_kvc1(os.path.join(corpus, seed))
            kinds.add(f.artifact_kind)
            out = os.path.join(self.dir.name, seed)
            write_kvc1(out, f.header, [t.array for t in f.tensors])
            self.assertEqual(open(out, "rb").read(), open(os.path.join(corpus, seed), "rb").read(), seed)
        self.assertEqual(kinds, {"native", "mapped"})

    def test_writer_streams(self):
        """A 32 MiB cache from a memory map is written with far less than its size allocated."""
        import tracemalloc
        layers, heads, pos, dim = 8, 4, 1024, 64
        src = os.path.join(self.dir.name, "src.f16")
        mm = np.lib.format.open_memmap(src, mode="w+", dtype=np.float16, shape=(2 * layers, heads, pos, dim))
        for i in range(2 * layers):
            mm[i] = np.float16(i) / 7
        mm.flush()
        mm = np.load(src, mmap_mode="r")
        h = {"artifact": {"kind": "native"}, "format": "ember.kvc1",
             "state": {"geometry": {"layers": layers, "kv_heads": heads, "head_dim": dim, "positions": pos},
                       "representation": {"dtype": "f16"}}}
        out = os.path.join(self.dir.name, "big.kvc")
        tracemalloc.start()
        write_kvc1(out, h, [mm[i] for i in range(2 * layers)])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        self.assertLess(peak, 1 << 20, f"peak {peak} bytes for a {mm.nbytes}-byte cache")
        np.testing.assert_array_equal(read_kvc1(out).tensors[5].array, mm[5])

    def test_ember_reads_what_python_writes(self):
        """The C++ reader accepts the Python writer's container, and names the same rule for
        the same edit."""
        self.assertEqual(run_ember("kvc", "inspect", self.path, "--json").returncode, 0)
        for seed in sorted(os.listdir(os.path.join(SOURCE_DIR, "fuzz", "corpus", "kvc1"))):
            p = os.path.join(SOURCE_DIR, "fuzz", "corpus", "kvc1", seed)
            read_kvc1(p)
            self.assertEqual(run_ember("kvc", "inspect", p).returncode, 0, seed)
        off0 = struct.unpack_from("<Q", self.ok, self.entry(0) + 32)[0]
        b = bytearray(self.ok)
        b[off0] ^= 1
        bad = os.path.join(self.dir.name, "bad.kvc")
        open(bad, "wb").write(b)
        proc = run_ember("kvc", "verify", bad, check=False)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("[tensor-hash-mismatch]", proc.stderr)

    def test_python_seal_equals_embers(self):
        """kvc1.manifest_seal computes the seal exactly as ember does, on a manifest ember wrote."""
        seed = os.path.join(SOURCE_DIR, "fuzz", "corpus", "manifest", "ok-stories260k-export.json")
        m = json.load(open(seed, encoding="utf-8"))
        self.assertEqual(kvc1.manifest_seal(m), m["seal"])
        m["resume"]["token"] += 1
        self.assertNotEqual(kvc1.manifest_seal(m), m["seal"])

    def test_layout_matches_docs(self):
        offsets, length = kvc1.layout(100, [160, 160])
        self.assertEqual(offsets[0] % 64, 0)
        self.assertEqual(offsets[1], offsets[0] + 192)
        self.assertEqual(length, offsets[1] + 192 + 32)


if __name__ == "__main__":
    unittest.main()
