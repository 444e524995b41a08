"""agentwrap's client of Codex's app-server, on the real Codex 0.169.0 (issue 24).

Each test starts a private ``codex app-server --listen unix://PATH`` against the
loopback model server and drives it through :class:`AppServerClient`: a turn
started while idle, a steer inside a running turn, Codex's own queue, an
approval request answered (accept runs the exact command, decline does not),
the message recognised by its client id afterwards (what a supervisor restarted
after a crash relies on), and the server's death seen by the client. What the
TUI renders of each is in docs/codex-app-server.md; the last test checks the
one the delivery relies on: a turn started here shows in ``codex --remote`` as
the person's input.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.app_server_host import Host as _Host

from agentwrap.codex_server import (
    ApprovalRequest,
    AppServer,
    AppServerClient,
    Notification,
    agent_message,
    support_problem,
    thread_status,
)
from agentwrap.errors import AppServerError, AppServerRefused

from .agents import AgentLaunch, prepare_agent
from .conftest import require_agent
from .model_server import ModelServer

pytestmark = pytest.mark.e2e

WAIT_S = 60.0


class Recorder:
    """Every message the client hands over, in order, with a wait on a condition."""

    def __init__(self) -> None:
        self.messages: list[Notification | ApprovalRequest] = []
        self._cond = threading.Condition()

    def __call__(self, message: Notification | ApprovalRequest) -> None:
        with self._cond:
            self.messages.append(message)
            self._cond.notify_all()

    def wait_for(
        self, pred: Callable[[Notification | ApprovalRequest], bool], what: str
    ) -> Notification | ApprovalRequest:
        deadline = time.monotonic() + WAIT_S
        with self._cond:
            while True:
                for m in self.messages:
                    if pred(m):
                        return m
                left = deadline - time.monotonic()
                assert left > 0, f"no {what} in {WAIT_S} s; got {[_name(m) for m in self.messages]}"
                self._cond.wait(left)

    def notes(self, method: str) -> list[Notification]:
        with self._cond:
            return [m for m in self.messages if isinstance(m, Notification) and m.method == method]


def _name(m: Notification | ApprovalRequest) -> str:
    return m.method


def _is(method: str, **where: str) -> Callable[[Notification | ApprovalRequest], bool]:
    def pred(m: Notification | ApprovalRequest) -> bool:
        if not isinstance(m, Notification) or m.method != method:
            return False
        return all(_field(m.params, k) == v for k, v in where.items())

    return pred


def _field(params: dict[str, object], dotted: str) -> object:
    value: object = params
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _agent_said(text: str) -> Callable[[Notification | ApprovalRequest], bool]:
    def pred(m: Notification | ApprovalRequest) -> bool:
        if not isinstance(m, Notification) or m.method != "item/completed":
            return False
        item = m.params.get("item")
        said = agent_message(item, None) if isinstance(item, dict) else None
        # endswith: a steer while the first reply streams makes Codex ask again with
        # both inputs, and the scripted model answers both (the slow lines, then TEXT)
        return said is not None and said.text.endswith(text)

    return pred


def _reached(rig: Rig, text: str) -> int:
    """How many model requests carried ``text`` as their newest user input (the
    first turn's also carries Codex's environment context in the same message)."""
    return sum(1 for t in rig.model.user_texts() if t.endswith(text))


class Rig:
    def __init__(self, launch: AgentLaunch, server: ModelServer, sock_dir: Path) -> None:
        self.launch = launch
        self.model = server
        self.socket = sock_dir / "codex.sock"
        self.app = AppServer.start(
            launch.argv[0], self.socket, env=launch.env, cwd=launch.cwd,
            log=sock_dir / "app-server.log",
        )
        self.client = AppServerClient.connect(self.socket)
        self.seen = Recorder()
        self.client.on_message(self.seen)
        self.thread = self.client.start_thread(launch.cwd)

    def idle_after(self, turn_id: str) -> None:
        self.seen.wait_for(_is("turn/completed", **{"turn.id": turn_id}), f"end of {turn_id}")

    def close(self) -> None:
        self.client.close()
        self.app.stop()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    require_agent("codex")
    sock_dir = Path(tempfile.mkdtemp(prefix="aw-cx-"))  # a socket path must stay short
    os.chmod(sock_dir, 0o700)
    with ModelServer() as server:
        launch = prepare_agent("codex", tmp_path / "home", tmp_path / "work", server.url)
        r = Rig(launch, server, sock_dir)
        try:
            yield r
        finally:
            r.close()
            shutil.rmtree(sock_dir, ignore_errors=True)


def test_a_turn_started_while_idle_reaches_the_model_once_and_is_found_by_its_client_id(
    rig: Rig,
) -> None:
    turn = rig.client.start_turn(rig.thread, "[[reply: pong-one]]", "aw-attempt-1")
    rig.seen.wait_for(_agent_said("pong-one"), "the reply")
    rig.idle_after(turn)
    rig.seen.wait_for(
        lambda m: isinstance(m, Notification) and m.method == "thread/status/changed"
        and not thread_status(m.params).busy, "idle status",
    )
    assert _reached(rig, "[[reply: pong-one]]") == 1
    found = rig.client.find_message(rig.thread, "aw-attempt-1")
    assert found is not None and found.turn_id == turn and found.text == "[[reply: pong-one]]"
    assert rig.client.find_message(rig.thread, "aw-never-sent") is None


def test_a_steer_lands_inside_the_running_turn(rig: Rig) -> None:
    turn = rig.client.start_turn(rig.thread, "[[slow: 3]]", "aw-slow")
    rig.seen.wait_for(_is("item/agentMessage/delta", turnId=turn), "streaming")
    assert rig.client.steer(rig.thread, turn, "[[reply: steered-in]]", "aw-steer") == turn
    rig.seen.wait_for(_agent_said("steered-in"), "the steered reply")
    rig.idle_after(turn)
    assert len(rig.seen.notes("turn/started")) == 1  # no second turn: the same one
    assert _reached(rig, "[[reply: steered-in]]") == 1
    found = rig.client.find_message(rig.thread, "aw-steer")
    assert found is not None and found.turn_id == turn
    with pytest.raises(AppServerRefused):  # the turn is over: a steer is refused, not queued
        rig.client.steer(rig.thread, turn, "late", "aw-late")


def test_codex_queue_starts_the_message_as_the_next_turn(rig: Rig) -> None:
    first = rig.client.start_turn(rig.thread, "[[slow: 2]]", "aw-first")
    rig.seen.wait_for(_is("item/agentMessage/delta", turnId=first), "streaming")
    rig.client.queue(rig.thread, "[[reply: queued-next]]", "aw-queued")
    rig.seen.wait_for(_agent_said("queued-next"), "the queued reply")
    started = [n.params["turn"]["id"] for n in rig.seen.notes("turn/started")]
    assert len(started) == 2 and started[0] == first
    found = rig.client.find_message(rig.thread, "aw-queued")
    assert found is not None and found.turn_id == started[1]


def _approval(rig: Rig) -> ApprovalRequest:
    got = rig.seen.wait_for(lambda m: isinstance(m, ApprovalRequest), "an approval request")
    assert isinstance(got, ApprovalRequest)
    return got


@pytest.mark.parametrize("decision", ["accept", "decline"])
def test_an_approval_request_names_the_exact_command_and_its_answer_decides(
    rig: Rig, decision: str
) -> None:
    turn = rig.client.start_turn(rig.thread, "[[tool]]", "aw-tool")
    request = _approval(rig)
    assert request.method == "item/commandExecution/requestApproval"
    assert request.actions == ("touch tool_ran.txt",)
    assert request.command is not None and "touch tool_ran.txt" in request.command
    assert request.cwd == str(rig.launch.cwd)
    assert request.turn_id == turn and request.thread_id == rig.thread
    assert "accept" in request.decisions
    rig.client.answer(request, decision)
    rig.seen.wait_for(_is("serverRequest/resolved"), "the request resolved")
    rig.idle_after(turn)
    assert (rig.launch.cwd / "tool_ran.txt").exists() == (decision == "accept")


def test_the_client_sees_the_server_die(rig: Rig) -> None:
    rig.app.stop(grace=0.5)
    assert rig.client.wait_closed(WAIT_S)
    with pytest.raises(AppServerError) as lost:
        rig.client.start_turn(rig.thread, "after death", "aw-dead")
    assert not isinstance(lost.value, AppServerRefused)  # it may not be taken as "not done"


def test_the_installed_codex_supports_the_app_server() -> None:
    exe = require_agent("codex")
    assert support_problem(str(exe)) is None


def test_a_turn_started_by_agentwrap_shows_in_the_remote_tui_as_the_persons_input(
    tmp_path: Path,
) -> None:
    require_agent("codex")
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed")
    sock_dir = Path(tempfile.mkdtemp(prefix="aw-cx-"))
    tmux = ["tmux", "-L", f"aw-cx-{os.getpid()}", "-f", "/dev/null"]
    with ModelServer() as server:
        launch = prepare_agent("codex", tmp_path / "home", tmp_path / "work", server.url)
        app = AppServer.start(launch.argv[0], sock_dir / "codex.sock", env=launch.env, cwd=launch.cwd)
        client = AppServerClient.connect(app.socket)
        seen = Recorder()
        client.on_message(seen)
        try:
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in launch.env.items())
            subprocess.run(
                [*tmux, "new-session", "-d", "-x", "120", "-y", "40", "-c", str(launch.cwd),
                 f"env -i {env} {shlex.quote(launch.argv[0])} --remote unix://{app.socket}"],
                check=True,
            )
            started = seen.wait_for(
                lambda m: isinstance(m, Notification) and m.method == "thread/started"
                and not _field(m.params, "thread.ephemeral"), "the TUI's thread",
            )
            assert isinstance(started, Notification)
            thread = str(_field(started.params, "thread.id"))
            client.start_turn(thread, "[[reply: shown-as-typed]]", "aw-shown")
            deadline = time.monotonic() + WAIT_S
            screen = ""
            while time.monotonic() < deadline:
                screen = subprocess.run(
                    [*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=False
                ).stdout
                if "› [[reply: shown-as-typed]]" in screen and "• shown-as-typed" in screen:
                    break
                time.sleep(0.2)
            assert "› [[reply: shown-as-typed]]" in screen and "• shown-as-typed" in screen, screen
        finally:
            subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
            client.close()
            app.stop()
            shutil.rmtree(sock_dir, ignore_errors=True)




def test_a_supervisor_crash_around_turn_start_ends_each_batch_exactly_once(
    rig: Rig, tmp_path: Path
) -> None:
    """Two batches recorded ``handed`` to the server by a supervisor that then
    died: one after turn/start went out (its answer never recorded), one before.
    The next supervisor finds the first in the thread by its client id (delivered,
    not sent again) and sends the second once."""
    from agentwrap.app_server.delivery import CHANNEL, AppServerDelivery
    from agentwrap.app_server.state import AppServerState
    from agentwrap.audit import AuditLog
    from agentwrap.delivery.handover import take
    from agentwrap.message import NewMessage, Source, Status
    from agentwrap.queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(tmp_path / "q.db")
    try:
        sent, unsent = (
            store.enqueue(NewMessage(session="cx", content=f"[[reply: {w}]]", source=Source.USER))[0]
            for w in ("first-once", "second-once"))
        a = take(store, "cx", channel=CHANNEL, max_bytes=10_000, limit=1)
        b = take(store, "cx", channel=CHANNEL, max_bytes=10_000, limit=1)
        assert a is not None and b is not None and a.messages[0].id == sent.id
        a.handed("turn/start sent")
        b.handed("turn/start sent")
        turn = rig.client.start_turn(rig.thread, "[[reply: first-once]]", a.token)  # then: crash
        rig.idle_after(turn)

        state = AppServerState(rig.socket)
        part = AppServerDelivery(state, store, AuditLog(tmp_path / "audit.log"), "cx",
                                 ack_wording="", require_ack=False, ack_patterns=(),
                                 syntax=None, limit_chars=10_000)
        part.turn(_Host())  # type: ignore[arg-type]
        first = store.get(sent.id)
        assert first.status is Status.DELIVERED and f"found in turn {turn}" in first.detail
        second = store.get(unsent.id)
        assert second.status is Status.DELIVERED and "turn/start: turn" in second.detail
        rig.seen.wait_for(_agent_said("second-once"), "the second reply")
        assert _reached(rig, "[[reply: first-once]]") == 1
        assert sum(1 for t in rig.model.user_texts() if "second-once" in t) == 1
        part.close(None)
    finally:
        store.close()


def test_the_state_knows_a_thread_started_after_it_connected_as_idle(tmp_path: Path) -> None:
    """The TUI starts its thread after agentwrap's supervisor has connected: no
    status change comes until the first turn, so the thread's status is taken
    from thread/started (else the screen, and typing, would decide until then)."""
    from agentwrap.app_server.state import AppServerState

    require_agent("codex")
    sock_dir = Path(tempfile.mkdtemp(prefix="aw-cx-"))
    with ModelServer() as server:
        launch = prepare_agent("codex", tmp_path / "home", tmp_path / "work", server.url)
        app = AppServer.start(launch.argv[0], sock_dir / "codex.sock", env=launch.env,
                              cwd=launch.cwd)
        state = AppServerState(app.socket)
        try:
            assert state.status() is None  # connected; no thread yet
            with AppServerClient.connect(app.socket) as tui:
                thread = tui.start_thread(launch.cwd)
                deadline = time.monotonic() + WAIT_S
                while state.status() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                status = state.status()
                assert status is not None and status.thread_id == thread and not status.busy
                reading = state.read()
                assert reading is not None and "idle" in reading.reason
        finally:
            state.close()
            app.stop()
            shutil.rmtree(sock_dir, ignore_errors=True)
