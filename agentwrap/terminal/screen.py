"""What the person sees: a rendered screen, the same for both backends.

Detection only ever reads a :class:`Snapshot` (tmux ``capture-pane`` or the
pty backend's virtual screen), never raw bytes: raw output is full of cursor
movement and redraws, and only the rendered screen says what is current.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .styles import Row, rows_from_ansi, rows_from_text

# capture-pane -e emits SGR only; anything else is dropped defensively.
_ESC_RE = re.compile(r"\x1b\[([0-9;:]*)m|\x1b\[[0-9;:?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


@dataclass(frozen=True)
class Snapshot:
    lines: tuple[str, ...]  # one per screen row, trailing blanks stripped
    cols: int
    rows: int
    cursor: tuple[int, int] = (0, 0)  # (row, col)
    title: str = ""
    at: float = 0.0
    digest: str = field(default="", compare=False)
    # The same rows with dim (SGR 2) cells blanked: placeholders such as
    # Codex's "Ask Codex to do anything" are dim, a person's text is not.
    bright: tuple[str, ...] | None = None
    # The rows with their colours, for a person watching (issue 26): made
    # only when asked (``styled_rows``), never on the detector's path.
    styled: Callable[[], tuple[Row, ...]] | None = field(default=None, compare=False, repr=False)

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

    @classmethod
    def from_ansi(
        cls,
        text: str,
        *,
        cols: int | None = None,
        rows: int | None = None,
        cursor: tuple[int, int] = (0, 0),
        title: str = "",
        at: float = 0.0,
    ) -> Snapshot:
        """From ``capture-pane -p -e`` output (text with SGR sequences)."""
        plain: list[str] = []
        bright: list[str] = []
        dim = False
        for raw in text.split("\n"):
            p_parts: list[str] = []
            b_parts: list[str] = []
            pos = 0
            for m in _ESC_RE.finditer(raw):
                chunk = raw[pos : m.start()]
                p_parts.append(chunk)
                b_parts.append(" " * len(chunk) if dim else chunk)
                pos = m.end()
                if m.group(1) is not None:
                    dim = _sgr_dim(m.group(1), dim)
            chunk = raw[pos:]
            p_parts.append(chunk)
            b_parts.append(" " * len(chunk) if dim else chunk)
            plain.append("".join(p_parts))
            bright.append("".join(b_parts))
        if text.endswith("\n"):
            plain.pop()
            bright.pop()
        snap = cls.from_text("\n".join(plain), cols=cols, rows=rows, cursor=cursor, title=title, at=at)
        b = tuple(x.rstrip() for x in bright)
        if rows is not None:
            b = (b + ("",) * rows)[:rows]
        return with_bright(snap, b, styled=lambda: rows_from_ansi(text, rows))

    def text(self) -> str:
        return "\n".join(self.lines)

    def styled_rows(self) -> tuple[Row, ...]:
        """Each row as runs of styled text (:mod:`.styles`); plain where no
        styles were kept."""
        return self.styled() if self.styled is not None else rows_from_text(self.lines)

    def bright_lines(self) -> tuple[str, ...]:
        return self.bright if self.bright is not None else self.lines

    def last_nonblank(self) -> str:
        for line in reversed(self.lines):
            if line.strip():
                return line
        return ""


def _digest(lines: tuple[str, ...], title: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for line in lines:
        h.update(line.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    h.update(title.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _sgr_dim(params: str, dim: bool) -> bool:
    """Follow SGR 2 (faint) on and 0/22 off, skipping colour arguments."""
    codes = [int(x) if x.isdigit() else 0 for x in re.split("[;:]", params)] if params else [0]
    i = 0
    while i < len(codes):
        c = codes[i]
        if c in (38, 48, 58):  # extended colour: skip its arguments
            i += 5 if i + 1 < len(codes) and codes[i + 1] == 2 else 3
            continue
        if c == 2:
            dim = True
        elif c in (0, 22):
            dim = False
        i += 1
    return dim


def with_bright(
    snap: Snapshot, bright: tuple[str, ...], *,
    styled: Callable[[], tuple[Row, ...]] | None = None,
) -> Snapshot:
    return Snapshot(
        lines=snap.lines, cols=snap.cols, rows=snap.rows, cursor=snap.cursor, title=snap.title,
        at=snap.at, digest=snap.digest, bright=bright,
        styled=styled if styled is not None else snap.styled,
    )
