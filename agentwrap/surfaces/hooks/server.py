"""The supervisor runs the agent's hooks for the native hook client (issue 27).

Every hook is a process the agent waits for: a prompt waits for
``UserPromptSubmit``, each tool step for ``PostToolBatch``. Python alone takes
~50 ms to start, so a ``python -m agentwrap hook`` costs 60-170 ms per event.
The native client (``agentwrap/terminal/_native/hook.c``) starts in a
millisecond and hands the hook to the session's supervisor, which has Python,
the config and the store loaded, over a stream socket in the private runtime
dir (:func:`agentwrap.hook_wire.hook_socket`). The supervisor runs the
very :func:`~.handler.handle` the Python hook runs, in a thread of its own.
The Python hook, where the native client is not built, is this server's
second client (:mod:`.client`: the same request, checks and deadlines);
:mod:`agentwrap.hook_wire` holds what the three say to each other.

The exchange, all of it bounded by the client's deadlines:

1. the client sends ``awhook1 AGENT EVENT SESSION PROFILE DEADLINE LENGTH\\n``
   and the hook's stdin (``PROFILE`` ``-`` for none; ``DEADLINE``: epoch
   seconds after which it no longer reads an answer);
2. the server reads it whole (at most :data:`~agentwrap.hook_wire.MAX_STDIN`), and answers
   ``ok\\n`` if it will run the hook: a malformed or hostile request, another
   session's, one too close to its deadline, or too many at once get no
   ``ok`` (the connection is closed) and the client runs the Python hook
   itself, which then behaves exactly as without the client;
3. the client that has its ``ok`` never runs the hook again: it waits for
   ``v1 LENGTH\\n`` and the answer, prints it whole or nothing.

The agent waits for that answer, so it leaves as soon as it is known: a state
signal, which prints nothing, is answered with the ``ok`` and run after; a
hand-over or a permission request once claimed or decided, and what the
answer does not depend on (recording the hand-over ``delivered``, the handoff
notes, a dialog's request for the supervisor) follows it
(:func:`~.handler.handle`'s ``later``).

A client that gives up shuts its socket's reading side *before* its last look,
so what the server wrote before that is read and what it writes after fails:
an ``ok`` the client never read is never followed by a run, and the messages
a hand-over claimed are recorded ``delivered`` only once the whole answer was
written, else they go back to the queue.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...hook_wire import (
    MAX_HEADER,
    MAX_STDIN,
    NO_PROFILE,
    OK,
    PROFILE_ENV,
    REPLY,
    SESSION_ENV,
    VERB,
    hook_socket,
)
from ...paths import Paths, private_dir
from .handler import CHANNEL, HookRun, handle, open_keeping_store
from .protocol import CONTEXT, EVENTS, MAX_CONTEXT_CHARS, QUESTION, action

if TYPE_CHECKING:
    from ...answers.store import AnswerStore
    from ...delivery.handover import Claimed
    from ...service import Service

log = logging.getLogger("agentwrap.hooks.server")

_VERB, _OK, _REPLY = (w.encode("ascii") for w in (VERB, OK, REPLY))
#: The server runs a hook only while the client will wait at least this long
#: (a hand-over is claimed, framed and written well within it).
MIN_LEFT_S = 1.0
#: How long the server waits for the rest of a request the client sends.
READ_WAIT_S = 2.0
#: Hooks run at once; more are refused (their clients run the Python hook).
MAX_RUNNING = 8
#: How often a thread waiting for the GIL gets it from one holding it, while a
#: hook server runs in the process (Python's default: 5 ms). The supervisor's
#: loop holds the GIL while it reads the screen (the snapshot's parse, the
#: detection), which it does just as the agent repaints for the hook it runs;
#: a hook's thread gives the GIL up at each of its ~15 blocking calls (accept,
#: recv, the peer's /proc entry, SQLite, send) and each time waited up to a
#: whole interval to get it back. A hook the agent waits for took 37-68 ms p50
#: instead of 3-4 beside a thread that keeps the GIL busy, 12-15 ms with this.
GIL_SWITCH_INTERVAL_S = 0.0005
_PROFILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_switch = threading.Lock()
_switch_users: list[float] = []  # the interval each running server found, in start order

Runner = Callable[..., str]  # :func:`~.handler.handle`'s signature


@dataclass(frozen=True)
class Request:
    """One hook the client asks the supervisor to run."""

    agent: str
    event: str
    profile: str
    deadline: float
    payload: bytes


def parse_header(line: bytes, session: str) -> tuple[Request, int] | None:
    """The request a header line announces and its payload's length; None for
    anything malformed, another session's, or an unknown agent or event."""
    parts = line.split(b" ")
    if len(parts) != 7 or parts[0] != _VERB:
        return None
    try:
        agent, event, who, profile = (p.decode("ascii") for p in parts[1:5])
        deadline, length = float(parts[5]), int(parts[6])
    except (UnicodeDecodeError, ValueError):
        return None
    if who != session or event not in EVENTS.get(agent, {}) or not math.isfinite(deadline):
        return None
    if (profile != NO_PROFILE and not _PROFILE.fullmatch(profile)) \
            or not 0 <= length <= MAX_STDIN:
        return None
    return Request(agent, event, "" if profile == NO_PROFILE else profile, deadline, b""), length


