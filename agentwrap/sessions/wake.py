"""Waking a supervisor within milliseconds of a change.

Producers (``agentwrap send``, hooks, servers) first write the message to the
store, then send a one-datagram nudge to the session's unix socket. The nudge
carries no data that matters: if it is lost (supervisor restarting), the
supervisor's slow safety poll finds the message anyway.

The socket lives in the runtime dir, which must be a private dir of ours
(:func:`~agentwrap.paths.private_dir` refuses anything else): only its owner
can reach or replace the socket.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from ..paths import Paths, private_dir


def notify(paths: Paths, session: str, command: bytes = b"wake") -> bool:
    """Nudge a session's supervisor; False if nobody is listening."""
    return send(paths.wake_socket(session), command)


def send(path: Path, command: bytes) -> bool:
    """One datagram to the socket at ``path``; False if nobody is listening."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendto(command, str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


class WakeSocket:
    """The supervisor's end: a datagram socket bound in the runtime dir."""

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
        out: list[bytes] = []
        while True:
            try:
                out.append(self.sock.recv(256))
            except BlockingIOError:
                return out

    def close(self) -> None:
        self.sock.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
