"""KVC1 reader and writer, byte-compatible with ember's C++ (src/kv/kvc1.cpp).

Layout (little-endian): preamble 32 B (magic "KVC1", u16 version 2, u16 flags 0, u64 file_length,
u64 header_length, u32 n_tensors, u8 kind 1=native/2=mapped, 3 B reserved 0), canonical JSON
header (its artifact.kind names the same kind), zero pad to 8, tensor
table (80 B per tensor: u32 layer, u8 kind 0=K/1=V, u8 dtype 1=f16/2=bf16/3=f32, u16 0,
u64 shape[3] = [kv_heads, positions, head_dim], u64 offset, u64 length, 32 B SHA-256), zero pad
to 64, payloads each at the next multiple of 64, zero pad to 64, 32-byte SHA-256 trailer over
everything before it. Every rejection raises KVC1Error with the same name as the C++ reader.
"""
import hashlib
import json
import mmap
import os
import struct
import tempfile

import numpy as np

MAGIC = b"KVC1"
VERSION = 2  # 2: the kind byte at offset 28 (version 1 had a reserved u32 there)
FORMAT = "ember.kvc1"
PREAMBLE = 32
ENTRY = 80
ALIGN = 64
MAX_HEADER = 64 << 20
DTYPES = {1: ("f16", np.dtype("<f2")), 2: ("bf16", np.dtype("<u2")), 3: ("f32", np.dtype("<f4"))}
DTYPE_CODES = {name: code for code, (name, _) in DTYPES.items()}
# What a container holds (src/kv/kvc1.h kKvc1Kinds): preamble byte 28 and header artifact.kind.
KINDS = {1: "native", 2: "mapped", 3: "foreign"}
KIND_CODES = {name: code for code, name in KINDS.items()}
_ENTRY = struct.Struct("<IBBH3QQQ32s")
_PREAMBLE = struct.Struct("<4sHHQQIB3s")


class KVC1Error(ValueError):
    """A refused KVC1 file. `code` is the rule's name (docs/formats/kvc1.md), e.g. 'unknown-dtype'."""

    def __init__(self, code, where, field, expected, found):
        super().__init__(f"{where}: [{code}] {field}: expected {expected}, found {found}")
        self.code = code


