"""Unix datagram sockets in agentwrap's private runtime dir: how its processes
nudge each other (a message for a supervisor, new events for a reader, a
session for the supervisor host).

A nudge carries nothing that matters: the facts are in the store, so a lost
datagram costs latency, never data. Sockets live only in private dirs of ours
(:func:`~agentwrap.paths.private_dir` refuses anything else) and are 0600:
only their owner can reach or replace them.
"""

from __future__ import annotations

import os
import select
import socket
from pathlib import Path

from .paths import Paths, private_dir


def send(path: Path, data: bytes) -> bool:
    """One datagram to the socket at ``path``; False if nobody is listening."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendto(data, str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Inbox:
    """The receiving end: a nonblocking datagram socket bound at ``path``
    (a stale socket file left by a dead process is replaced)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        private_dir(path.parent, repair=False)
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        os.chmod(path, 0o600)
        self.sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self) -> list[bytes]:
        """Every datagram waiting now (never blocks)."""
        out: list[bytes] = []
        while True:
            try:
                out.append(self.sock.recv(256))
            except BlockingIOError:
                return out

    def wait(self, timeout: float) -> bool:
        """Block until a datagram or ``timeout``; True (and drained) if one came."""
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        return bool(ready) and bool(self.drain())

    def close(self) -> None:
        self.sock.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> Inbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The wake-up of a hook's state signal (:mod:`agentwrap.sessions.signals`): the
#: supervisor looks at the screen again; there is nothing new to deliver, so it
#: runs no queue turn for it (issue 27: a turn's end signal came ~40-250 ms
#: before Claude repainted its prompt, and the queue turn it started, a few
#: store reads that take 100+ ms on a loaded machine, held the loop past it).
SIGNAL = b"signal"


def only_signals(commands: list[bytes]) -> bool:
    """True when every wake-up is a state signal's (no queue turn wanted)."""
    return bool(commands) and all(c == SIGNAL for c in commands)


def wake(paths: Paths, session: str, command: bytes = b"wake") -> bool:
    """Wake a session's supervisor: producers (``agentwrap send``, hooks,
    servers) write to the store first, then nudge; False if nobody listens (the
    supervisor's slow safety poll finds the change anyway)."""
    return send(paths.wake_socket(session), command)


class WakeSocket(Inbox):
    """The supervisor's end, bound at the session's wake socket."""
