"""A hook asks the session's supervisor what to hand over (agentwrap.sessions.hook_requests).

The supervisor's end is the real :class:`HandoverServer` over the real store,
answering on a real wake socket from a thread; the hook's end is
:func:`ask`, and the whole hook (``python -m agentwrap hook``) in a process of
its own. Whatever the timing (supervisor there, gone, silent, late, the hook
gone first), each message ends handed over exactly once, or still queued.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from conftest import AwEnv
from test_hooks import FIXTURES, context_of, env_of, send

from agentwrap.audit import AuditLog
from agentwrap.datagram import WakeSocket
from agentwrap.delivery.handover import ack_rule
from agentwrap.message import NewMessage, QueueLimits, Source, Status
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.service import Service
from agentwrap.sessions.hook_requests import (
    MARGIN_S,
    VERB,
    HandoverServer,
    Request,
    ask,
    parse,
    reply_dir,
)

BATCH = (FIXTURES / "claude" / "PostToolBatch.json").read_bytes()


def server_of(aw: AwEnv) -> HandoverServer:
    store = SQLiteMessageStore(aw.paths.db_path, QueueLimits())
    return HandoverServer(aw.paths, "fake", store, AuditLog(aw.paths.audit_log),
                          ack_rule(False, "Reply ACK {token}"))


@contextmanager
def supervisor(aw: AwEnv, answer: bool = True) -> Iterator[list[bytes]]:
    """The session's wake socket, served (or only read, ``answer=False``) by a
    thread as the supervisor's loop does; yields what else it received."""
    server = server_of(aw)
    other: list[bytes] = []
    stop = threading.Event()
    with WakeSocket(aw.paths.wake_socket("fake")) as wake:
        def loop() -> None:
            while not stop.is_set():
                wake.sock.settimeout(0.05)
                try:
                    got = [wake.sock.recv(256)]
                except OSError:
                    continue
                other.extend(server.serve(got) if answer else got)

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        try:
            yield other
        finally:
            stop.set()
            t.join(5)
            server.store.close()


def test_the_supervisor_hands_the_messages_over(aw: AwEnv, svc: Service) -> None:
    first = send(svc, "CI failed on main")
    second = send(svc, "lint: 2 errors")
    with supervisor(aw) as other:
        text = ask(aw.paths, "fake")
        assert ask(aw.paths, "fake") == ""  # taken once: nothing is left for the next hook
    assert text is not None
    assert "[webhook:ci] CI failed on main" in text and "lint: 2 errors" in text
    for mid in (first, second):
        entry = svc.message(mid)
        assert entry.message.status is Status.DELIVERED and entry.channel == "hook"
        assert entry.attempts[-1].evidence == "handed to the agent's hook by the supervisor"
    assert other == []  # requests are the server's, never the loop's
    assert list(reply_dir(aw.paths).iterdir()) == []  # the hook's socket is gone


def test_no_supervisor_means_the_hooks_own_path_at_once(aw: AwEnv, svc: Service) -> None:
    mid = send(svc, "waits")
    assert ask(aw.paths, "fake", wait_s=30) is None  # no listener: no wait at all
    assert svc.get(mid).status is Status.PENDING


def test_a_silent_supervisor_claims_nothing(aw: AwEnv, svc: Service) -> None:
    mid = send(svc, "waits")
    with supervisor(aw, answer=False) as other:
        assert ask(aw.paths, "fake", wait_s=0.05) is None
    assert svc.get(mid).status is Status.PENDING
    assert len(other) == 1 and other[0].startswith(VERB + b" ")


def test_a_late_request_claims_nothing(aw: AwEnv, svc: Service) -> None:
    mid = send(svc, "waits")
    server = server_of(aw)
    try:
        sock_path = reply_dir(aw.paths) / "1-late.sock"
        reply_dir(aw.paths).mkdir(mode=0o700, exist_ok=True)
        server.answer(Request(1000.0, sock_path), now=lambda: 1000.0 - MARGIN_S / 2)
    finally:
        server.store.close()
    assert svc.get(mid).status is Status.PENDING
    assert svc.message(mid).attempts == []


