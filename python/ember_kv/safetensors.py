"""The safetensors file format, read and written here (the `safetensors` package is not
needed), with the same fail-closed rules as ember's C++ reader (src/kv/safetensors.cpp,
docs/formats/safetensors-cache.md).

Layout: u64 little-endian N, then N bytes of JSON header, then the data buffer. The header
maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
to the start of the data buffer) and may hold "__metadata__", a map of strings to strings.
Refused (SafetensorsError naming the field): N over 100 MB or past the file, a header that
is not strict UTF-8 JSON (duplicate keys included), an unknown dtype, a shape whose byte size
differs from end - begin, offsets past the buffer, overlapping tensors, holes in the buffer
or bytes after it.
"""
import json
import mmap
import os
import stat
import struct
import tempfile

import numpy as np

MAX_HEADER = 100 << 20  # the limit the reference implementation enforces
# dtype name -> numpy dtype (BF16 as uint16 bit patterns)
DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


class SafetensorsError(ValueError):
    def __init__(self, where, field, expected, found):
        super().__init__(f"{where}: {field}: expected {expected}, found {found}")
        self.field = field


def _pairs(where):
    def hook(pairs):
        obj = {}
        for k, v in pairs:
            if k in obj:
                raise SafetensorsError(where, f'header key "{k}"', "each key once", "a duplicate")
            obj[k] = v
        return obj
    return hook


def parse_header(buf, where):
    """Checks the header of a safetensors image; returns (entries, metadata, data_start) with
    entries {name: (dtype, shape tuple, begin, end)} (absolute byte offsets)."""
    size = len(buf)
    if size < 8:
        raise SafetensorsError(where, "header length", "8 bytes", f"a {size}-byte file")
    (n,) = struct.unpack_from("<Q", buf, 0)
    if n < 2 or n > MAX_HEADER:
        raise SafetensorsError(where, "header length", f"2..{MAX_HEADER}", n)
    if n > size - 8:
        raise SafetensorsError(where, "header length", f"<= {size - 8} (the bytes after it)", n)
    try:
        header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"), object_pairs_hook=_pairs(where),
                            parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except SafetensorsError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise SafetensorsError(where, "header", "strict UTF-8 JSON", str(e).splitlines()[0][:200]) from None
    if not isinstance(header, dict):
        raise SafetensorsError(where, "header", "a JSON object", type(header).__name__)
    data_start = 8 + n
    data_size = size - data_start
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError(where, "__metadata__", "an object of strings", json.dumps(metadata)[:200])
    entries = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        f = f"tensor {json.dumps(name)[:200]}"
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(where, f, "an object with exactly dtype, shape, data_offsets",
                                   json.dumps(e)[:200])
        dt = e["dtype"]
        if dt not in DTYPES:
            raise SafetensorsError(where, f + ".dtype", "one of " + "|".join(DTYPES), json.dumps(dt)[:40])
        shape = e["shape"]
        if not isinstance(shape, list) or len(shape) > 8 or not all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d < (1 << 40) for d in shape):
            raise SafetensorsError(where, f + ".shape", "up to 8 non-negative integers", json.dumps(shape)[:200])
        off = e["data_offsets"]
        if not (isinstance(off, list) and len(off) == 2 and all(
                isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in off)):
            raise SafetensorsError(where, f + ".data_offsets", "[begin, end] non-negative integers",
                                   json.dumps(off)[:200])
        begin, end = off
        if begin > end or end > data_size:
            raise SafetensorsError(where, f + ".data_offsets", f"begin <= end <= {data_size} (the data buffer)",
                                   f"[{begin}, {end}]")
        count = 1
        for d in shape:
            count *= d
        if count * DTYPES[dt].itemsize != end - begin:
            raise SafetensorsError(where, f + ".data_offsets", f"{count * DTYPES[dt].itemsize} bytes ({dt} {shape})",
                                   f"{end - begin}")
        entries[name] = (dt, tuple(shape), data_start + begin, data_start + end)
    pos = data_start
    for name, (_, _, b, e) in sorted(entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if b < pos:
            raise SafetensorsError(where, f"tensor {json.dumps(name)[:200]}.data_offsets",
                                   f"begin >= {pos - data_start} (no overlap)", b - data_start)
        if b > pos:
            raise SafetensorsError(where, f"tensor {json.dumps(name)[:200]}.data_offsets",
                                   f"begin {pos - data_start} (no hole in the data buffer)", b - data_start)
        pos = e
    if pos != size:
        raise SafetensorsError(where, "file size", f"{pos} (end of the last tensor)", size)
    return entries, metadata, data_start


class Safetensors:
    """A checked, memory-mapped safetensors file: tensors(name) gives a read-only numpy view."""

    def __init__(self, path):
        self.path = path
        # Checked before opening: open() of a FIFO would block until a writer came.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SafetensorsError(path, "file", "a regular file", "another kind of file (FIFO, directory, device)")
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self.entries, self.metadata, _ = parse_header(memoryview(self._map), path)

    def names(self):
        return list(self.entries)

    def dtype(self, name):
        return self.entries[name][0]

    def tensor(self, name):
        dt, shape, b, e = self.entries[name]
        return np.frombuffer(memoryview(self._map)[b:e], dtype=DTYPES[dt]).reshape(shape)


def read_safetensors(path):
    """{name: numpy array} (copies) and the metadata."""
    st = Safetensors(path)
    return {n: np.array(st.tensor(n)) for n in st.names()}, dict(st.metadata)


def write_safetensors(path, tensors, metadata=None, force=False):
    """Writes {name: (dtype name, numpy array)} or {name: numpy array} (F32/F16/F64/I*/U* by
    the array's dtype; BF16 must be given explicitly with uint16 bits) atomically, tensors in
    the order given, header padded with spaces to a multiple of 8 (as the reference writer).
    Streams: each tensor is written from its own array, nothing is concatenated."""
    items = []
    for name, t in tensors.items():
        dt, a = t if isinstance(t, tuple) else (None, t)
        a = np.ascontiguousarray(a)
        if dt is None:
            dt = next((k for k, v in DTYPES.items() if v == a.dtype.newbyteorder("<") and k != "U16"), None) \
                if a.dtype != np.uint16 else "U16"
            if dt is None:
                raise ValueError(f"{path}: tensor {name}: no safetensors dtype for numpy {a.dtype}")
        if DTYPES[dt].itemsize != a.dtype.itemsize:
            raise ValueError(f"{path}: tensor {name}: {dt} needs {DTYPES[dt].itemsize}-byte elements, found {a.dtype}")
        items.append((name, dt, a.view(DTYPES[dt])))
    header, pos = {}, 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, dt, a in items:
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [pos, pos + a.nbytes]}
        pos += a.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    if os.path.exists(path) and not force:
        raise FileExistsError(f"{path}: already exists; refusing to overwrite it (pass force=True)")
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for _, _, a in items:
                f.write(a.reshape(-1).view(np.uint8).data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