@dataclass
class _Pending:
    """The hand-over one hook run claimed, until the answer is written."""

    claimed: Claimed | None = None
    late: list[str] = field(default_factory=list)


class HookServer:
    """Listens on the session's hook socket; runs each hook in a thread."""

    def __init__(self, paths: Paths, session: str, path: Path, *,
                 run: Runner = handle, service: Callable[[], Service] | None = None,
                 now: Callable[[], float] = time.time) -> None:
        self.paths, self.session, self.path = paths, session, path
        self.run, self.now = run, now
        self._open_service = service
        self._service: Service | None = None
        self._service_lock = threading.Lock()
        self._answers: AnswerStore | None = None  # opened by the first rule's answer kept
        self._slots = threading.BoundedSemaphore(MAX_RUNNING)
        self._stop = threading.Event()
        self._env = {**os.environ, **_paths_env(paths, session)}
        private_dir(path.parent, repair=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a dead supervisor's: this session has one supervisor
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(str(path))
            os.chmod(path, 0o600)
            self.sock.listen(16)
            self.sock.settimeout(0.5)
        except OSError:
            self.sock.close()
            raise
        self._thread = threading.Thread(target=self._accept, name=f"hooks-{session}", daemon=True)
        self._released = False  # its claim on the GIL switch interval, once stopped

    def start(self) -> HookServer:
        _hand_gil_over_often(True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take no more hooks (a running one finishes on its own thread)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        self.sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
        with self._service_lock:
            if self._service is not None:
                self._service.close()
                self._service = None
            if self._answers is not None:
                self._answers.close()
                self._answers = None
        if self._thread.ident is not None and not self._released:
            self._released = True
            _hand_gil_over_often(False)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            if not self._slots.acquire(blocking=False):
                conn.close()  # too many at once: the client runs the Python hook
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            with conn:
                self.serve(conn)
        except Exception:
            log.exception("hook run for %s failed", self.session)
        finally:
            self._slots.release()

    # --- one connection --------------------------------------------------------------

    def serve(self, conn: socket.socket) -> None:
        """Read one request, run it if the client will wait, write the answer."""
        peer = _peer(conn)  # while the client is surely there
        if peer is None or peer[1] != os.geteuid():
            return  # another user's process (the socket is 0600 in a private dir)
        started = _started(peer[0])
        req = self.read_request(conn)
        if req is None or req.deadline - self.now() < MIN_LEFT_S:
            return  # no "ok": the client runs the Python hook itself
        env = {**self._env, PROFILE_ENV: req.profile} if req.profile else self._env
        if answers_nothing(req):
            # A state signal prints nothing whatever it finds: the agent is let go
            # at once (a prompt waits for UserPromptSubmit before its request
            # leaves), and the signal is written right after, on this thread.
            if _send(conn, _OK + _REPLY + b" 0\n"):
                self.run(req.agent, req.event, req.payload, env, started=started)
            return
        if not _send(conn, _OK):
            return  # it gave up before it read the ok: it runs the hook itself
        pending = _Pending()
        later: list[Callable[[], None]] = []  # what the answer does not wait for
        answer = self.run(req.agent, req.event, req.payload, env, started=started,
                          hand_over=lambda run: self._hand_over(run, req, pending),
                          later=later.append, answers=self.answers)
        body = answer.encode("utf-8")
        sent = _send(conn, _REPLY + b" %d\n" % len(body) + body)
        if pending.claimed is not None:
            if sent:
                pending.claimed.delivered(self._svc().audit,
                                          "handed to the agent's hook by the supervisor")
                log.info("handed %d message(s) to a hook (batch %s); %d still wait",
                         len(pending.claimed.messages), pending.claimed.token,
                         pending.claimed.left)
            else:
                pending.claimed.release("the hook was gone before the hand-over reached it")
        for work in later:  # each never raises (HookRun.after_answer)
            work()

    def read_request(self, conn: socket.socket) -> Request | None:
        """The request on ``conn``, read whole within :data:`READ_WAIT_S`; None
        for a malformed one or one that does not come in time."""
        conn.settimeout(READ_WAIT_S)
        buf = b""
        try:
            while b"\n" not in buf:
                if len(buf) > MAX_HEADER:
                    return None
                got = conn.recv(MAX_HEADER + 1 - len(buf))
                if not got:
                    return None
                buf += got
            line, _, rest = buf.partition(b"\n")
            head = parse_header(line, self.session)
            if head is None:
                return None
            req, length = head
            chunks, have = [rest], len(rest)
            while have < length:
                got = conn.recv(min(1 << 16, length - have))
                if not got:
                    return None
                chunks.append(got)
                have += len(got)
            data = b"".join(chunks)
            if len(data) != length or _more(conn):
                return None  # more than it announced
        except OSError:  # timeout, reset
            return None
        return Request(req.agent, req.event, req.profile, req.deadline, data)

    def _hand_over(self, run: HookRun, req: Request, pending: _Pending) -> str:
        """The due messages for this hook, claimed (recorded once written)."""
        if req.deadline - self.now() < MIN_LEFT_S / 2:
            run.log("hand-over skipped: the hook's client gives up too soon")
            return ""
        got = self._svc().claim_hand_over(self.session, channel=CHANNEL,
                                          limit_chars=MAX_CONTEXT_CHARS, log=run.log)
        pending.claimed = got
        return got.text if got is not None else ""

    def answers(self) -> AnswerStore:
        """The answers table a rule's answer is kept in before the hook gives
        it (:attr:`HookRun.answers`): opened once, on first use, for the
        server's life (one per request cost as much as the rest of the hook)."""
        with self._service_lock:
            if self._answers is None:
                self._answers = open_keeping_store(self.paths)
            return self._answers

    def _svc(self) -> Service:
        with self._service_lock:
            if self._service is None:
                if self._open_service is not None:
                    self._service = self._open_service()
                else:
                    from ...service import Service

                    self._service = Service.open(self.paths)
            return self._service


def _hand_gil_over_often(on: bool) -> None:
    """While any hook server runs here, the GIL changes hands every
    :data:`GIL_SWITCH_INTERVAL_S`; the interval found is back once the last stops."""
    with _switch:
        if on:
            _switch_users.append(sys.getswitchinterval())
            sys.setswitchinterval(min(GIL_SWITCH_INTERVAL_S, _switch_users[-1]))
        elif _switch_users:
            found = _switch_users.pop()
            if not _switch_users:
                sys.setswitchinterval(found)


def answers_nothing(req: Request) -> bool:
    """The hook is a state signal (a prompt submitted, a turn ended, a
    notification): its run prints nothing, so its answer need not wait for it.
    A hand-over (context) and a permission question answer with what they find."""
    try:
        payload = json.loads(req.payload)
    except ValueError:
        return False
    if not isinstance(payload, dict):
        return False
    return action(req.agent, req.event, payload) not in (CONTEXT, QUESTION)


def _peer(conn: socket.socket) -> tuple[int, int] | None:
    """The pid and uid of the hook client at the other end (the socket's peer
    credentials), or None when they cannot be read."""
    try:
        pid, uid, _ = struct.unpack("3i", conn.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return None
    return pid, uid


def _started(pid: int) -> float | None:
    """When the agent started the hook client ``pid`` (its process's start: the
    agent's event)."""
    from ...terminal.proctree import started_at

    return started_at(pid) if pid > 0 else None


def _more(conn: socket.socket) -> bool:
    """Bytes beyond the request are there already (a client that says one
    length and sends another is not believed)."""
    ready, _, _ = select.select([conn], [], [], 0)  # (recv waits out a timeout socket's)
    return bool(ready) and bool(conn.recv(1, socket.MSG_PEEK))


def _send(conn: socket.socket, data: bytes) -> bool:
    """All of ``data`` written; False when the client has gone or stopped reading."""
    try:
        conn.settimeout(READ_WAIT_S)
        conn.sendall(data, socket.MSG_NOSIGNAL)
        return True
    except OSError:
        return False


def _paths_env(paths: Paths, session: str) -> dict[str, str]:
    """The environment that makes :func:`~.handler.handle` find this session's
    store (as the hook's own command line sets it)."""
    from ...sessions.channels import server_env

    return {**server_env(session, paths), SESSION_ENV: session}


def for_session(paths: Paths, session: str) -> HookServer | None:
    """The session's hook server, started (a companion of its supervisor:
    :data:`agentwrap.sessions.compose.Companion`); None when the session has no
    hooks registered, or no socket path fits."""
    from ...service import Service

    with Service.open(paths) as svc:
        rec = svc.state(svc.own(session))
    if not rec.options.has_hooks():
        return None
    path = hook_socket(paths, session)
    if path is None:
        log.warning("no hook socket for %s: its path would be too long", session)
        return None
    return HookServer(paths, session, path).start()


__all__ = ["GIL_SWITCH_INTERVAL_S", "MAX_RUNNING", "MIN_LEFT_S", "HookServer", "Request",
           "for_session", "parse_header"]
