"""A tmux pane as a browser terminal sees it: repaints to stream, keys to type.

The dashboard's terminal (issue 42) is fed by :class:`LivePane`: ``serve``
reads the pane with one tmux request (``display-message`` for the size, the
cursor and the modes, then ``capture-pane -e``: the visible screen as tmux
itself renders it, colours as SGR) and sends a browser only the rows that
changed (:func:`repaint`). The requests, and the keys, go through one
long-lived control-mode client per watched session (:mod:`.control`, shared
by every page watching it), whose ``%output`` notifications say when to look
(:meth:`LivePane.wait_change`): no process per look, nothing read while the
screen is still. That client is not a person (no terminal: the supervisor's
idle check counts tty clients only) and never sizes the window. When it is
not there, each request is a ``tmux`` process as before. Why not the raw
output (``pipe-pane``)? A pane has one pipe and the supervisor holds it.
A capture is also what makes a hostile screen inert: whatever the agent wrote
(OSC 52 clipboard writes, OSC 8 links, titles, device queries) tmux consumed,
and only SGR colours survive into the stream (anything else is dropped here
again, :func:`clean_row`), at the pane's own size.

While a person takes over from a page, the page's keys are typed as the
person's own (``send-keys -H``: the bytes a terminal sends for them) and the
take-over marker (:func:`takeover_marker`) is touched on each key:
:meth:`~.tmux.TmuxTerminal.user_idle_s` reads it as tmux's own
``session_activity``, so the delivery window waits for the person exactly as
it does for one typing in tmux.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .control import ClientGone, ControlClient
from .tmux import TAKEOVER_SUFFIX, Reply, TmuxTerminal

_FMT = "#{pane_width}\t#{pane_height}\t#{cursor_y}\t#{cursor_x}\t#{cursor_flag}\t#{keypad_cursor_flag}"
_SGR = re.compile(r"\x1b\[[0-9;:]*m")
# CSI; OSC, DCS, SOS, PM, APC (to BEL or ST, or the row's end); any other ESC x
_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|[\]PX^_][^\x07\x1b]*(\x07|\x1b\\)?|.)?")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1a\x1c-\x1f\x7f\x80-\x9f]")


def takeover_marker(runtime_dir: Path, session: str) -> Path:
    """The file whose presence says a page holds the keyboard of ``session``
    and whose mtime is when its person last pressed a key."""
    return runtime_dir / f"{session}{TAKEOVER_SUFFIX}"


def clean_row(row: str) -> str:
    """``row`` with SGR colour sequences kept and every other escape sequence
    or control character dropped (defence in depth: tmux emits only SGR)."""
    out: list[str] = []
    pos = 0
    for m in _ESCAPE.finditer(row):
        out.append(_CONTROL.sub("", row[pos:m.start()]))
        if _SGR.fullmatch(m.group(0)):
            out.append(m.group(0))
        pos = m.end()
    out.append(_CONTROL.sub("", row[pos:]))
    return "".join(out)


@dataclass(frozen=True)
class Frame:
    """One look at the pane: its size, cursor, modes and rows (SGR only)."""

    cols: int
    rows: int
    cursor: tuple[int, int]  # (row, col)
    cursor_visible: bool
    app_cursor: bool  # DECCKM: arrows as ESC O A, as the agent asked
    lines: tuple[str, ...]


class PagePane(Protocol):
    """What a page's terminal reads of a pane: :class:`LivePane` here, or
    another host's through the hub (:mod:`agentwrap.service.remote_terminal`)."""

    def changes(self) -> int: ...
    def wait_change(self, seen: int, timeout: float) -> int: ...
    def capture(self) -> Frame: ...
    def close(self) -> None: ...


#: The largest screen a host may send its hub (tmux's own limits are 10,000; a page's far less).
MAX_WIRE_COLS = 1000
MAX_WIRE_ROWS = 500


def frame_to_wire(frame: Frame, sent: Frame | None = None) -> dict[str, Any]:
    """``frame`` as a host sends it to its hub: each row that is the same as
    the frame ``sent`` before on that stream is ``None`` (a streaming reply
    changes a few rows a frame, not the screen)."""
    same = sent is not None and len(sent.lines) == len(frame.lines)
    return {"cols": frame.cols, "rows": frame.rows, "cursor": list(frame.cursor),
            "cursorVisible": frame.cursor_visible, "appCursor": frame.app_cursor,
            "lines": [None if same and sent is not None and sent.lines[i] == line else line
                      for i, line in enumerate(frame.lines)]}


def _count(data: Mapping[str, Any], key: str, low: int, high: int) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{key} is a whole number from {low} to {high}")
    return value


