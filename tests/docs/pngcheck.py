"""Read a screenshot's pixels with the standard library (8-bit RGB/RGBA PNG, not interlaced, as
Chromium writes them), to tell a rendered page from a blank or unstyled one."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from pathlib import Path


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows): each row the pixels' RGB bytes, alpha dropped."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    if header is None:
        raise ValueError(f"{path}: no IHDR")
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA, not interlaced (got depth {depth}, color {color})")
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up = prev[i]
            up_left = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[i] = (line[i] + pred) & 0xFF
        prev = line
        rows.append(bytes(line) if bpp == 3 else bytes(b for j in range(0, stride, 4) for b in line[j:j + 3]))
    return width, height, rows


def pixels(rows: list[bytes], y0: int = 0, y1: int | None = None, step: int = 2) -> Counter:
    """How often each RGB colour occurs in rows y0..y1 (every ``step``-th pixel of every ``step``-th row)."""
    count: Counter = Counter()
    for row in rows[y0:y1:step]:
        for x in range(0, len(row) - 2, 3 * step):
            count[row[x:x + 3]] += 1
    return count


def near(colours: Counter, rgb: tuple[int, int, int], tolerance: int = 12) -> int:
    """How many of the counted pixels lie within ``tolerance`` of ``rgb`` in every channel."""
    return sum(n for c, n in colours.items() if all(abs(c[i] - rgb[i]) <= tolerance for i in range(3)))
