"""The hook clients and the supervisor's hook server (issues 27, 36).

The native client is the real compiled ``agentwrap-hook`` (built by hatch_build.py;
built here from its source when the install has none), the Python client the
real ``python -m agentwrap hook`` (its second client, where the native one is
not built), each run as an agent runs a hook: the payload on stdin, the
session in its environment. The server is
the real :class:`HookServer` over the real store, in a thread of this process
as in the supervisor's. Whatever happens (no server, a hostile request, a
client gone before its answer), each message ends handed over exactly once,
or still queued, and the client prints a whole answer or nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import AwEnv
from support.waiting import wait_for
from test_hooks import FIXTURES, context_of, env_of, send

from agentwrap.hook_wire import MAX_STDIN, hook_socket
from agentwrap.message import Status
from agentwrap.service import Service
from agentwrap.sessions import channels
from agentwrap.sessions.signals import read_signal
from agentwrap.surfaces.hooks.handler import handle
from agentwrap.surfaces.hooks.server import (
    GIL_SWITCH_INTERVAL_S,
    MIN_LEFT_S,
    HookServer,
    parse_header,
)

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "agentwrap" / "terminal" / "_native" / "hook.c"
BATCH = (FIXTURES / "claude" / "PostToolBatch.json").read_bytes()
STOP = (FIXTURES / "claude" / "Stop.json").read_bytes()


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed client, else one built from the source as hatch_build.py builds it."""
    built = channels.hook_client({})
    if built is not None:
        return built
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler: the hooks run in Python (tested in test_hooks.py)")
    out = tmp_path_factory.mktemp("hookclient") / "agentwrap-hook"
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(SOURCE)], check=True)
    return out


def sock_of(aw: AwEnv) -> Path:
    path = hook_socket(aw.paths, "fake")
    assert path is not None
    return path


@contextmanager
def server(aw: AwEnv, **kw: Any) -> Iterator[HookServer]:
    srv = HookServer(aw.paths, "fake", sock_of(aw), **kw).start()
    try:
        yield srv
    finally:
        srv.stop()


#: The two hook clients: the native one (with the Python hook it falls back to),
#: and the Python hook alone, as the hooks are registered where no native one is built.
CLIENTS = ("native", "python")


def run_client(aw: AwEnv, client: Path, event: str, data: bytes, agent: str = "claude",
               via: str = "native", **env: str) -> subprocess.CompletedProcess[bytes]:
    """A hook client as the agent runs it (``via``: one of :data:`CLIENTS`)."""
    hook = [sys.executable, "-m", "agentwrap", "hook", agent, event]
    argv = [str(client), "1", str(sock_of(aw)), agent, event, "--", *hook] \
        if via == "native" else hook
    return subprocess.run(argv, input=data, env={**env_of(aw), **env}, capture_output=True,
                          timeout=60, check=False)


def evidence(svc: Service, mid: str) -> str:
    entry = svc.message(mid)
    assert entry.message.status is Status.DELIVERED and entry.channel == "hook"
    return entry.attempts[-1].evidence or ""


@pytest.mark.parametrize("via", CLIENTS)
def test_the_supervisor_runs_the_hook_for_the_client(aw: AwEnv, svc: Service,
                                                     client: Path, via: str) -> None:
    mid = send(svc, "CI failed on main")
    with server(aw):
        got = run_client(aw, client, "PostToolBatch", BATCH, via=via)
        again = run_client(aw, client, "PostToolBatch", BATCH, via=via)
        stop = run_client(aw, client, "Stop", STOP, via=via)
    assert got.returncode == 0 and got.stderr == b""
    assert got.stdout.endswith(b"}\n")
    assert "[webhook:ci] CI failed on main" in context_of(got.stdout.decode(), "PostToolBatch")
    assert evidence(svc, mid) == "handed to the agent's hook by the supervisor"
    assert (again.returncode, again.stdout) == (0, b"")  # handed once
    assert (stop.returncode, stop.stdout) == (0, b"")
    # a signal is answered at once and written right after (the agent waits for neither)
    sig = wait_for(lambda: read_signal(aw.paths, "fake"), 30, "the signal written")
    assert sig.signal == "turn_end" and sig.event == "Stop"