def frame_from_wire(data: object, prev: Frame | None = None) -> Frame:
    """The frame a host sent (:func:`frame_to_wire`; a ``None`` row is
    ``prev``'s), read as hostile data: every value checked, every row cleaned
    again (:func:`clean_row`: only SGR colours survive) and cut to what a row
    of that width can hold. ValueError for anything else."""
    if not isinstance(data, Mapping):
        raise ValueError("a frame is an object")
    cols = _count(data, "cols", 1, MAX_WIRE_COLS)
    rows = _count(data, "rows", 1, MAX_WIRE_ROWS)
    cursor, lines = data.get("cursor"), data.get("lines")
    if not (isinstance(cursor, list) and len(cursor) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 10_000 for x in cursor)):
        raise ValueError("cursor is [row, col]")
    if not isinstance(lines, list) or len(lines) != rows:
        raise ValueError("lines has one entry a row")
    old = prev.lines if prev is not None and len(prev.lines) == rows else ()
    most = cols * 32 + 64  # a row of that width with a colour change at every cell
    got: list[str] = []
    for i, line in enumerate(lines):
        if line is None:
            got.append(old[i] if old else "")
        elif isinstance(line, str):
            got.append(clean_row(line[:most]))
        else:
            raise ValueError("a row is a string or null")
    flags = (data.get("cursorVisible"), data.get("appCursor"))
    if not all(isinstance(x, bool) for x in flags):
        raise ValueError("cursorVisible and appCursor are true or false")
    return Frame(cols=cols, rows=rows, cursor=(cursor[0], cursor[1]),
                 cursor_visible=bool(flags[0]), app_cursor=bool(flags[1]), lines=tuple(got))


#: New rows of a streaming screen looked for in the old one, to find how far it scrolled.
_SCROLL_PROBES = 3
#: Most distances tried (a screen of like rows offers many): the nearest first.
_SCROLL_TRIES = 16


def _row_cost(line: str) -> int:
    return len(line) + 12  # the row and the sequences around it


