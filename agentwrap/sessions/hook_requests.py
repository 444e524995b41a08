"""A hook asks the session's supervisor for the messages to hand over.

An agent waits for its hook at every tool call, and the hook is a new process:
loading the store, the config and the framing to hand one message over costs
~190 ms on a loaded two-core machine, over the 150 ms a hook may take. The
supervisor has all of that loaded and its store open, so a hook asks it
instead, over the session's wake socket, and imports nothing but ``socket``:

1. the hook binds a reply socket of its own in the private runtime dir and
   sends ``handover <deadline> <reply name>`` to the wake socket (no listener:
   the hook takes its own full path at once);
2. the supervisor, between two looks at the screen (or while a typed delivery
   waits for the screen), claims the due messages that fit, frames them as the
   hook would, and sends ``v1 <token>\\n<text>`` back (``v1 -\\n`` for nothing);
   only once that datagram is queued to the hook's socket are the messages
   recorded ``delivered`` through channel ``hook``; if the reply cannot be sent
   (the hook gave up and removed its socket) they go back to the queue;
3. the hook waits until its deadline, then removes its socket *before* a last
   look at it, so a reply is either read or never sent; with no answer it
   takes the full path (the claim is atomic there too: nothing is handed twice).

The supervisor claims nothing for a request whose deadline is less than
:data:`MARGIN_S` away (or passed while it claimed), so a hook that gives up
has not been sent anything: a reply is sent only while the hook still waits.
Only the socket's owner can reach it (a private dir, mode 0600), and the reply
name is a bare file name in the hooks' own dir: the supervisor never writes
elsewhere.

What a hook hands the agent is believed only from this user's supervisor
(the native client checks the same, ``hook.c``): the wake socket and its dir
must be this user's and writable by nobody else (:func:`trusted_socket`)
before a request is sent, and a reply counts only when the kernel says its
sender runs as this user (``SO_PASSCRED``); any other datagram is dropped
and the hook waits on, then takes its own path.
"""

from __future__ import annotations

import hashlib
import os
import re
import select
import socket
import stat
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import Paths, private_dir

if TYPE_CHECKING:
    from ..audit import AuditLog
    from ..delivery.handover import AckRule
    from ..queue.store import MessageStore

#: The request's first word on the wake socket.
VERB = b"handover"
#: How long a hook waits for the supervisor before its own full path.
WAIT_S = 0.4
#: The supervisor claims only while the hook will wait at least this much longer.
MARGIN_S = 0.1
#: The reply's version word.
REPLY = b"v1"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}\.sock")
_MAX_REPLY = 1 << 18  # a framed hand-over is at most ~40 KB of UTF-8
#: Mode bits that let group or others write (``UNSAFE_MODE`` in hook.c): a socket,
#: or the dir it is in, with one of them set may be anyone's.
UNSAFE_MODE = 0o022
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def trusted_socket(path: Path) -> bool:
    """``path`` is a socket of this user (the effective uid) in a dir of this
    user, neither writable by anyone else: what a hook checks before it sends
    its payload or believes an answer (``trusted_path`` in hook.c)."""
    try:
        sock, folder = os.lstat(path), os.stat(path.parent)
    except OSError:
        return False
    uid = os.geteuid()
    return (stat.S_ISSOCK(sock.st_mode) and stat.S_ISDIR(folder.st_mode)
            and sock.st_uid == folder.st_uid == uid
            and not (sock.st_mode | folder.st_mode) & UNSAFE_MODE)


def reply_dir(paths: Paths) -> Path:
    """Where hooks bind their reply sockets (private, like the runtime dir)."""
    return paths.runtime_dir / "hooks"


#: Longest unix socket path (``sun_path`` is 108 bytes on Linux, 104 elsewhere).
MAX_SOCKET_PATH = 100


def hook_socket(paths: Paths, session: str) -> Path | None:
    """The session's hook server socket (a stream socket its supervisor
    listens on for the native hook client: :mod:`agentwrap.surfaces.hooks.server`),
    in a dir of its own in the private runtime dir; a digest names it when the
    session's name would make the path too long, None when even that is."""
    boxed = paths.runtime_dir / "box" / session  # containers.box.box_dir: a container's session
    if boxed.is_dir() and not boxed.is_symlink():  # (issue 39): in the folder its container mounts
        path = boxed / "hook.sock"
        return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None
    folder = paths.runtime_dir / "hook-servers"
    path = folder / f"{session}.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        path = folder / f"{hashlib.sha256(session.encode()).hexdigest()[:16]}.sock"
    return path if len(os.fsencode(path)) <= MAX_SOCKET_PATH else None


@dataclass(frozen=True)
class Request:
    """A hook's ``handover`` request, as the supervisor reads it."""

    deadline: float  # time.time() after which the hook no longer reads a reply
    reply_to: Path


def parse(datagram: bytes, paths: Paths) -> Request | None:
    """The request in one wake datagram; None for anything else (a nudge,
    ``stop``) or a malformed one."""
    parts = datagram.split(b" ")
    if len(parts) != 3 or parts[0] != VERB:
        return None
    try:
        deadline = float(parts[1])
        name = parts[2].decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return None
    if not _NAME.fullmatch(name) or deadline != deadline:  # NaN
        return None
    return Request(deadline, reply_dir(paths) / name)