@pytest.mark.parametrize("via", CLIENTS)
def test_no_supervisor_runs_the_python_hook_with_the_same_stdin(aw: AwEnv, svc: Service,
                                                               client: Path, via: str) -> None:
    mid = send(svc, "CI failed on main")
    got = run_client(aw, client, "PostToolBatch", BATCH, via=via)
    assert got.returncode == 0, got.stderr
    assert "CI failed on main" in context_of(got.stdout.decode(), "PostToolBatch")
    assert evidence(svc, mid) != "handed to the agent's hook by the supervisor"  # its own path
    assert run_client(aw, client, "Stop", STOP, via=via).stdout == b""
    sig = read_signal(aw.paths, "fake")
    assert sig is not None and sig.signal == "turn_end"


def test_the_answer_is_the_python_hooks(aw: AwEnv, svc: Service, client: Path) -> None:
    """A permission request a rule answers: byte for byte what the Python hook prints."""
    (aw.paths.config_dir / "config.toml").write_text(
        '[[answer_rules]]\nname = "touch"\ncommand = "touch *"\nanswer = { option = 1 }\n',
        encoding="utf-8")
    asks = (FIXTURES / "claude" / "PermissionRequest.json").read_bytes()
    with server(aw):
        native = run_client(aw, client, "PermissionRequest", asks)
    python = run_client(aw, client, "PermissionRequest", asks, AGENTWRAP_HOOK_CLIENT="python")
    assert native.returncode == python.returncode == 0
    assert b'"behavior": "allow"' in native.stdout
    assert native.stdout == python.stdout
    # each kept its answer once, before it gave it (the supervisor keeps none)
    assert [(a.status, a.source) for a in svc.answers.recent("fake")] == [
        ("applied", "policy"), ("applied", "policy")]


