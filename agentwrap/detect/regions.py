"""Cutting a screen into a profile's named regions.

An anchor is a line pattern (say, the ``────`` rule around a prompt box); a
region lies strictly between two boundaries such as ``rule[-2]`` and
``rule[-1]`` (the second-last and last rule lines). Regions that cannot be
found (the anchor is not on screen) are ``None``: rules on them never match,
which is the safe answer while a TUI is half drawn.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..terminal.screen import Snapshot
from .profiles import Boundary, Profile, Region


class ScreenRegions:
    """The regions of one snapshot for one profile. Anchor lines are found
    once (on first use) and shared by every region cut from this snapshot."""

    def __init__(self, profile: Profile, snap: Snapshot) -> None:
        self.profile = profile
        self.snap = snap

    @functools.cached_property
    def anchors(self) -> dict[str, list[int]]:
        return {
            name: [i for i, line in enumerate(self.snap.lines) if pat.search(line)]
            for name, pat in self.profile.anchors.items()
        }

    def get(self, name: str, *, bright: bool = False) -> list[str] | None:
        lines = list(self.snap.bright_lines() if bright else self.snap.lines)
        if name == "screen":
            return lines
        if name == "title":
            return [self.snap.title]
        if name == "last_line":
            last = self.snap.last_nonblank()
            return [last] if last else []
        return cut(self.profile.regions[name], lines, self.anchors)


def split_around(profile: Profile, snap: Snapshot, region: str) -> tuple[str, str] | None:
    """(text inside ``region``, text of every other line), or None when the
    region is not on screen. Delivery uses it to tell "still in the input
    box" from "appeared above it"."""
    lines = list(snap.lines)
    if region in ("screen", "title"):
        return None
    if region == "last_line":
        idx = max((i for i, x in enumerate(lines) if x.strip()), default=-1)
        if idx < 0:
            return None
        return lines[idx], "\n".join(lines[:idx])
    reg = profile.regions[region]
    anchors = ScreenRegions(profile, snap).anchors
    start = _position(reg.start, len(lines), anchors, is_start=True)
    end = _position(reg.end, len(lines), anchors, is_start=False)
    if start is None or end is None or end <= start:
        return None
    lo, hi = max(start + 1, 0), min(end, len(lines))
    return "\n".join(lines[lo:hi]), "\n".join(lines[:lo] + lines[hi:])


def _position(
    b: Boundary, nlines: int, anchors: Mapping[str, list[int]], *, is_start: bool
) -> int | None:
    if b.edge == "top":
        pos = -1
    elif b.edge == "bottom":
        pos = nlines
    else:
        assert b.anchor is not None
        hits = anchors.get(b.anchor, [])
        try:
            pos = hits[b.index]
        except IndexError:
            if not b.optional:
                return None
            return -1 if is_start else nlines
    return pos + b.offset


def cut(region: Region, lines: list[str], anchors: Mapping[str, list[int]]) -> list[str] | None:
    start = _position(region.start, len(lines), anchors, is_start=True)
    end = _position(region.end, len(lines), anchors, is_start=False)
    if start is None or end is None or end <= start:
        return None
    body = lines[max(start + 1, 0) : min(end, len(lines))]
    if region.last is not None:
        body = [x for x in body if x.strip()][-region.last :] if region.last > 0 else []
    return body
