"""A tiny GGUF reader (numpy): metadata and F32/F16/Q8_0 tensors, for the reference forward
pass of the parity gate and the llama.cpp rounding model. Independent of ember's C++ reader on
purpose. GGUF v2/v3, little-endian."""
import mmap
import struct

import numpy as np

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_TENSOR_TYPES = {0: np.dtype("<f4"), 1: np.dtype("<f2")}
Q8_0 = 8
# Q8_0: blocks of 32 values, each an f16 scale d followed by 32 int8 codes; value = d * code.
_Q8_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "i1", 32)])


class GgufError(ValueError):
    pass


class Gguf:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        b = memoryview(self._map)
        self._pos = 0
        self._buf = b
        if bytes(self._take(4)) != b"GGUF":
            raise GgufError(f"{path}: magic: expected GGUF")
        self.version = self._u(("<I"))
        if self.version not in (2, 3):
            raise GgufError(f"{path}: version: expected 2 or 3, found {self.version}")
        n_tensors, n_kv = self._u("<Q"), self._u("<Q")
        self.metadata = {}
        for _ in range(n_kv):
            key = self._str()
            self.metadata[key] = self._value(self._u("<I"))
        infos = []
        for _ in range(n_tensors):
            name = self._str()
            n_dims = self._u("<I")
            dims = [self._u("<Q") for _ in range(n_dims)]
            ttype, offset = self._u("<I"), self._u("<Q")
            infos.append((name, dims, ttype, offset))
        align = int(self.metadata.get("general.alignment", 32))
        data = (self._pos + align - 1) // align * align
        self.tensor_types = {}
        self._tensors = {}
        for name, dims, ttype, offset in infos:
            self.tensor_types[name] = ttype
            n = int(np.prod(dims)) if dims else 1
            start = data + offset
            if ttype == Q8_0:
                if dims[0] % 32:
                    raise GgufError(f"{path}: tensor {name}: Q8_0 row length {dims[0]} is not a multiple of 32")
                size = n // 32 * _Q8_0_BLOCK.itemsize
                if start + size > len(b):
                    raise GgufError(f"{path}: tensor {name}: data out of range")
                blocks = np.frombuffer(b[start:start + size], dtype=_Q8_0_BLOCK)
                self._tensors[name] = (blocks["d"].astype(np.float64)[:, None] * blocks["qs"]).reshape(dims[::-1])
                continue
            if ttype not in _TENSOR_TYPES:
                continue  # other quantized types: not needed by the Python tools
            dt = _TENSOR_TYPES[ttype]
            if start + n * dt.itemsize > len(b):
                raise GgufError(f"{path}: tensor {name}: data out of range")
            # GGML dims are innermost first; numpy shape is the reverse.
            self._tensors[name] = np.frombuffer(b[start:start + n * dt.itemsize], dtype=dt).reshape(dims[::-1])

    def _take(self, n):
        if self._pos + n > len(self._buf):
            raise GgufError(f"{self.path}: truncated at offset {self._pos}")
        v = self._buf[self._pos:self._pos + n]
        self._pos += n
        return v

    def _u(self, fmt):
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _str(self):
        return bytes(self._take(self._u("<Q"))).decode("utf-8")

    def _value(self, t):
        if t in _SCALARS:
            return self._u(_SCALARS[t])
        if t == 8:
            return self._str()
        if t == 9:
            at, n = self._u("<I"), self._u("<Q")
            return [self._value(at) for _ in range(n)]
        raise GgufError(f"{self.path}: unknown metadata type {t}")

    def tensor(self, name):
        """f64 copy of a F32/F16 tensor (Q8_0: dequantized), numpy shape (rows, row_length)."""
        if name not in self.tensor_types:
            raise GgufError(f"{self.path}: no tensor {name}")
        if name not in self._tensors:
            raise GgufError(f"{self.path}: tensor {name} has type {self.tensor_types[name]}; this reader handles F32/F16/Q8_0 only")
        return self._tensors[name].astype(np.float64)

    def has(self, name):
        return name in self.tensor_types