def ask(paths: Paths, session: str, *, wait_s: float = WAIT_S) -> str | None:
    """The framed text the session's supervisor hands over ("" when nothing
    is due), or None when no supervisor answered in time: then nothing was
    claimed for this hook and it takes its own path."""
    folder = reply_dir(paths)
    try:
        private_dir(folder, repair=True)
    except (OSError, ValueError):
        return None
    path = folder / f"{os.getpid()}-{os.urandom(4).hex()}.sock"  # not secrets: its import costs
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        wake = paths.wake_socket(session)
        try:
            sock.bind(str(path))
            # the kernel names each datagram's sender (only this user's replies count)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        except (OSError, AttributeError):
            return None
        deadline = time.time() + wait_s
        request = b"%s %.6f %s" % (VERB, deadline, path.name.encode("ascii"))
        try:
            if not trusted_socket(wake):  # not (surely) this user's supervisor
                raise FileNotFoundError(wake)
            sock.sendto(request, str(wake))
        except OSError:  # no supervisor listening (not started yet, or gone)
            _unlink(path)
            return None
        reply: bytes | None = None
        while reply is None:
            left = deadline - time.time()
            if left <= 0:
                break
            ready, _, _ = select.select([sock], [], [], left)
            if ready:
                reply = _recv(sock)
        if reply is None:  # removed first: nothing can be sent after the last look
            _unlink(path)
            ready, _, _ = select.select([sock], [], [], 0)
            reply = _recv(sock) if ready else None
        return _text(reply) if reply is not None else None
    finally:
        sock.close()
        _unlink(path)


def _recv(sock: socket.socket) -> bytes | None:
    """One datagram, if its sender runs as this user (else it is dropped)."""
    try:
        data, ancillary, _, _ = sock.recvmsg(_MAX_REPLY, socket.CMSG_SPACE(_UCRED.size))
    except OSError:
        return None
    for level, kind, payload in ancillary:
        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS) \
                and len(payload) >= _UCRED.size:
            return data if _UCRED.unpack(payload[:_UCRED.size])[1] == os.geteuid() else None
    return None


def _text(reply: bytes) -> str | None:
    head, sep, body = reply.partition(b"\n")
    if not sep or head.split(b" ")[0] != REPLY:
        return None
    return body.decode("utf-8", "replace")


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


#: How long the supervisor waits for the agent's SessionStart hook before it
#: types the queue after all (hooks turned off in the person's settings, an
#: agent that never ran it): from the session's start, a trust dialog aside.
START_HOOK_WAIT_S = 10.0


def awaits_start_hook(paths: Paths, session: str, started: float,
                      clock: Callable[[], float] = time.time) -> Callable[[], bool]:
    """True while the session's SessionStart hook has not run, for at most
    :data:`START_HOOK_WAIT_S` after ``started``: the hook hands the queue over
    as startup context, and typing it meanwhile would race it."""
    seen = paths.session_started(session)
    done = False

    def waiting() -> bool:
        nonlocal done
        if not done:
            done = clock() >= started + START_HOOK_WAIT_S or seen.exists()
        return not done

    return waiting


class HandoverServer:
    """The supervisor's end: answers hooks' requests from its open store."""

    def __init__(
        self, paths: Paths, session: str, store: MessageStore, audit: AuditLog,
        ack_for: AckRule, *, channel: str = "hook", limit_chars: int = 9_500,
        log: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.paths = paths
        self.session = session
        self.store = store
        self.audit = audit
        self.ack_for = ack_for
        self.channel = channel
        self.limit_chars = limit_chars
        self.log = log

    def serve(self, datagrams: list[bytes], now: Callable[[], float] = time.time) -> list[bytes]:
        """Answer the ``handover`` requests among ``datagrams``; return the rest."""
        rest: list[bytes] = []
        for d in datagrams:
            req = parse(d, self.paths) if d.startswith(VERB + b" ") else None
            if req is None:
                rest.append(d)
            else:
                self.answer(req, now)
        return rest

    def answer(self, req: Request, now: Callable[[], float] = time.time) -> None:
        """Claim, reply, then record: the messages are ``delivered`` only once
        the reply is queued to the hook's socket, else they go back."""
        from ..delivery.handover import claim

        if now() > req.deadline - MARGIN_S:
            self.log(f"hand-over request came {now() - req.deadline + MARGIN_S:.3f} s too late:"
                     " the hook takes its own path")
            return
        got = claim(
            self.store, self.session, channel=self.channel, limit_chars=self.limit_chars,
            ack_for=self.ack_for, log=self.log)
        if got is not None and now() > req.deadline - MARGIN_S / 2:
            got.release("claimed too late for the hook that asked: it takes its own path")
            return
        token = got.token.encode("ascii") if got is not None else b"-"
        body = got.text.encode("utf-8") if got is not None else b""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.sendto(REPLY + b" " + token + b"\n" + body, socket.MSG_DONTWAIT,
                        str(req.reply_to))
        except OSError as exc:
            if got is not None:
                got.release(f"the hook was gone before the hand-over reached it ({exc})")
            return
        finally:
            sock.close()
        if got is not None:
            got.delivered(self.audit, "handed to the agent's hook by the supervisor")
            self.log(f"handed {len(got.messages)} message(s) to a hook (batch {got.token});"
                     f" {got.left} still wait")


__all__ = ["MARGIN_S", "START_HOOK_WAIT_S", "UNSAFE_MODE", "VERB", "WAIT_S", "HandoverServer",
           "Request", "ask", "awaits_start_hook", "hook_socket", "parse", "reply_dir",
           "trusted_socket"]
