"""Draw the dashboard's PNG icons (static/icon-192.png, icon-512.png) from the
shapes of static/icon.svg, with the standard library only (no image library,
nothing fetched): a blue rounded square, a white prompt chevron and cursor bar.
Run it after changing icon.svg's shapes: `python scripts/make_icons.py`."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "agentwrap/surfaces/http/static"
BLUE, WHITE = (0x2F, 0x6F, 0xDF, 255), (255, 255, 255, 255)


def _seg_dist(px: float, py: float, ax: float, ay: float, bx: float, by: float) -> float:
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return float(((px - ax - t * dx) ** 2 + (py - ay - t * dy) ** 2) ** 0.5)


def pixel(x: float, y: float) -> tuple[int, int, int, int]:
    """The colour at (x, y) of the 64x64 drawing."""
    r = 14.0  # the square's corner radius
    cx, cy = min(max(x, r), 64 - r), min(max(y, r), 64 - r)
    if (x - cx) ** 2 + (y - cy) ** 2 > r * r:
        return (0, 0, 0, 0)
    if min(_seg_dist(x, y, 14, 20, 26, 32), _seg_dist(x, y, 26, 32, 14, 44)) <= 3:
        return WHITE
    if _seg_dist(x, y, 33, 43, 47, 43) <= 3:
        return WHITE
    return BLUE


def png(size: int) -> bytes:
    rows = []
    for j in range(size):
        row = bytearray(b"\0")
        for i in range(size):
            row += bytes(pixel((i + 0.5) * 64 / size, (j + 0.5) * 64 / size))
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    for n in (192, 512):
        (STATIC / f"icon-{n}.png").write_bytes(png(n))
