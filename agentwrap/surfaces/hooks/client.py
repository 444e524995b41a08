"""The Python hook's client of the supervisor's hook server: hook.c's twin.

Where the native ``agentwrap-hook`` is not built (no C compiler at install,
a stale build, ``AGENTWRAP_HOOK_CLIENT=python``), the agent runs
``python -m agentwrap hook AGENT EVENT`` at each event. That hook asks the
session's supervisor exactly as the native client does (issue 36: one
protocol, one server, one store: the hand-over datagram on the wake socket
and its own claim path are gone): the same trust checks, the same request,
the same deadlines, the same "whole answer or nothing"
(:mod:`agentwrap.hook_wire` holds what both say). When no supervisor takes
the hook (no socket, not this user's, refused, no ``ok`` in time, anything
malformed) it answers None and the caller runs the hook itself
(:func:`~.handler.handle`), as hook.c then runs the Python hook: the same
exit status and the same output either way.

It imports the standard library and :mod:`agentwrap.hook_wire` only: the
supervisor has the store, the config and the framing loaded.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import time
from collections.abc import Mapping
from pathlib import Path

from ...hook_wire import (
    ACK_WAIT_MS,
    ANSWER_WAIT_MS,
    MAX_ANSWER,
    MAX_REPLY_HEAD,
    NO_PROFILE,
    OK,
    PROFILE_ENV,
    REPLY,
    SESSION_ENV,
    VERB,
    hook_socket,
    plain,
    trusted_socket,
)

_OK = OK.encode("ascii")
_REPLY = REPLY.encode("ascii") + b" "
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def socket_for(env: Mapping[str, str]) -> Path | None:
    """The hook socket of the session the hook's environment names (the
    native client is handed it on its command line; the Python hook's
    command carries the dirs that find it)."""
    from ...paths import Paths

    session = env.get(SESSION_ENV, "")
    if not plain(session):
        return None
    return hook_socket(Paths.from_env(env), session)


def ask(path: Path, agent: str, event: str, payload: bytes,
        env: Mapping[str, str]) -> bytes | None:
    """The supervisor's answer to this hook (b"" for nothing to print), or
    None when it did not take it: then nothing ran for it, and the caller
    runs the hook itself."""
    session = env.get(SESSION_ENV, "")
    profile = env.get(PROFILE_ENV) or NO_PROFILE
    if not (plain(session) and plain(agent) and plain(event)
            and (profile == NO_PROFILE or plain(profile))):
        return None
    if len(os.fsencode(path)) >= 108 or not trusted_socket(path):
        return None
    start = time.monotonic()
    deadline = time.time() + ANSWER_WAIT_MS / 1000
    header = f"{VERB} {agent} {event} {session} {profile} {deadline:.6f} {len(payload)}\n"
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    except OSError:
        return None
    with sock:
        reply = _Reply(sock)
        try:
            sock.settimeout(ACK_WAIT_MS / 1000)
            sock.connect(os.fspath(path))
            if not _ours(sock) or not _send_all(sock, header.encode("ascii") + payload,
                                                start + ACK_WAIT_MS / 1000) \
                    or not reply.wait(False, start + ACK_WAIT_MS / 1000):
                return None  # no "ok": the supervisor runs nothing for it
        except OSError:
            return None
        try:  # it has its "ok": it never runs the hook again, whatever comes
            return reply.body if reply.wait(True, start + ANSWER_WAIT_MS / 1000) else b""
        except OSError:
            return b""


def _ours(sock: socket.socket) -> bool:
    """The process listening runs as this user (``trusted_peer`` in hook.c)."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except (OSError, AttributeError):
        return False
    return len(creds) == _UCRED.size and _UCRED.unpack(creds)[1] == os.geteuid()


def _send_all(sock: socket.socket, data: bytes, until: float) -> bool:
    view = memoryview(data)
    while view:
        left = until - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            sent = sock.send(view, socket.MSG_NOSIGNAL)
        except TimeoutError:
            return False
        view = view[sent:]
    return True


class _Reply:
    """What the server wrote so far, and whether it is a whole reply."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rx = b""
        self.eof = False
        self.body = b""

    def _take(self) -> None:
        """What is there now (never waits)."""
        while not self.eof and len(self.rx) < MAX_ANSWER + 64:
            try:
                got = self.sock.recv(MAX_ANSWER + 64 - len(self.rx), socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            if not got:
                self.eof = True
            self.rx += got

    def _complete(self, want_answer: bool) -> int:
        """-1 malformed, 0 not complete, 1 complete (``complete`` in hook.c)."""
        rx = self.rx
        if len(rx) < len(_OK):
            return 0 if _OK.startswith(rx) else -1
        if not rx.startswith(_OK):
            return -1
        if not want_answer:
            return 1
        head, nl, rest = rx[len(_OK):].partition(b"\n")
        if not nl:
            return -1 if len(head) > MAX_REPLY_HEAD else 0
        digits = head[len(_REPLY):]
        if not head.startswith(_REPLY) or not digits or not digits.isdigit() \
                or len(digits) > 8 or int(digits) > MAX_ANSWER:
            return -1
        n = int(digits)
        if len(rest) < n:
            return 0
        if len(rest) > n:
            return -1  # more than announced
        self.body = rest
        return 1

    def wait(self, want_answer: bool, until: float) -> bool:
        """True once the reply is whole; at ``until`` the reading side is shut
        *before* a last look, so what the server wrote before is read and what
        it writes after fails (it then knows: ``await_reply`` in hook.c)."""
        while True:
            self._take()
            got = self._complete(want_answer)
            if got:
                return got > 0
            if self.eof or len(self.rx) >= MAX_ANSWER + 64:
                return False
            left = until - time.monotonic()
            ready = select.select([self.sock], [], [], left)[0] if left > 0 else []
            if not ready:
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RD)
                self._take()
                return self._complete(want_answer) > 0


__all__ = ["ask", "socket_for"]