def test_the_server_keeps_its_answers_in_one_open_store(
        aw: AwEnv, svc: Service, client: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor keeps each rule's answer before its hook gives it, in the
    answers table it keeps open: not a store opened (a PostgreSQL connection
    made) per request, which doubled what the agent waited for (issue 23)."""
    from agentwrap.answers.store import AnswerStore

    (aw.paths.config_dir / "config.toml").write_text(
        '[[answer_rules]]\nname = "touch"\ncommand = "touch *"\nanswer = { option = 1 }\n',
        encoding="utf-8")
    asks = (FIXTURES / "claude" / "PermissionRequest.json").read_bytes()
    opened: list[AnswerStore] = []
    init = AnswerStore.__init__

    def counted(self: AnswerStore, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        opened.append(self)

    monkeypatch.setattr(AnswerStore, "__init__", counted)
    with server(aw):
        got = [run_client(aw, client, "PermissionRequest", asks) for _ in range(3)]
    monkeypatch.setattr(AnswerStore, "__init__", init)
    assert all(b'"behavior": "allow"' in g.stdout for g in got)
    assert len(opened) == 1
    assert [(a.status, a.source) for a in svc.answers.recent("fake")] == [
        ("applied", "policy")] * 3


def test_forced_python_asks_the_same_supervisor_as_its_second_client(
        aw: AwEnv, svc: Service, client: Path) -> None:
    """``AGENTWRAP_HOOK_CLIENT=python``: the native client asks nothing and runs
    the Python hook, which asks the same server itself (issue 36: one path)."""
    mid = send(svc, "waits for the python hook")
    with server(aw):
        got = run_client(aw, client, "PostToolBatch", BATCH, AGENTWRAP_HOOK_CLIENT="python")
    assert "waits for the python hook" in context_of(got.stdout.decode(), "PostToolBatch")
    assert evidence(svc, mid) == "handed to the agent's hook by the supervisor"


@contextmanager
def refusing(aw: AwEnv) -> Iterator[list[int]]:
    """The session's hook socket, this user's, refusing every request (as a
    busy server does: closed with no "ok"); yields the connections it had."""
    path = sock_of(aw)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    count: list[int] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(8)
        sock.settimeout(0.1)
        done = threading.Event()

        def accept() -> None:
            while not done.is_set():
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                count.append(1)
                conn.close()

        t = threading.Thread(target=accept, daemon=True)
        t.start()
        try:
            yield count
        finally:
            done.set()
            t.join(5)
            path.unlink(missing_ok=True)


@pytest.mark.parametrize("via", CLIENTS)
def test_a_client_not_taken_asks_once_and_the_hook_runs_from_the_store(
        aw: AwEnv, svc: Service, client: Path, via: str) -> None:
    """A refused request: the hook runs in the Python hook, from the store. The
    native client says so to the Python hook it runs (ASKED_ENV), which then
    does not ask the same server again."""
    mid = send(svc, "handed by the hook itself")
    with refusing(aw) as asked:
        got = run_client(aw, client, "PostToolBatch", BATCH, via=via)
    assert "handed by the hook itself" in context_of(got.stdout.decode(), "PostToolBatch")
    assert evidence(svc, mid) != "handed to the agent's hook by the supervisor"
    assert len(asked) == 1


@pytest.mark.parametrize("via", CLIENTS)
def test_an_oversized_payload_prints_nothing_and_runs_nothing(aw: AwEnv, svc: Service,
                                                              client: Path, via: str) -> None:
    mid = send(svc, "stays")
    big = b'{"x": "' + b"a" * (MAX_STDIN + 10) + b'"}'
    with server(aw):
        got = run_client(aw, client, "PostToolBatch", big, via=via)
    assert (got.returncode, got.stdout, got.stderr) == (0, b"", b"")
    assert svc.get(mid).status is Status.PENDING


def test_misuse_names_the_protocol(client: Path) -> None:
    got = subprocess.run([str(client)], capture_output=True, text=True, check=False)
    assert got.returncode == 64 and "protocol 1 expected" in got.stderr


def _raw(aw: AwEnv, data: bytes) -> bytes:
    """What the server answers a client that sends ``data`` then stops sending."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(sock_of(aw)))
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while chunk := s.recv(1 << 16):
                chunks.append(chunk)
        except ConnectionResetError:  # closed with the request unread
            pass
        return b"".join(chunks)


def _head(*, agent: str = "claude", event: str = "PostToolBatch", session: str = "fake",
          profile: str = "-", deadline: float | None = None, length: int = len(BATCH)) -> bytes:
    dl = time.time() + 30 if deadline is None else deadline
    return f"awhook1 {agent} {event} {session} {profile} {dl:.6f} {length}\n".encode()


@pytest.mark.parametrize("request_", [
    b"", b"\n", b"awhook1\n" + BATCH, b"awhook2" + _head()[7:] + BATCH,
    _head(session="other") + BATCH, _head(session="../fake") + BATCH,
    _head(agent="aider") + BATCH, _head(event="SessionEnd") + BATCH,
    _head(profile="../x") + BATCH, _head(deadline=float("nan")) + BATCH,
    _head(deadline=time.time()) + BATCH,  # too late to run
    _head(length=-1) + BATCH, _head(length=MAX_STDIN + 1) + BATCH,
    _head(length=len(BATCH) + 5) + BATCH,  # shorter than announced
    _head() + BATCH + b"trailing",  # longer than announced
    b"x" * 2000 + b"\n" + BATCH,
    b"awhook1 claude PostToolBatch fake - 1e12 " + b"9" * 400 + b"\n",
])
def test_a_malformed_or_hostile_request_changes_nothing(aw: AwEnv, svc: Service,
                                                        request_: bytes) -> None:
    mid = send(svc, "stays")
    with server(aw):
        assert _raw(aw, request_) == b""  # no "ok": a client would run the Python hook
    assert svc.get(mid).status is Status.PENDING
    assert read_signal(aw.paths, "fake") is None


def test_a_well_formed_raw_request_is_answered(aw: AwEnv, svc: Service) -> None:
    """The same exchange as the client's, by hand: the protocol as documented."""
    mid = send(svc, "goes")
    with server(aw):
        got = _raw(aw, _head() + BATCH)
    assert got.startswith(b"ok\nv1 ")
    head, _, body = got[3:].partition(b"\n")
    assert int(head.split()[1]) == len(body)
    assert "goes" in context_of(body.decode(), "PostToolBatch")
    assert svc.get(mid).status is Status.DELIVERED


def test_parse_header_reads_the_profile() -> None:
    got = parse_header(_head(profile="claude-work")[:-1], "fake")
    assert got is not None and got[0].profile == "claude-work" and got[1] == len(BATCH)
    assert parse_header(_head()[:-1], "fake") is not None
    assert parse_header(_head()[:-1], "other") is None


def test_a_client_gone_before_the_answer_gets_nothing_and_loses_nothing(
        aw: AwEnv, svc: Service) -> None:
    """The client gives up (shuts its reading side, as hook.c does at its
    deadline) while the hook runs: the claimed batch goes back to the queue."""
    mid = send(svc, "goes back")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def run_then_give_up(*args: Any, **kw: Any) -> str:
        answer = handle(*args, **kw)
        assert ours.recv(3) == b"ok\n"
        ours.shutdown(socket.SHUT_RD)
        return answer

    srv = HookServer(aw.paths, "fake", sock_of(aw), run=run_then_give_up)
    try:
        ours.sendall(_head() + BATCH)
        srv.serve(theirs)
    finally:
        srv.stop()
        ours.close()
        theirs.close()
    entry = svc.message(mid)
    assert entry.message.status is Status.PENDING  # back in the queue, due now
    assert entry.attempts[-1].outcome == "not_handed"
    with Service.open(aw.paths) as again:
        assert [m.id for m in again.inbox("fake")] == [mid]


def test_a_request_too_close_to_its_deadline_claims_nothing(aw: AwEnv, svc: Service) -> None:
    mid = send(svc, "stays")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    srv = HookServer(aw.paths, "fake", sock_of(aw))
    try:
        ours.sendall(_head(deadline=time.time() + MIN_LEFT_S / 2) + BATCH)
        ours.shutdown(socket.SHUT_WR)
        srv.serve(theirs)
        theirs.close()
        assert ours.recv(16) == b""
    finally:
        srv.stop()
        ours.close()
    assert svc.get(mid).status is Status.PENDING


def test_the_hook_command_runs_the_client_then_python(aw: AwEnv, client: Path) -> None:
    cmd = channels.hook_command("claude", "Stop", "fake", aw.paths, sys.executable, "claude",
                                client)
    assert f"{client} 1 {sock_of(aw)} claude Stop --" in cmd
    assert cmd.endswith("-m agentwrap hook claude Stop")
    assert channels.hook_client({"AGENTWRAP_HOOK_CLIENT": "python"}) is None
    plain = channels.hook_command("claude", "Stop", "fake", aw.paths, sys.executable, "claude")
    assert str(client) not in plain and plain.endswith("-m agentwrap hook claude Stop")


def test_a_stale_client_is_not_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "agentwrap-hook"
    stale.write_text("#!/bin/sh\necho 'protocol 0 expected' >&2\nexit 64\n")
    stale.chmod(0o755)
    monkeypatch.setattr(channels, "HOOK_CLIENT", stale)
    assert channels.hook_client({}) is None
    os.utime(stale, ns=(1, 1))
    stale.write_text("#!/bin/sh\necho 'protocol 1 expected' >&2\nexit 64\n")
    assert channels.hook_client({}) == stale


def test_signal_payload_json_round_trip(aw: AwEnv, svc: Service, client: Path) -> None:
    """A payload with every byte the JSON may hold reaches the handler intact."""
    payload = json.loads(STOP)
    payload["last_assistant_message"] = "done \u00e9\u2603 \\ \" \n\t ACK deadbeef"
    with server(aw):
        got = run_client(aw, client, "Stop", json.dumps(payload).encode())
        assert (got.returncode, got.stdout) == (0, b"")
        sig = wait_for(lambda: read_signal(aw.paths, "fake"), 30, "the signal written")
    assert sig.signal == "turn_end"


def test_a_signal_lets_the_agent_go_before_its_work_is_done(aw: AwEnv, svc: Service,
                                                           client: Path) -> None:
    """A state signal prints nothing whatever it finds, so the agent waits for
    no more than the server's "ok" and an empty answer: Claude holds a prompt's
    request until UserPromptSubmit returns (issue 27). The signal is written
    right after, and a hand-over still answers with what it claimed."""
    release = threading.Event()
    ran: list[str] = []

    def slow(agent: str, event: str, raw: bytes, env: Any, **kw: Any) -> str:
        release.wait(30)  # the work a signal does (the file, continuity's notes)
        ran.append(event)
        return handle(agent, event, raw, env, **kw)

    with server(aw, run=slow):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(20)
            conn.connect(str(sock_of(aw)))
            conn.sendall(_head(event="Stop", length=len(STOP)) + STOP)
            got = b""
            while got != b"ok\nv1 0\n" and len(got) < 8:
                got += conn.recv(64)  # the whole (empty) answer, while the run still waits
        assert got == b"ok\nv1 0\n" and ran == [] and read_signal(aw.paths, "fake") is None
        answered = run_client(aw, client, "Stop", STOP)  # the client as the agent runs it
        assert (answered.returncode, answered.stdout) == (0, b"")
        release.set()
        wait_for(lambda: read_signal(aw.paths, "fake") is not None, 30, "the signal written")
    sig = read_signal(aw.paths, "fake")
    assert sig is not None and sig.signal == "turn_end"
    wait_for(lambda: ran == ["Stop", "Stop"], 30, "both runs done")


def test_a_hand_over_answers_before_its_notes(aw: AwEnv, svc: Service, client: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent waits for the hand-over alone (issue 27: Gemini's AfterTool is
    on every tool step): the handoff notes of the tool call are written after
    the answer left, so a slow write (a loaded disk) never holds the agent."""
    from agentwrap.continuity import hooks as continuity

    notes = continuity.notes_file(aw.paths, "fake")
    notes.parent.mkdir(parents=True)
    order: list[str] = []
    release = threading.Event()
    real_note = continuity.note

    def slow_note(*args: Any, **kw: Any) -> None:
        release.wait(60)
        real_note(*args, **kw)
        order.append("notes")

    monkeypatch.setattr(continuity, "note", slow_note)
    mid = send(svc, "CI failed on main")
    with server(aw):
        got = run_client(aw, client, "PostToolBatch", BATCH)  # while the notes wait
        order.append("answer")
        release.set()
        wait_for(lambda: "notes" in order, 30, "the notes written")
    assert order == ["answer", "notes"]
    assert "CI failed on main" in context_of(got.stdout.decode(), "PostToolBatch")
    assert evidence(svc, mid) == "handed to the agent's hook by the supervisor"
    assert continuity.read_json(notes)["tools"]  # the tool call is in the notes all the same


def test_a_dialog_left_to_the_person_answers_before_it_is_told(
        aw: AwEnv, svc: Service, client: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A permission request no rule answers: the agent gets its empty answer
    (it opens its dialog) before the request and its signal are written for
    the supervisor, which reads the dialog off the screen all the same."""
    from agentwrap.answers import hook_questions as hq_mod

    (aw.paths.config_dir / "config.toml").write_text(
        '[[answer_rules]]\nname = "rm"\ncommand = "rm *"\nanswer = { option = 1 }\n',
        encoding="utf-8")
    order: list[str] = []
    release = threading.Event()
    real_write = hq_mod.write_question

    def slow_write(paths: Any, session: str, hq: Any) -> Any:
        if hq.decision != hq_mod.PENDING:  # the last word: the dialog is the person's
            release.wait(60)
            order.append("told")
        return real_write(paths, session, hq)

    monkeypatch.setattr(hq_mod, "write_question", slow_write)
    asks = (FIXTURES / "claude" / "PermissionRequest.json").read_bytes()
    with server(aw):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(20)
            conn.connect(str(sock_of(aw)))
            conn.sendall(_head(event="PermissionRequest", length=len(asks)) + asks)
            got = b""
            while got != b"ok\nv1 0\n" and len(got) < 8:
                got += conn.recv(64)  # the whole (empty) answer, while the telling waits
            order.append("answer")
        release.set()
        sig = wait_for(lambda: read_signal(aw.paths, "fake"), 30, "the signal written")
    assert got == b"ok\nv1 0\n"
    assert order == ["answer", "told"]
    assert sig.signal == "permission_prompt"
    told = hq_mod.read_question(aw.paths, "fake")
    assert told is not None and told.command == "touch tool_ran.txt"


def test_the_gil_changes_hands_often_while_a_hook_server_runs(aw: AwEnv) -> None:
    """The agent waits for a hook its supervisor runs on a thread, beside the
    loop that reads the screen: the GIL changes hands every 0.5 ms, not every
    5, while any hook server runs in the process (the supervisor host runs
    several); the interval found is back once the last one stops."""
    found = sys.getswitchinterval()
    assert found > GIL_SWITCH_INTERVAL_S
    other = sock_of(aw).with_name("other.sock")
    with server(aw):
        assert sys.getswitchinterval() == GIL_SWITCH_INTERVAL_S
        second = HookServer(aw.paths, "other", other).start()
        second.stop()
        assert sys.getswitchinterval() == GIL_SWITCH_INTERVAL_S  # the first still runs
    assert sys.getswitchinterval() == found


# --- whom the client believes (issue 35) ----------------------------------------------------

#: A stand-in "supervisor": listens on the bound socket it is handed (fd argv[1]) as
#: whoever runs it (SO_PEERCRED names the process that listened), answers every client
#: an ``allow`` and writes how many bytes each one sent. The system's Python: another
#: user may not be able to run this tree's.
FAKE_SERVER = r"""
import socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
s.listen(4)
print("listening", flush=True)
s.settimeout(30)
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    c.settimeout(2)
    got = b""
    try:
        while b"\n" not in got or len(got) < 60:
            chunk = c.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    print("got", len(got), flush=True)  # before the answer: written once the client has it
    body = b'{"hookSpecificOutput": {"decision": {"behavior": "allow"}}, "FAKE": 1}'
    try:
        c.sendall(b"ok\nv1 %d\n" % len(body) + body)
    except OSError:
        pass
    c.close()
"""
NOBODY = 65534
ASKS = (FIXTURES / "claude" / "PermissionRequest.json").read_bytes()


@contextmanager
def fake_server(aw: AwEnv, *, as_user: int | None = None, sock_mode: int = 0o600,
                sock_owner: int | None = None, dir_mode: int = 0o700,
                dir_owner: int | None = None) -> Iterator[list[int]]:
    """A socket at the session's hook socket, bound here, then listened on and
    answered by :data:`FAKE_SERVER` running as ``as_user``; the socket and its dir
    as asked. Yields, once the fake stopped, how many bytes each client sent it."""
    path = sock_of(aw)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, sock_mode)
    os.chown(path, -1 if sock_owner is None else sock_owner, -1)
    os.chmod(path.parent, dir_mode)
    os.chown(path.parent, -1 if dir_owner is None else dir_owner, -1)
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    proc = subprocess.Popen([python, "-c", FAKE_SERVER, str(sock.fileno())],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                            pass_fds=(sock.fileno(),), user=as_user, cwd="/")
    sent: list[int] = []
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "listening\n"
        yield sent
    finally:
        sock.close()
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
        sent += [int(x.split()[1]) for x in out.splitlines() if x.startswith("got ")]
        os.chown(path.parent, os.geteuid(), -1)
        os.chmod(path.parent, 0o700)
        path.unlink(missing_ok=True)


@pytest.mark.parametrize("via", CLIENTS)
def test_the_fake_supervisor_is_believed_when_it_is_this_users(aw: AwEnv, svc: Service,
                                                              client: Path, via: str) -> None:
    """The control of the next test: the fake's answer is printed when all is well.

    The client gives a supervisor ``hook_wire.ACK_WAIT_MS`` to take the request; on a
    loaded machine the fake may not be scheduled in time, and the client then
    rightly runs the hook itself: such a round is tried again (eight at most: at a
    load of 5-6 on two cores three rounds in a row once missed), a fake never
    believed fails every one."""
    for _ in range(8):
        with fake_server(aw) as sent:
            got = run_client(aw, client, "PermissionRequest", ASKS, via=via)
        if b'"FAKE": 1' in got.stdout:
            break
    assert b'"FAKE": 1' in got.stdout
    assert len(sent) == 1 and sent[0] > len(ASKS)


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's socket and process need root")
@pytest.mark.parametrize("case", [
    {"as_user": NOBODY}, {"sock_owner": NOBODY}, {"sock_mode": 0o666}, {"sock_mode": 0o620},
    {"dir_mode": 0o777}, {"dir_mode": 0o730}, {"dir_owner": NOBODY},
], ids=["listener-nobody", "socket-nobodys", "socket-0666", "socket-0620", "dir-0777",
        "dir-0730", "dir-nobodys"])
@pytest.mark.parametrize("via", CLIENTS)
def test_a_supervisor_not_this_users_alone_is_not_asked_and_the_python_hook_runs(
        aw: AwEnv, svc: Service, client: Path, case: dict[str, int], via: str) -> None:
    """An answer may allow a tool: neither client sends anything (not even the
    payload) to a socket that is not this user's alone, or to a listener of
    another user, prints none of its answer, and runs the Python hook, which
    answers as it does with no supervisor at all."""
    python = run_client(aw, client, "PermissionRequest", ASKS, AGENTWRAP_HOOK_CLIENT="python")
    with fake_server(aw, **case) as sent:
        got = run_client(aw, client, "PermissionRequest", ASKS, via=via)
    assert got.returncode == 0 and b"FAKE" not in got.stdout
    assert got.stdout == python.stdout  # the Python hook's own answer
    assert sum(sent) == 0  # nothing sent: at most a connection closed at once


#: A client that connects as whoever runs it, sends argv[2] and says how many bytes came back.
CLIENT_AS = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
got = b""
try:
    s.sendall(sys.argv[2].encode())
    s.shutdown(socket.SHUT_WR)
    while chunk := s.recv(65536):
        got += chunk
except OSError:
    pass
print(len(got))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's process needs root")
def test_the_server_runs_nothing_for_another_users_client(aw: AwEnv, svc: Service) -> None:
    """The socket is 0600 in a private dir; were it reachable, a client of another
    user would still get no "ok", and nothing would be handed to it."""
    mid = send(svc, "stays")
    with server(aw):
        path = sock_of(aw)
        os.chmod(path.parent, 0o711)
        os.chmod(path, 0o666)
        for d in path.parents:  # the way there, for the other user
            if d == aw.root.parent:
                break
            os.chmod(d, os.stat(d).st_mode | 0o011)
        python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
        got = subprocess.run([python, "-c", CLIENT_AS, str(path), (_head() + BATCH).decode()],
                             user=NOBODY, cwd="/", capture_output=True, text=True, timeout=60,
                             check=False)
    assert got.stdout.strip() == "0", got.stderr
    assert svc.get(mid).status is Status.PENDING


# --- one path: both clients, every agent's hook events ---------------------------------------


def _event_of(agent: str, path: Path) -> str | None:
    """The hook event a captured payload is for (its file name, perhaps with a
    case after a dot: ``Notification.idle_prompt``; OpenCode's events have dots)."""
    from agentwrap.surfaces.hooks.protocol import EVENTS

    words = path.name.removesuffix(".json").split(".")
    return next((e for k in range(len(words), 0, -1)
                 if (e := ".".join(words[:k])) in EVENTS[agent]), None)


def _hooked_agents() -> list[str]:
    from agentwrap.surfaces.hooks.protocol import EVENTS

    return sorted(EVENTS)


@pytest.mark.parametrize("agent", _hooked_agents())
def test_both_clients_get_byte_identical_replies_for_every_hook_event(
        aw: AwEnv, svc: Service, client: Path, agent: str) -> None:
    """Issue 36's one hook path, as a table: every captured hook event of every
    agent that has hooks, through the native client and through the Python
    hook (its second client), with the supervisor's server (nothing queued, and
    a message queued: handed over by whichever asks) and without one (each
    falls back to the Python hook's own run): the same bytes out, exit 0,
    nothing on stderr. A hand-over's batch token, drawn anew per batch, is
    the one thing told apart."""
    (aw.paths.config_dir / "config.toml").write_text(
        '[[answer_rules]]\nname = "touch"\ncommand = "touch *"\nanswer = { option = 1 }\n',
        encoding="utf-8")
    cases = [(p, e) for p in sorted((FIXTURES / agent).glob("*.json"))
             if (e := _event_of(agent, p)) is not None]
    assert cases, f"no captured hook payloads for {agent}"
    compared = 0
    from agentwrap.message import NewMessage, QueueLimits, Source

    many = Service.open(aw.paths, limits=QueueLimits(rate_per_minute=1_000_000))

    def through(via: str, path: Path, event: str, queued: bool) -> bytes:
        mid = many.send(NewMessage(session="fake", content="CI failed on main: test_login",
                                   source=Source.WEBHOOK, source_id="ci")).message.id \
            if queued else None
        got = run_client(aw, client, event, path.read_bytes(), agent=agent, via=via)
        assert (got.returncode, got.stderr) == (0, b""), (via, path.name, got.stderr[-2000:])
        out = got.stdout
        if mid is not None:
            m = many.get(mid)
            if m.batch_id:
                out = out.replace(m.batch_id.encode(), b"<token>")
            if m.status is Status.PENDING:
                many.cancel(mid)  # the next run starts from the same queue
        return out

    from agentwrap.surfaces.hooks.protocol import CONTEXT, action, normalised

    def kind(path: Path, event: str) -> str | None:
        return action(agent, event, normalised(agent, json.loads(path.read_bytes())))

    hands_over = [(p, e) for p, e in cases if kind(p, e) == CONTEXT]
    one_of_each = list({kind(p, e): (p, e) for p, e in cases}.values())
    # a queue matters to a hand-over only; with no server both run the same Python
    # hook (the native client's fallback), so one event of each kind says it
    passes = [(True, False, cases), (True, True, hands_over), (False, False, one_of_each)]
    for with_server, queued, todo in passes:
        for path, event in todo:
            replies = {}
            for via in CLIENTS:
                if with_server:
                    with server(aw):
                        replies[via] = through(via, path, event, queued)
                else:
                    replies[via] = through(via, path, event, queued)
            assert replies["native"] == replies["python"], (agent, path.name, with_server, queued)
            compared += 1
    many.close()
    assert compared == sum(len(todo) for *_, todo in passes)


def test_a_page_holding_the_keyboard_does_not_hold_up_a_mid_turn_hand_over(
        aw: AwEnv, svc: Service, client: Path) -> None:
    """Issue 42: while a person has taken over the page's keyboard
    (:meth:`~agentwrap.terminal.tmux.TmuxTerminal.held`), the typing path and
    Codex's turn/start wait; Claude's hooks channel does not. It only ever
    answers a hook inside a turn that is already running (PostToolBatch:
    additional context, never typed, never a turn of its own; Stop and
    UserPromptSubmit are signals that hand nothing over), so it can neither
    type over the person's keys nor start a turn under them: the same as
    Codex's steer into its running turn, and as for a person typing in tmux."""
    from agentwrap.terminal.live import takeover_marker
    from agentwrap.terminal.tmux import TmuxTerminal

    sock = aw.paths.tmux_socket_for("fake")
    sock.parent.mkdir(parents=True, exist_ok=True)
    marker = takeover_marker(sock.parent, "fake")
    marker.write_text("600")  # a page holds it, idle limit 10 minutes
    term = TmuxTerminal.__new__(TmuxTerminal)
    term.runtime_dir, term.session = sock.parent, "fake"
    assert term.held()  # the supervisor's terminal says the page holds it
    mid = send(svc, "CI failed on main")
    with server(aw):
        got = run_client(aw, client, "PostToolBatch", BATCH)
        stop = run_client(aw, client, "Stop", STOP)
    assert "[webhook:ci] CI failed on main" in context_of(got.stdout.decode(), "PostToolBatch")
    assert evidence(svc, mid) == "handed to the agent's hook by the supervisor"
    assert stop.stdout == b""  # a turn's end hands nothing over: no turn started under them
    assert term.held()