def _scroll(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[int, int, int]:
    """``(k, bottom, cost)``: scrolling rows ``[0, bottom)`` up by ``k`` lines
    leaves the fewest characters of rows to send (``cost``); ``k`` 0: no
    scroll does better. An agent streaming a reply scrolls its screen a line
    at a time (Claude, Codex: above a prompt box that stays put, hence the
    region), and every row of it changed: sent whole, that was each frame's
    every row (about 140 KB/s to the page for one stream, each parsed and
    drawn again by the browser); scrolled, it is the new rows only."""
    rows = len(new)
    same = [old[i] == new[i] for i in range(rows)]
    # tail[i]: the cost of the rows i.. sent as they are (no scroll below i)
    tail = [0] * (rows + 1)
    for i in range(rows - 1, -1, -1):
        tail[i] = tail[i + 1] + (0 if same[i] else _row_cost(new[i]))
    best = (0, rows, tail[0])
    # filled[i]: the cost of rows ..i that are not blank (a scroll leaves blank rows)
    filled = [0] * (rows + 1)
    for i in range(rows):
        filled[i + 1] = filled[i] + (_row_cost(new[i]) if new[i] else 0)
    ks: set[int] = set()
    probes = [i for i in range(rows) if new[i]][:_SCROLL_PROBES]
    for i in probes:
        ks.update(j - i for j in range(i + 1, rows) if old[j] == new[i])
    for k in sorted(ks)[:_SCROLL_TRIES]:
        # the region [0, b) scrolled by k: row i < b - k shows old[i + k], b - k <= i < b blank
        head = 0  # the cost of rows [0, b - k) for the b tried
        for b in range(k + 1, rows + 1):
            i = b - k - 1  # the row that joined the shifted part
            head += 0 if new[i] == old[i + k] else _row_cost(new[i])
            cost = head + filled[b] - filled[b - k] + tail[b] + 8 + k
            if cost < best[2]:
                best = (k, b, cost)
    return best


def repaint(prev: Frame | None, new: Frame) -> str:
    """What brings a terminal showing ``prev`` (None: anything) to ``new``:
    a full repaint after a resize or at first, else a scroll when the screen
    scrolled (:func:`_scroll`: ``CSI k S`` in the region that moved; not
    line feeds at its bottom, which xterm.js takes as output scrolling by and
    syncs its viewport for, each one: the page drew later than with whole
    rows) and the rows that still differ;
    "" when nothing changed."""
    full = prev is None or (prev.cols, prev.rows) != (new.cols, new.rows) \
        or len(prev.lines) != len(new.lines)
    parts: list[str] = []
    shown: tuple[str, ...] = () if full or prev is None else prev.lines
    if shown and shown != new.lines:
        k, bottom, _ = _scroll(shown, new.lines)
        if k:
            region = bottom < new.rows
            parts.append("\x1b[0m" + (f"\x1b[1;{bottom}r" if region else "")
                         + f"\x1b[{k}S" + ("\x1b[r" if region else ""))
            shown = (*shown[k:bottom], *[""] * k, *shown[bottom:])
    for i, line in enumerate(new.lines):
        if full or i >= len(shown) or shown[i] != line:
            parts.append(f"\x1b[{i + 1};1H\x1b[0m{line}\x1b[0m\x1b[K")
    moved = full or prev is None or parts or (prev.cursor, prev.cursor_visible, prev.app_cursor) \
        != (new.cursor, new.cursor_visible, new.app_cursor)
    if not moved:
        return ""
    parts.append(f"\x1b[?1{'h' if new.app_cursor else 'l'}")
    parts.append(f"\x1b[{new.cursor[0] + 1};{new.cursor[1] + 1}H")
    parts.append("\x1b[?25h" if new.cursor_visible else "\x1b[?25l")
    return "\x1b[?25l" + "".join(parts)


POLL_S = 0.02  # how often a pane without a control client is looked at (a frame)
_shared: dict[tuple[Path, str], tuple[ControlClient, int]] = {}
_shared_lock = threading.Lock()


def _hold(socket: Path, session: str) -> ControlClient:
    """The session's control client, started by its first watcher."""
    with _shared_lock:
        client, users = _shared.get((socket, session), (None, 0))
        if client is None:
            client = ControlClient(socket, session)
        _shared[(socket, session)] = (client, users + 1)
        return client


def _release(socket: Path, session: str) -> None:
    """One watcher fewer; the last one detaches the client."""
    with _shared_lock:
        client, users = _shared.pop((socket, session), (None, 0))
        if client is None:
            return
        if users > 1:
            _shared[(socket, session)] = (client, users - 1)
            return
    client.close()


class LivePane:
    """One session's tmux pane, read and typed into by a page."""

    def __init__(self, term: TmuxTerminal, control: ControlClient | None = None,
                 socket: Path | None = None) -> None:
        self.term = term
        self.control = control
        self._socket = socket
        self._closed = False
        if control is not None:
            term.route(self._run)

    @classmethod
    def adopt(cls, socket: Path, session: str) -> LivePane:
        term = TmuxTerminal.adopt(socket, session)
        return cls(term, _hold(socket, session), socket)

    def _run(self, *args: str) -> Reply:
        """A tmux request through the control client, or a process when it is gone."""
        if self.control is not None:
            try:
                return self.control.cmd(*args)
            except ClientGone:
                pass
        return self.term.server.cmd(*args)

    def changes(self) -> int:
        """A count that moves when the pane may have changed."""
        return self.control.changes if self.control is not None else 0

    def wait_change(self, seen: int, timeout: float) -> int:
        """Block until the pane may have changed since ``seen`` (:meth:`changes`)
        or ``timeout`` passed (a client that is gone: a plain wait)."""
        if self.control is None or not self.control.alive:
            threading.Event().wait(min(timeout, POLL_S))  # no notifications: look as often as a frame
            return seen + 1
        return self.control.wait_change(seen, timeout)

    def close(self) -> None:
        """This watcher is done (the session's client goes with the last one)."""
        if self.control is not None and not self._closed and self._socket is not None:
            self._closed = True
            _release(self._socket, self.term.session)

    @property
    def marker(self) -> Path:
        return takeover_marker(self.term.runtime_dir, self.term.session)

    def capture(self) -> Frame:
        """The pane now, with one tmux call."""
        fields, screen = self.term.capture_styled(_FMT)  # AgentExited once it is gone
        head = (fields + ["0"] * 6)[:6]
        cols, rows, cy, cx, visible, app = (int(x) if x.isdigit() else 0 for x in head)
        got = [clean_row(x) for x in screen[:rows]]
        lines = tuple(got + [""] * (rows - len(got)))  # libtmux drops trailing blank rows
        return Frame(cols=cols, rows=rows, cursor=(cy, cx), cursor_visible=bool(visible),
                     app_cursor=bool(app), lines=lines)

    def keys(self, data: str) -> None:
        """Type ``data`` (the bytes a terminal sends for the keys pressed) as
        the person's own keys."""
        self.term.send_text(data)

    def paste(self, text: str) -> None:
        """Paste ``text`` (bracketed when the agent enabled it: tmux knows)."""
        self.term.paste(text)

    def resize(self, cols: int, rows: int) -> None:
        self.term.resize(cols, rows)
