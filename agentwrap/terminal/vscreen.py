"""A virtual screen for the pty backend, kept off the relay's hot path.

pyte renders about 1 MB/s, roughly a hundred times slower than a pty can
carry, so the relay never waits for it: :meth:`VirtualScreen.feed` only
appends bytes to a bounded backlog (microseconds), and the emulator catches
up when someone asks for a :meth:`snapshot`, in the asking thread. If output
outruns the backlog, the oldest bytes are dropped and the emulator restarts
from the tail (a "resync"): the screen may be partial until the TUI redraws,
but the person's terminal never slows down.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, NamedTuple

import pyte
from wcwidth import wcwidth

from .screen import Snapshot, with_bright
from .styles import Row, row_from_cells


class _Cell(NamedTuple):
    """pyte's Char plus ``dim``: pyte ignores SGR 2 (faint), but faint is how
    agents draw placeholders, and a placeholder is not a person's draft."""

    data: str
    fg: str = "default"
    bg: str = "default"
    bold: bool = False
    italics: bool = False
    underscore: bool = False
    strikethrough: bool = False
    reverse: bool = False
    blink: bool = False
    dim: bool = False


class _FaintScreen(pyte.Screen):
    @property
    def default_char(self) -> Any:  # a _Cell, which pyte treats as its Char
        return _Cell(data=" ")

    def select_graphic_rendition(self, *attrs: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            # CSI > ... m is not SGR (xterm's modifyOtherKeys, sent by Codex);
            # pyte routes it here with private=True, which its Screen rejects.
            return
        current: Any = self.cursor.attrs
        if not isinstance(current, _Cell):  # pyte's own Char cannot carry ``dim``
            fresh: Any = _Cell(*current)
            self.cursor.attrs = fresh
        dim = getattr(self.cursor.attrs, "dim", False)
        rest: list[int] = []
        i = 0
        codes = list(attrs) or [0]
        while i < len(codes):
            a = codes[i]
            if a in (38, 48, 58):  # extended colour: its arguments are not SGR codes
                n = 5 if i + 1 < len(codes) and codes[i + 1] == 2 else 3
                rest += codes[i : i + n]
                i += n
                continue
            if a == 2:
                dim = True
            else:
                if a in (0, 22):
                    dim = False
                rest.append(a)
            i += 1
        super().select_graphic_rendition(*rest)
        cell: Any = self.cursor.attrs
        if not isinstance(cell, _Cell):
            cell = _Cell(*cell)
        self.cursor.attrs = cell._replace(dim=dim)

_BRACKETED_ON = b"\x1b[?2004h"
_BRACKETED_OFF = b"\x1b[?2004l"


class VirtualScreen:
    def __init__(self, cols: int, rows: int, max_backlog: int = 16 * 1024) -> None:
        # 16 KB holds a full redraw of a 200x50 TUI, so a resync repaints the
        # screen, while catching up never costs more than ~20 ms of pyte.
        self.max_backlog = max_backlog
        self._lock = threading.Lock()  # guards the backlog (relay <-> reader)
        self._render = threading.Lock()  # guards the emulator
        self._chunks: deque[bytes] = deque()
        self._pending = 0
        self._dropped = 0
        self._resize: tuple[int, int] | None = None
        self._tail = b""
        self.bracketed_paste = False
        self.resyncs = 0
        self.fed_bytes = 0
        self._screen = _FaintScreen(cols, rows)
        self._stream = pyte.ByteStream(self._screen)
        self._display: list[str] = []  # rendered rows, kept between snapshots
        self._bright: list[str] = []
        # each row's cells as of its last render (a copy: pyte changes its own
        # in place), read only when someone asks for the colours
        self._cells: list[dict[int, Any]] = []
        self._rendered_size = (0, 0)

    # --- relay side: must stay cheap ------------------------------------------------

    def feed(self, data: bytes, *, track_paste_mode: bool = True) -> None:
        """Queue output for the emulator. ``track_paste_mode=False`` when the
        caller learns bracketed-paste mode elsewhere (the native relay sees
        every byte; this copy may have gaps) and sets ``bracketed_paste``."""
        if track_paste_mode:
            # Only the seam with the previous chunk is copied; the chunk itself
            # is searched in place (this runs on the relay's hot path).
            seam = self._tail + data[:8]
            if b"\x1b[?2004" in data or b"\x1b[?2004" in seam:
                window = seam + data[8:]
                on, off = window.rfind(_BRACKETED_ON), window.rfind(_BRACKETED_OFF)
                if on != off:
                    self.bracketed_paste = on > off
            self._tail = data[-8:]
        with self._lock:
            self._chunks.append(data)
            self._pending += len(data)
            while self._pending > self.max_backlog and len(self._chunks) > 1:
                self._pending -= len(self._chunks.popleft())
                self._dropped += 1
            if self._pending > self.max_backlog:
                only = self._chunks.pop()[-self.max_backlog :]
                self._chunks.append(only)
                self._pending = len(only)
                self._dropped += 1

    def discontinuity(self) -> None:
        """Bytes were lost before the next :meth:`feed` (the native relay's
        tee overflowed): what is queued no longer leads anywhere, so drop it
        and resync from what comes next, as a backlog overflow does."""
        with self._lock:
            self._chunks.clear()
            self._pending = 0
            self._dropped += 1
        self._tail = b""

    def resize(self, cols: int, rows: int) -> None:
        with self._lock:
            self._resize = (cols, rows)

    # --- reader side ------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        with self._lock:
            chunks = list(self._chunks)
            self._chunks.clear()
            self._pending = 0
            dropped, self._dropped = self._dropped, 0
            resize, self._resize = self._resize, None
        with self._render:
            if resize is not None:
                self._screen.resize(lines=resize[1], columns=resize[0])
            if dropped:
                self.resyncs += 1
                self._screen.reset()
            for chunk in chunks:
                self._stream.feed(chunk)
                self.fed_bytes += len(chunk)
            scr = self._screen
            display, bright = self._rows()
            snap = Snapshot.from_text(
                "\n".join(display),
                cols=scr.columns,
                rows=scr.lines,
                cursor=(scr.cursor.y, scr.cursor.x),
                title=scr.title or "",
                at=time.monotonic(),
            )
            cells, cols, blank = tuple(self._cells), scr.columns, scr.default_char
            return with_bright(snap, tuple(bright), styled=lambda: _styled(cells, cols, blank))

    def _rows(self) -> tuple[list[str], list[str]]:
        """(display lines, bright lines), re-rendering only the rows pyte
        marked dirty since the last snapshot: a spinner or a status line
        costs one row, not the 10,000 cells of a 200x50 screen."""
        scr = self._screen
        if self._rendered_size != (scr.columns, scr.lines):
            self._rendered_size = (scr.columns, scr.lines)
            self._display = [""] * scr.lines
            self._bright = [""] * scr.lines
            self._cells = [{} for _ in range(scr.lines)]
            dirty: set[int] | range = range(scr.lines)
        else:
            dirty = scr.dirty
        for y in dirty:
            if 0 <= y < scr.lines:
                self._display[y], self._bright[y] = self._render_row(scr.buffer[y], scr.columns)
                self._cells[y] = dict(scr.buffer[y])
        scr.dirty.clear()
        return self._display, self._bright

    @staticmethod
    def _render_row(row: Any, columns: int) -> tuple[str, str]:
        # The display line exactly as pyte's Screen.display renders it (the
        # stub cell after a wide character is skipped) ...
        chars: list[str] = []
        wide = False
        for x in range(columns):
            if wide:
                wide = False
                continue
            data = row[x].data
            wide = bool(data) and wcwidth(data[0]) == 2
            chars.append(data)
        line = "".join(chars)
        # ... and the bright line: faint cells blanked.
        if not any(getattr(row[x], "dim", False) for x in row):
            return line, line.rstrip()
        bright = "".join(
            " " if getattr(row[x], "dim", False) else row[x].data for x in range(columns)
        )
        return line, bright.rstrip()


def _styled(cells: tuple[dict[int, Any], ...], cols: int, blank: Any) -> tuple[Row, ...]:
    return tuple(row_from_cells([row.get(x, blank) for x in range(cols)]) for row in cells)