def canonical_json(value):
    """The header text: sorted keys, no whitespace, UTF-8 unescaped (nlohmann's dump())."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def manifest_seal(manifest):
    """The seal of an ember manifest (docs/reliability.md, src/kv/seal.h): SHA-256 of the
    canonical JSON of the manifest without its "seal" and "signature" members."""
    body = {k: v for k, v in manifest.items() if k not in ("seal", "signature")}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def _align(x, a):
    return (x + a - 1) // a * a


def layout(header_bytes, lengths):
    """Canonical payload offsets and the file length."""
    table = _align(PREAMBLE + header_bytes, 8)
    pos = _align(table + ENTRY * len(lengths), ALIGN)
    offsets = []
    for n in lengths:
        offsets.append(pos)
        pos = _align(pos + n, ALIGN)
    return offsets, pos + 32


class Tensor:
    """One payload: layer, kind ('K' or 'V'), dtype name and a read-only numpy view
    [kv_heads, positions, head_dim] (bf16 as raw uint16 bit patterns)."""

    def __init__(self, layer, kind, dtype, array):
        self.layer, self.kind, self.dtype, self.array = layer, kind, dtype, array


class Kvc1:
    """A verified container. artifact_kind: "native" | "mapped" (the preamble's kind byte and
    the header's artifact.kind, which agree)."""

    def __init__(self, path, header, tensors, trailer):
        self.path, self.header, self.tensors, self.trailer = path, header, tensors, trailer

    @property
    def state(self):
        return self.header["state"]

    @property
    def artifact_kind(self):
        return self.header["artifact"]["kind"]

    def layer(self, i):
        """(K, V) numpy arrays of layer i, [kv_heads, positions, head_dim]."""
        return self.tensors[2 * i].array, self.tensors[2 * i + 1].array


def _is_hex64(s):
    return isinstance(s, str) and len(s) == 64 and all(c in "0123456789abcdef" for c in s)


def _unsigned(geo, key, lo, hi, where):
    v = geo.get(key) if isinstance(geo, dict) else None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise KVC1Error("bad-header", where, f"state.geometry.{key}", "an unsigned integer", json.dumps(v))
    if not lo <= v <= hi:
        raise KVC1Error("bad-header", where, f"state.geometry.{key}", f"{lo}..{hi}", v)
    return v


def check_header(h, where):
    """Container-level header rules; returns (layers, shape, dtype name, kind code)."""
    if not isinstance(h, dict):
        raise KVC1Error("bad-header", where, "header", "a JSON object", type(h).__name__)
    for k in h:
        if k not in ("artifact", "format", "state"):
            raise KVC1Error("bad-header", where, f"header.{k}", "only artifact, format, state", "unknown field")
    for k in ("artifact", "format", "state"):
        if k not in h:
            raise KVC1Error("bad-header", where, f"header.{k}", "a field", "none")
    if h["format"] != FORMAT:
        raise KVC1Error("bad-header", where, "format", f'"{FORMAT}"', json.dumps(h["format"]))
    # artifact is {"kind": K} only: what a kind carries beyond its name is in its sealed state.
    a = h["artifact"]
    kind = a.get("kind") if isinstance(a, dict) else None
    names = "|".join(KIND_CODES)
    if kind not in KIND_CODES:
        raise KVC1Error("bad-header", where, "artifact.kind", names, json.dumps(kind))
    if len(a) != 1:
        raise KVC1Error("bad-header", where, "artifact", f'only {{"kind":"{kind}"}}', json.dumps(a))
    s = h["state"]
    if not isinstance(s, dict) or not isinstance(s.get("geometry"), dict):
        raise KVC1Error("bad-header", where, "state.geometry", "an object", "none")
    g = s["geometry"]
    layers = _unsigned(g, "layers", 1, 1024, where)
    shape = (_unsigned(g, "kv_heads", 1, 1024, where), _unsigned(g, "positions", 1, 1 << 22, where),
             _unsigned(g, "head_dim", 1, 4096, where))
    rep = s.get("representation")
    dtype = rep.get("dtype") if isinstance(rep, dict) else None
    if not isinstance(dtype, str):
        raise KVC1Error("bad-header", where, "state.representation.dtype", "f16|bf16|f32", "none")
    if dtype not in DTYPE_CODES:
        raise KVC1Error("unknown-dtype", where, "state.representation.dtype", "f16|bf16|f32", f'"{dtype}"')
    return layers, shape, dtype, KIND_CODES[kind]


def _bytes_of(a):
    """A flat byte view of a C-contiguous array, without a copy."""
    return memoryview(a).cast("B")


def write_kvc1(path, header, tensors, force=False):
    """Writes a KVC1 file atomically, streaming. tensors: a sequence in table order (layer 0 K,
    layer 0 V, ...) whose items are numpy arrays [kv_heads, positions, head_dim] of the
    header's state.representation.dtype (float16, float32, or uint16 bit patterns for bf16),
    e.g. views into a memory-mapped source, or zero-argument callables returning one (so a
    caller can produce each tensor on demand, e.g. from torch). Like the C++ writer it reads
    each tensor twice (a hash pass, then the write pass, re-hashed and compared) and never holds
    the file or a copy of the cache in memory: at most one tensor is converted at a time.
    Returns the 32-byte trailer."""
    layers, shape, dtype, kind = check_header(header, path)
    np_dtype = DTYPES[DTYPE_CODES[dtype]][1]
    if len(tensors) != 2 * layers:
        raise ValueError(f"{path}: tensors: expected {2 * layers}, found {len(tensors)}")

    def payload(i):
        t = tensors[i]
        a = np.asarray(t() if callable(t) else t)
        if tuple(a.shape) != shape or a.dtype.itemsize != np_dtype.itemsize or a.dtype.kind != np_dtype.kind:
            raise ValueError(f"{path}: tensor {i}: expected {shape} {dtype}, found {a.shape} {a.dtype}")
        return np.ascontiguousarray(a.astype(np_dtype, copy=False))

    digests = [hashlib.sha256(_bytes_of(payload(i))).digest() for i in range(len(tensors))]
    text = canonical_json(header).encode("utf-8")
    length = int(np.prod(shape)) * np_dtype.itemsize
    offsets, file_length = layout(len(text), [length] * len(tensors))
    if os.path.exists(path) and not force:
        raise FileExistsError(f"{path}: already exists; refusing to overwrite it (pass force=True)")
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            trailer = hashlib.sha256()
            pos = 0

            def put(b):
                nonlocal pos
                trailer.update(b)
                f.write(b)
                pos += len(b)

            put(_PREAMBLE.pack(MAGIC, VERSION, 0, file_length, len(text), len(tensors), kind, b"\0\0\0"))
            put(text)
            put(b"\0" * (_align(pos, 8) - pos))
            for i, (digest, off) in enumerate(zip(digests, offsets)):
                put(_ENTRY.pack(i // 2, i % 2, DTYPE_CODES[dtype], 0, *shape, off, length, digest))
            for i, off in enumerate(offsets):
                put(b"\0" * (off - pos))
                view = _bytes_of(payload(i))
                if hashlib.sha256(view).digest() != digests[i]:
                    raise ValueError(f"{path}: tensor {i}: the source changed between the hash and the write passes")
                put(view)
            put(b"\0" * (_align(pos, ALIGN) - pos))
            digest = trailer.digest()
            f.write(digest)
            assert pos + 32 == file_length
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return digest


def _strict_object_pairs(where):
    def hook(pairs):
        obj = {}
        for k, v in pairs:
            if k in obj:
                raise KVC1Error("bad-header", where, f'object key "{k}"', "each key once", "a duplicate")
            obj[k] = v
        return obj
    return hook


def parse_kvc1(data, where="<bytes>"):
    """Verifies a KVC1 image (bytes, bytearray, memoryview or mmap) and returns a Kvc1 whose
    tensor arrays are read-only views into `data`."""
    buf = memoryview(data)
    size = len(buf)
    if size < PREAMBLE + 32:
        raise KVC1Error("truncated", where, "file size", f">= {PREAMBLE + 32}", size)
    magic, version, flags, file_length, header_length, n_tensors, kind, reserved = _PREAMBLE.unpack_from(buf, 0)
    if magic != MAGIC:
        raise KVC1Error("bad-magic", where, "magic", '"KVC1"', "bytes " + bytes(magic).hex())
    if version != VERSION:
        hint = " (version 1 had no kind byte: repack the snapshot)" if version == 1 else ""
        raise KVC1Error("unsupported-version", where, "version", f"{VERSION}{hint}", version)
    if flags != 0:
        raise KVC1Error("unknown-flag", where, "flags", "0 (no flag is defined in version 2)", flags)
    if kind not in KINDS:
        raise KVC1Error("unknown-kind", where, "kind", ", ".join(f"{c} ({n})" for c, n in KINDS.items()), kind)
    if reserved != b"\0\0\0":
        raise KVC1Error("nonzero-reserved", where, "reserved", "0", "bytes " + bytes(reserved).hex())
    if size < file_length:
        raise KVC1Error("truncated", where, "file size", f"{file_length} bytes (file_length)", size)
    if size > file_length:
        raise KVC1Error("trailing-bytes", where, "file size", f"{file_length} bytes (file_length)", size)
    body_end = size - 32
    if not 2 <= header_length <= MAX_HEADER:
        raise KVC1Error("bad-header", where, "header_length", f"2..{MAX_HEADER}", header_length)
    if header_length > body_end - PREAMBLE:
        raise KVC1Error("truncated", where, "header", f"{header_length} bytes", f"{body_end - PREAMBLE} before the trailer")
    raw = bytes(buf[PREAMBLE:PREAMBLE + header_length])
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_strict_object_pairs(where),
                            parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except KVC1Error:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise KVC1Error("bad-header", where, "header", "strict UTF-8 JSON", str(e)) from None
    if canonical_json(header).encode("utf-8") != raw:
        raise KVC1Error("non-canonical-header", where, "header", "canonical JSON (sorted keys, no whitespace)",
                        "other bytes of the same value")
    layers, shape, dtype, header_kind = check_header(header, where)
    if header_kind != kind:
        raise KVC1Error("unknown-kind", where, "kind", f'{header_kind} (artifact.kind "{KINDS[header_kind]}")',
                        f"{kind} ({KINDS[kind]})")
    np_dtype = DTYPES[DTYPE_CODES[dtype]][1]
    if n_tensors != 2 * layers:
        raise KVC1Error("bad-table", where, "n_tensors", f"{2 * layers} (2 x state.geometry.layers)", n_tensors)
    table = _align(PREAMBLE + header_length, 8)
    table_end = table + ENTRY * n_tensors
    if table_end > body_end:
        raise KVC1Error("truncated", where, "tensor table", f"end <= {body_end}", table_end)
    payload_start = _align(table_end, ALIGN)
    length = shape[0] * shape[1] * shape[2] * np_dtype.itemsize
    entries = []
    for i in range(n_tensors):
        name = f"tensor[{i}] (layer {i // 2} {'V' if i % 2 else 'K'})"
        layer, kind, code, res, s0, s1, s2, off, ln, digest = _ENTRY.unpack_from(buf, table + ENTRY * i)
        if res != 0:
            raise KVC1Error("nonzero-reserved", where, name + ".reserved", "0", res)
        if code not in DTYPES:
            raise KVC1Error("unknown-dtype", where, name + ".dtype", "1 (f16), 2 (bf16) or 3 (f32)", code)
        if DTYPES[code][0] != dtype:
            raise KVC1Error("unknown-dtype", where, name + ".dtype", f"{dtype} (the header's)", DTYPES[code][0])
        if layer != i // 2 or kind != i % 2:
            raise KVC1Error("bad-table", where, name + ".layer/kind", f"{i // 2}/{'V' if i % 2 else 'K'}", f"{layer}/{kind}")
        if (s0, s1, s2) != shape:
            raise KVC1Error("bad-table", where, name + ".shape", list(shape), [s0, s1, s2])
        if ln != length:
            raise KVC1Error("bad-length", where, name + ".length", length, ln)
        if off % ALIGN:
            raise KVC1Error("misaligned-offset", where, name + ".offset", "a multiple of 64", off)
        if off < payload_start or off > body_end or ln > body_end - off:
            raise KVC1Error("offset-out-of-range", where, name + ".offset",
                            f"a payload inside [{payload_start}, {body_end})", f"[{off}, {off + ln})")
        entries.append((off, digest, name))
    by_offset = sorted(range(n_tensors), key=lambda i: entries[i][0])
    for a, b in zip(by_offset, by_offset[1:]):
        if entries[b][0] < entries[a][0] + length:
            raise KVC1Error("overlapping-tensors", where, entries[b][2] + ".offset",
                            f">= {entries[a][0] + length} (end of {entries[a][2]})", entries[b][0])
    canonical, canonical_length = layout(header_length, [length] * n_tensors)
    for i, (off, _, name) in enumerate(entries):
        if off != canonical[i]:
            raise KVC1Error("non-canonical-layout", where, name + ".offset", canonical[i], off)
    if file_length != canonical_length:
        raise KVC1Error("non-canonical-layout", where, "file_length", canonical_length, file_length)

    def zeros(a, b, what):
        chunk = bytes(buf[a:b])
        if chunk.count(0) != len(chunk):
            p = next(i for i, c in enumerate(chunk) if c)
            raise KVC1Error("nonzero-padding", where, what, "zero bytes", f"byte {chunk[p]} at offset {a + p}")

    zeros(PREAMBLE + header_length, table, "padding after the header")
    zeros(table_end, payload_start, "padding after the tensor table")
    for i, (off, _, name) in enumerate(entries):
        zeros(off + length, entries[i + 1][0] if i + 1 < n_tensors else body_end, "padding after " + name)
    trailer_hash = hashlib.sha256(buf[:payload_start])
    tensors = []
    for i, (off, digest, name) in enumerate(entries):
        end = entries[i + 1][0] if i + 1 < n_tensors else body_end
        payload = buf[off:off + length]
        got = hashlib.sha256(payload).digest()
        trailer_hash.update(buf[off:end])
        if got != digest:
            raise KVC1Error("tensor-hash-mismatch", where, name + ".sha256", digest.hex(), got.hex())
        arr = np.frombuffer(payload, dtype=np_dtype).reshape(shape)
        tensors.append(Tensor(i // 2, "V" if i % 2 else "K", dtype, arr))
    trailer = bytes(buf[body_end:])
    if trailer_hash.digest() != trailer:
        raise KVC1Error("trailer-hash-mismatch", where, "trailer",
                        trailer_hash.hexdigest() + " (SHA-256 of the file before it)", trailer.hex())
    return Kvc1(where, header, tensors, trailer)


def read_kvc1(path):
    """Maps and verifies a KVC1 file; tensor arrays are read-only views into the mapping."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return parse_kvc1(b"", path)
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return parse_kvc1(m, path)
