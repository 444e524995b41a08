"""The seam every terminal backend implements."""

from __future__ import annotations

from typing import Protocol

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

    def close(self) -> None:
        """Stop the agent (its whole process tree) and release resources."""