def test_a_hook_gone_before_the_reply_gets_nothing_and_loses_nothing(
        aw: AwEnv, svc: Service) -> None:
    mid = send(svc, "goes back")
    server = server_of(aw)
    try:
        reply_dir(aw.paths).mkdir(mode=0o700, exist_ok=True)
        server.answer(Request(1e12, reply_dir(aw.paths) / "1-gone.sock"))
    finally:
        server.store.close()
    entry = svc.message(mid)
    assert entry.message.status is Status.PENDING  # back in the queue, due now
    assert entry.attempts[-1].outcome == "not_handed"
    with Service.open(aw.paths) as again:
        assert [m.id for m in again.inbox("fake")] == [mid]


@pytest.mark.parametrize("datagram", [
    b"wake", b"stop", b"handover", b"handover 1 2 3", b"handover nan x.sock",
    b"handover 1e12 ../x.sock", b"handover 1e12 a/b.sock", b"handover 1e12 .x.sock",
    b"handover 1e12 x.txt", b"handover 1e12 \xff.sock",
])
def test_anything_else_on_the_wake_socket_is_the_loops(aw: AwEnv, svc: Service,
                                                       datagram: bytes) -> None:
    mid = send(svc, "stays")
    assert parse(datagram, aw.paths) is None
    server = server_of(aw)
    try:
        assert server.serve([datagram]) == [datagram]
    finally:
        server.store.close()
    assert svc.get(mid).status is Status.PENDING


def test_the_hook_process_loads_no_store_when_the_supervisor_answers(
        aw: AwEnv, svc: Service) -> None:
    """The point of it: with a supervisor, a hook that hands a message over
    imports neither the service nor the store's code (a test of what is
    loaded, not of time: the benchmark measures the time)."""
    mid = send(svc, "CI failed on main")
    with supervisor(aw):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "agentwrap", "hook", "claude",
             "PostToolBatch"], input=BATCH, env=env_of(aw), cwd=aw.project,
            capture_output=True, timeout=60)
    assert proc.returncode == 0
    assert "[webhook:ci] CI failed on main" in context_of(proc.stdout.decode(), "PostToolBatch")
    loaded = proc.stderr.decode()
    for heavy in ("agentwrap.service", "agentwrap.queue.sqlite", "agentwrap.config", "sqlite3"):
        assert f" {heavy}\n" not in loaded, heavy
    assert svc.get(mid).status is Status.DELIVERED


def test_a_hook_without_a_supervisor_still_hands_over(aw: AwEnv, svc: Service) -> None:
    mid = send(svc, "CI failed on main")
    proc = subprocess.run([sys.executable, "-m", "agentwrap", "hook", "claude", "PostToolBatch"],
                          input=BATCH, env=env_of(aw), cwd=aw.project, capture_output=True,
                          timeout=60)
    assert "[webhook:ci] CI failed on main" in context_of(proc.stdout.decode(), "PostToolBatch")
    entry = svc.message(mid)
    assert entry.message.status is Status.DELIVERED and entry.channel == "hook"
    assert entry.attempts[-1].evidence == "handed to the agent through hook"


