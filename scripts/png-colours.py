#!/usr/bin/env python3
"""Is this PNG a drawn page? Exit 0 when it decodes and holds at least MIN distinct colours
(a blank or failed screenshot holds one or two), else 1 with one line saying why.
Standard library only (zlib): 8-bit RGB/RGBA, non-interlaced, as Chromium writes them.

Usage: png-colours.py FILE.png [MIN=8]
"""
import struct
import sys
import zlib


def colours(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("unsupported PNG (depth %d, colour type %d, interlace %d)" % (depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    prev, seen, p = bytearray(stride), set(), 0
    for _ in range(h):
        f, line = raw[p], bytearray(raw[p + 1:p + 1 + stride])
        p += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for i in range(0, stride, bpp * 4):  # every 4th pixel is plenty for a count
            seen.add(bytes(line[i:i + 3]))
        prev = line
    return w, h, len(seen)


def main():
    path, need = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8
    try:
        w, h, n = colours(path)
    except (OSError, ValueError, zlib.error, struct.error, TypeError) as e:
        print("%s: unreadable (%s)" % (path, e))
        return 1
    ok = n >= need
    print("%s: %dx%d, %d distinct colours%s" % (path, w, h, n, "" if ok else " (blank? expected >= %d)" % need))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
