"""The seam every terminal backend implements, and what only some backends can do.

:class:`Terminal` is what every backend offers. The rest are optional
capabilities, each a protocol of its own that a backend has or has not (tmux
has a status line and a dead pane to remove; the pty backend has an output
pipe of its own): whoever wants one asks with ``isinstance(term, StatusLine)``
against the protocol, so what a backend may offer is written down here, not
spelled as attribute names at the places that use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from ..errors import BackendError
from .screen import Snapshot

# Named keys agentwrap may send, as the bytes a terminal would produce. Names
# follow tmux so the tmux backend can pass them through; anything not in this
# table is refused, so message text can never be mistaken for a key.
KEYS: dict[str, bytes] = {
    "Enter": b"\r",
    "C-m": b"\r",
    "C-j": b"\n",
    "Tab": b"\t",
    "Space": b" ",
    "BTab": b"\x1b[Z",
    "Escape": b"\x1b",
    "M-Enter": b"\x1b\r",
    "BSpace": b"\x7f",
    "C-a": b"\x01",
    "C-c": b"\x03",
    "C-d": b"\x04",
    "C-e": b"\x05",
    "C-k": b"\x0b",
    "C-u": b"\x15",
    "Up": b"\x1b[A",
    "Down": b"\x1b[B",
    "Right": b"\x1b[C",
    "Left": b"\x1b[D",
    "y": b"y",
    "n": b"n",
    "1": b"1",
    "2": b"2",
}

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"


def key_bytes(key: str) -> bytes:
    try:
        return KEYS[key]
    except KeyError:
        raise BackendError(
            f"unknown key name {key!r}", hint=f"use one of: {', '.join(sorted(KEYS))}"
        ) from None


class Terminal(Protocol):
    """One agent's terminal. Implementations: tmux (libtmux) and pty (pexpect)."""

    backend: str

    def send_text(self, text: str) -> None:
        """Type literal text (never interpreted as key names)."""

    def send_key(self, key: str) -> None:
        """Press one named key from :data:`KEYS`."""

    def paste(self, text: str, *, bracketed: bool = True) -> None:
        """Insert text as one paste (bracketed when the app enabled it)."""

    def snapshot(self) -> Snapshot:
        """The rendered screen now."""

    def alive(self) -> bool: ...

    def exit_code(self) -> int | None:
        """The agent's exit status once it is gone (128+N for signal N)."""

    def agent_pid(self) -> int | None: ...

    def resize(self, cols: int, rows: int) -> None: ...

    def user_idle_s(self) -> float | None:
        """Seconds since a person last typed, when the backend can see it."""

    def held(self) -> bool:
        """A person holds the keyboard (a page's take-over), however long since
        their last key: queued messages wait for them to give it back."""

    def close(self) -> None:
        """Stop the agent (its whole process tree) and release resources."""


@runtime_checkable
class StatusLine(Protocol):
    """A status line the backend shows the person (tmux's ``status-right``)."""

    def set_status(self, text: str) -> None:
        """Show ``text`` there until the next call (:class:`BackendError` if refused)."""


@runtime_checkable
class Display(Protocol):
    """A message shown to the person for a moment (tmux's ``display-message``)."""

    def display(self, message: str) -> None:
        """Show ``message`` as text, never run or expanded (:class:`BackendError` if refused)."""


@runtime_checkable
class OutputStream(Protocol):
    """The backend signals output on a file descriptor of its own (the pty relay)."""

    def output_fd(self) -> int:
        """Readable when output arrived since :meth:`clear_output`."""

    def clear_output(self) -> None:
        """Consume the signal and re-arm it."""


@runtime_checkable
class OutputPipe(Protocol):
    """The backend copies the agent's output into a fifo it is given (tmux ``pipe-pane``)."""

    def pipe_output(self, fifo: Path) -> None: ...


@runtime_checkable
class Removable(Protocol):
    """Something of the session outlives the agent and is removed once it ended
    (tmux: its session with the dead pane, which detaches attached clients)."""

    def kill(self) -> None: ...