def test_many_hooks_racing_hand_each_message_over_once(aw: AwEnv, svc: Service) -> None:
    """Hooks asking the supervisor and hooks on their own path (no answer in
    time) at once: every message is handed over exactly once."""
    with Service.open(aw.paths, limits=QueueLimits(rate_per_minute=1000)) as many:
        ids = [many.send(NewMessage(session="fake", content=f"msg-{i:02d}-end",
                                    source=Source.WEBHOOK)).message.id for i in range(30)]
    texts: list[str] = []
    lock = threading.Lock()

    def hook(wait_s: float) -> None:
        for _ in range(6):
            got = ask(aw.paths, "fake", wait_s=wait_s)
            if got is None:
                with Service.open(aw.paths) as own:
                    got = own.hand_over("fake", channel="hook", limit_chars=300)
            with lock:
                texts.append(got)

    with supervisor(aw):
        threads = [threading.Thread(target=hook, args=(w,)) for w in (0.4, 0.4, 0.001, 0.001)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    joined = "\n".join(texts)
    for i, mid in enumerate(ids):
        handed = joined.count(f"msg-{i:02d}-end")
        assert handed == (1 if svc.get(mid).status is Status.DELIVERED else 0), (i, handed)


# --- whom the hook believes (issue 35) ---------------------------------------------------

NOBODY = 65534
#: Sends the datagram of argv[2] on the socket it is handed (fd argv[1], connected to
#: the hook's reply socket by the test), as whoever runs it.
SEND_AS = r"""
import socket, sys
socket.socket(fileno=int(sys.argv[1])).send(sys.argv[2].encode())
"""


@contextmanager
def forger(aw: AwEnv, *, as_user: int | None = None, mode: int = 0o600,
           dir_mode: int = 0o700) -> Iterator[list[bytes]]:
    """A "supervisor" on the session's wake socket (``mode``, in the runtime dir
    with ``dir_mode``) that answers each hand-over request ``v1 tok`` with FORGED,
    sent by a process running as ``as_user``; yields the requests it got."""
    wake = aw.paths.wake_socket("fake")
    wake.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(wake))
    os.chmod(wake, mode)
    os.chmod(wake.parent, dir_mode)
    sock.settimeout(0.05)
    got: list[bytes] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                data = sock.recv(256)
            except OSError:
                continue
            got.append(data)
            req = parse(data, aw.paths)
            assert req is not None
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as out:
                out.connect(str(req.reply_to))
                python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
                subprocess.run([python, "-c", SEND_AS, str(out.fileno()), "v1 tok\nFORGED"],
                               pass_fds=(out.fileno(),), user=as_user, cwd="/", check=True)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        stop.set()
        thread.join()
        sock.close()
        os.chmod(wake.parent, 0o700)
        wake.unlink(missing_ok=True)


def test_a_reply_of_this_user_is_believed(aw: AwEnv) -> None:
    """The control of the next two: the forger's reply is taken when all is well."""
    with forger(aw) as got:
        assert ask(aw.paths, "fake", wait_s=5.0) == "FORGED"
    assert len(got) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's process needs root")
def test_a_reply_from_another_user_is_dropped(aw: AwEnv) -> None:
    """Only a datagram the kernel says this user sent is a reply: another one's
    (here sent on a socket connected to the hook's, as ``nobody``) is dropped,
    and with no other the hook takes its own path."""
    with forger(aw, as_user=NOBODY) as got:
        assert ask(aw.paths, "fake", wait_s=1.0) is None
    assert len(got) == 1  # it was asked, and it answered: not believed


@pytest.mark.parametrize("where", [{"mode": 0o666}, {"mode": 0o620}, {"dir_mode": 0o777},
                                   {"dir_mode": 0o730}], ids=["socket-0666", "socket-0620",
                                                              "dir-0777", "dir-0730"])
def test_a_wake_socket_others_may_write_is_not_asked(aw: AwEnv, where: dict[str, int]) -> None:
    with forger(aw, **where) as got:
        assert ask(aw.paths, "fake", wait_s=0.5) is None
    assert got == []  # nothing sent to it


def test_typing_waits_for_the_session_start_hook_a_bounded_time(aw: AwEnv) -> None:
    """The supervisor types nothing until the agent's SessionStart hook has
    handed the queue over (it would race it), nor waits longer than
    START_HOOK_WAIT_S for a hook that never runs."""
    from agentwrap.paths import private_dir
    from agentwrap.sessions.hook_requests import START_HOOK_WAIT_S, awaits_start_hook

    now = [100.0]
    waiting = awaits_start_hook(aw.paths, "s1", 100.0, clock=lambda: now[0])
    assert waiting()
    seen = aw.paths.session_started("s1")
    private_dir(seen.parent, repair=True)
    seen.write_bytes(b"")
    assert not waiting()
    seen.unlink()
    assert not waiting()  # once over, over
    late = awaits_start_hook(aw.paths, "s2", 100.0, clock=lambda: now[0])
    now[0] = 100.0 + START_HOOK_WAIT_S
    assert not late()
