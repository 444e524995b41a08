"""What the person sees: a rendered screen, the same for both backends.

Detection only ever reads a :class:`Snapshot` (tmux ``capture-pane`` or the
pty backend's virtual screen), never raw bytes: raw output is full of cursor
movement and redraws, and only the rendered screen says what is current.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Snapshot:
    lines: tuple[str, ...]  # one per screen row, trailing blanks stripped
    cols: int
    rows: int
    cursor: tuple[int, int] = (0, 0)  # (row, col)
    title: str = ""
    at: float = 0.0
    digest: str = field(default="", compare=False)

    @classmethod
    def from_text(
        cls,
        text: str,
        *,
        cols: int | None = None,
        rows: int | None = None,
        cursor: tuple[int, int] = (0, 0),
        title: str = "",
        at: float = 0.0,
    ) -> Snapshot:
        raw = text.split("\n")
        if raw and raw[-1] == "" and text.endswith("\n"):
            raw.pop()
        lines = tuple(line.rstrip() for line in raw)
        if rows is not None:
            lines = (lines + ("",) * rows)[:rows]
        width = cols if cols is not None else max((len(x) for x in lines), default=0)
        return cls(
            lines=lines,
            cols=width,
            rows=rows if rows is not None else len(lines),
            cursor=cursor,
            title=title,
            at=at,
            digest=_digest(lines, title),
        )

    def text(self) -> str:
        return "\n".join(self.lines)

    def last_nonblank(self) -> str:
        for line in reversed(self.lines):
            if line.strip():
                return line
        return ""

    def contains(self, needle: str) -> bool:
        return needle in self.text()


def _digest(lines: tuple[str, ...], title: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for line in lines:
        h.update(line.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    h.update(title.encode("utf-8", "surrogatepass"))
    return h.hexdigest()
