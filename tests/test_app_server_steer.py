"""Steering into Codex's running turn through its app-server (issue 24), with a
scripted stand-in for the server: which messages are steered and which wait,
the write-ahead record, a steer refused because the turn just ended, and a
supervisor restarted after a crash between the steer and its record. The real
server is driven by tests/e2e/test_codex_steer.py (and the protocol by
tests/e2e/test_codex_server.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.app_server_host import Host as _Host

from agentwrap.app_server.delivery import CHANNEL, AppServerDelivery, steer_priorities
from agentwrap.audit import AuditLog
from agentwrap.codex_server import ThreadStatus, UserMessage
from agentwrap.codex_server.protocol import turn_in_progress
from agentwrap.config import Config, load_config
from agentwrap.errors import AppServerError, AppServerRefused, ConfigError
from agentwrap.message import Message, NewMessage, Priority, Source, Status
from agentwrap.paths import Paths
from agentwrap.queue.sqlite import SQLiteMessageStore

THREAD = "th-1"


@dataclass
class FakeServer:
    """The client and the state as AppServerDelivery uses them: a thread that
    is idle or runs turn ``turn``; what was sent, in order."""

    kind: str = "idle"
    flags: tuple[str, ...] = ()
    turn: str | None = None
    sent: list[tuple[str, str, str]] = field(default_factory=list)  # (method, text, client id)
    items: list[UserMessage] = field(default_factory=list)
    end_turn_before_steer: bool = False
    lose_answer: bool = False  # the connection drops after the request went out
    listed: bool = True  # the thread's items list what was sent (not yet, just after)
    thread_id: str = THREAD
    changed_at: float | None = None
    since: float | None = None  # what the last lookup was bounded by

    # the state
    def status(self) -> ThreadStatus:
        return ThreadStatus(self.thread_id, self.kind, self.flags)

    def status_of(self, thread_id: str) -> ThreadStatus:
        return ThreadStatus(thread_id, self.kind, self.flags)

    def note_turn_start(self, thread_id: str) -> None:
        pass

    def client(self) -> FakeServer:
        return self

    def close(self) -> None:
        pass

    # the client
    def running_turn(self, thread_id: str) -> str | None:
        return self.turn if self.kind == "active" else None

    def start_turn(self, thread_id: str, text: str, client_id: str) -> str:
        self.turn = f"turn-{len(self.sent) + 1}"
        self.sent.append(("turn/start", text, client_id))
        self.items.append(UserMessage(f"item-{len(self.items)}", self.turn, client_id, text))
        return self.turn

    def steer(self, thread_id: str, turn_id: str, text: str, client_id: str) -> str:
        if self.end_turn_before_steer:  # the turn ended between the look and the steer
            self.kind, self.turn = "idle", None
        if self.kind != "active" or turn_id != self.turn:
            raise AppServerRefused(f"expected active turn id `{turn_id}` but found `{self.turn}`")
        self.sent.append(("turn/steer", text, client_id))
        self.items.append(UserMessage(f"item-{len(self.items)}", turn_id, client_id, text))
        if self.lose_answer:
            raise AppServerError("connection lost")
        return turn_id

    def find_message(self, thread_id: str, client_id: str, *,
                     since: float | None = None) -> UserMessage | None:
        self.since = since
        if not self.listed:
            return None
        return next((m for m in self.items if m.client_id == client_id), None)

    def agent_messages(self, thread_id: str, **_: Any) -> list[Any]:
        return []




@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = SQLiteMessageStore(tmp_path / "q.db")
    yield s
    s.close()


def _part(server: FakeServer, store: SQLiteMessageStore, tmp_path: Path,
          steer: str = "high") -> AppServerDelivery:
    return AppServerDelivery(server, store, AuditLog(tmp_path / "audit.log"), "cx",  # type: ignore[arg-type]
                             ack_wording="", require_ack=False, ack_patterns=(),
                             syntax=None, limit_chars=10_000, steer=steer_priorities(steer))


def _send(store: SQLiteMessageStore, text: str, priority: Priority = Priority.NORMAL) -> Message:
    return store.enqueue(NewMessage(session="cx", content=text, source=Source.USER,
                                    priority=priority))[0]


def test_a_high_message_is_steered_into_the_running_turn_a_normal_one_waits(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    server = FakeServer(kind="active", turn="turn-0")
    part = _part(server, store, tmp_path)
    normal = _send(store, "normal one")
    urgent = _send(store, "urgent one", Priority.HIGH)
    part.turn(_Host())  # type: ignore[arg-type]
    assert [(m, c) for m, _, c in server.sent] == [
        ("turn/steer", store.attempts(urgent.id)[0].batch_id)]
    assert "urgent one" in server.sent[0][1] and "normal one" not in server.sent[0][1]
    done = store.get(urgent.id)
    assert done.status is Status.DELIVERED and "turn/steer: turn turn-0" in done.detail
    assert [a.outcome for a in store.attempts(urgent.id)] == ["delivered"]
    assert store.get(normal.id).status is Status.PENDING  # waits for the turn's end
    server.kind, server.turn = "idle", None
    part.turn(_Host())  # type: ignore[arg-type]
    assert [m for m, _, _ in server.sent] == ["turn/steer", "turn/start"]
    assert store.get(normal.id).status is Status.DELIVERED


def test_no_second_turn_start_while_the_servers_idle_predates_our_first(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    """A turn/start went out and the server has not said "active" yet: the idle
    it said before is stale, so the next message waits (sent then, Codex puts it
    into the starting turn and asks the model again with both). Once the server
    has spoken since (the turn ran and ended), it goes as a turn of its own."""
    import time

    server = FakeServer(changed_at=time.monotonic() - 5.0)
    part = _part(server, store, tmp_path)
    _send(store, "first")
    part.turn(_Host())  # type: ignore[arg-type]
    second = _send(store, "second")
    part.turn(_Host())  # type: ignore[arg-type]
    assert [m for m, _, _ in server.sent] == ["turn/start"]
    assert store.get(second.id).status is Status.PENDING
    server.changed_at = time.monotonic()  # "active", then "idle": the turn has ended
    part.turn(_Host())  # type: ignore[arg-type]
    assert [m for m, _, _ in server.sent] == ["turn/start", "turn/start"]
    assert "second" in server.sent[1][1] and store.get(second.id).status is Status.DELIVERED


@pytest.mark.parametrize("mode, steered", [("off", False), ("high", False), ("all", True)])
def test_the_steer_setting_decides_which_priorities_are_steered(
    store: SQLiteMessageStore, tmp_path: Path, mode: str, steered: bool,
) -> None:
    server = FakeServer(kind="active", turn="turn-0")
    msg = _send(store, "a normal message")
    _part(server, store, tmp_path, mode).turn(_Host())  # type: ignore[arg-type]
    assert bool(server.sent) is steered
    assert (store.get(msg.id).status is Status.DELIVERED) is steered


def test_nothing_is_steered_while_a_dialog_waits(store: SQLiteMessageStore,
                                                 tmp_path: Path) -> None:
    server = FakeServer(kind="active", turn="turn-0", flags=("waitingOnApproval",))
    msg = _send(store, "urgent", Priority.CRITICAL)
    _part(server, store, tmp_path).turn(_Host())  # type: ignore[arg-type]
    assert server.sent == [] and store.get(msg.id).status is Status.PENDING


def test_a_steer_refused_because_the_turn_ended_goes_as_turn_start_once(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    server = FakeServer(kind="active", turn="turn-0", end_turn_before_steer=True)
    part = _part(server, store, tmp_path)
    msg = _send(store, "urgent", Priority.HIGH)
    part.turn(_Host())  # type: ignore[arg-type]
    assert server.sent == []  # refused: nothing reached the thread
    back = store.get(msg.id)
    assert back.status is Status.PENDING and "turn/steer refused" in back.detail
    assert [a.outcome for a in store.attempts(msg.id)] == ["not_handed"]
    server.end_turn_before_steer = False
    part.turn(_Host())  # type: ignore[arg-type]  # idle now: a turn of its own
    assert [m for m, _, _ in server.sent] == ["turn/start"]
    assert store.get(msg.id).status is Status.DELIVERED
    part.turn(_Host())  # type: ignore[arg-type]
    assert len(server.sent) == 1


def test_a_steer_whose_answer_was_never_recorded_is_found_not_sent_again(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    """A supervisor that died between the steer and its record: the next one
    finds the batch's client id in the thread and settles it delivered."""
    from agentwrap.delivery.handover import take

    server = FakeServer(kind="active", turn="turn-0")
    msg = _send(store, "urgent", Priority.HIGH)
    got = take(store, "cx", channel=CHANNEL, max_bytes=10_000)
    assert got is not None
    got.handed("turn/steer sent")
    server.steer(THREAD, "turn-0", "urgent", got.token)  # then: kill -9
    part = _part(server, store, tmp_path)
    part.turn(_Host())  # type: ignore[arg-type]
    done = store.get(msg.id)
    assert done.status is Status.DELIVERED and "found in turn turn-0" in done.detail
    assert len(server.sent) == 1


def test_a_turn_that_refuses_a_steer_is_not_asked_again(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    """A turn that cannot be steered (Codex refuses it for a reason of its own):
    one refusal, then the message waits for the turn's end, not one a second."""
    server = FakeServer(kind="active", turn="turn-0")

    def refuse(*_: object) -> str:
        server.sent.append(("refused", "", ""))
        raise AppServerRefused("this turn cannot be steered")

    server.steer = refuse  # type: ignore[method-assign]
    part = _part(server, store, tmp_path)
    msg = _send(store, "urgent", Priority.HIGH)
    for _ in range(3):
        part.turn(_Host())  # type: ignore[arg-type]
    assert [m for m, _, _ in server.sent] == ["refused"]
    assert store.get(msg.id).status is Status.PENDING and store.get(msg.id).attempts == 1
    server.kind, server.turn = "idle", None
    part.turn(_Host())  # type: ignore[arg-type]
    assert [m for m, _, _ in server.sent] == ["refused", "turn/start"]
    assert store.get(msg.id).status is Status.DELIVERED


def test_a_lost_answer_not_yet_in_the_items_waits_for_idle_never_sent_twice(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    """The connection drops after the steer went out, and the thread's items do
    not list it yet (they lag the answer; a steer's input waits for the next
    model request): while the turn runs the batch stays in flight, not sent
    again; listed later, it is delivered."""
    server = FakeServer(kind="active", turn="turn-0", lose_answer=True, listed=False)
    part = _part(server, store, tmp_path)
    msg = _send(store, "urgent", Priority.HIGH)
    part.turn(_Host())  # type: ignore[arg-type]
    part.turn(_Host())  # type: ignore[arg-type]
    assert len(server.sent) == 1 and store.get(msg.id).status is Status.DELIVERING
    server.kind, server.turn, server.listed = "idle", None, True
    part.turn(_Host())  # type: ignore[arg-type]
    done = store.get(msg.id)
    assert done.status is Status.DELIVERED and "found in turn turn-0" in done.detail
    assert len(server.sent) == 1
    handed = store.attempts(msg.id)[0]
    assert server.since == handed.started  # looked for among the items since it went


def test_a_handed_batch_never_listed_goes_back_once_the_thread_is_idle(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    """Handed, then the supervisor died before the request went out: not in the
    items; once the thread has been idle a moment it goes back and is sent once."""
    import time

    from agentwrap.delivery.handover import take

    server = FakeServer(kind="active", turn="turn-0")
    msg = _send(store, "urgent", Priority.HIGH)
    got = take(store, "cx", channel=CHANNEL, max_bytes=10_000)
    assert got is not None
    got.handed("turn/steer sent")  # then: kill -9, nothing sent
    part = _part(server, store, tmp_path)
    part.turn(_Host())  # type: ignore[arg-type]
    assert server.sent == [] and store.get(msg.id).status is Status.DELIVERING
    server.kind, server.turn, server.changed_at = "idle", None, time.monotonic()
    part.turn(_Host())  # type: ignore[arg-type]  # idle only just: still undecided
    assert server.sent == [] and store.get(msg.id).status is Status.DELIVERING
    server.changed_at = time.monotonic() - 5
    part.turn(_Host())  # type: ignore[arg-type]
    part.turn(_Host())  # type: ignore[arg-type]
    assert [m for m, _, _ in server.sent] == ["turn/start"]
    assert store.get(msg.id).status is Status.DELIVERED
    assert [a.outcome for a in store.attempts(msg.id)] == ["not_handed", "delivered"]


def test_the_running_turn_is_read_from_thread_turns_list() -> None:
    running = {"data": [{"id": "t2", "status": "inProgress"}, {"id": "t1", "status": "completed"}]}
    assert turn_in_progress(running) == "t2"
    assert turn_in_progress({"data": [{"id": "t1", "status": "completed"}]}) is None
    assert turn_in_progress({"data": []}) is None and turn_in_progress(None) is None


def test_steer_is_off_high_or_all(tmp_path: Path) -> None:
    assert Config().delivery.steer == "high"
    assert steer_priorities("high") == {Priority.HIGH, Priority.CRITICAL}
    assert steer_priorities("off") == frozenset() and Priority.LOW in steer_priorities("all")
    paths = Paths.from_env({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                            "XDG_STATE_HOME": str(tmp_path / "state")})
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text('[profiles.codex.delivery]\nsteer = "all"\n')
    assert load_config(paths, tmp_path).for_profile("codex").delivery.steer == "all"
    paths.config_file.write_text('[delivery]\nsteer = "sometimes"\n')
    with pytest.raises(ConfigError, match=r"delivery\.steer: must be one of off, high, all"):
        load_config(paths, tmp_path)


# --- one channel per session mode: the server's, until it is declared dead -----------------


class _StandInServer:
    """A scripted app-server on a unix socket (WebSocket, JSON-RPC as Codex
    0.169.0 speaks it): the handshake, and one thread, ``th-1``, of status
    ``status`` (idle), loaded from the ``hidden``-th ``thread/loaded/list`` on
    (the first ones list none: the TUI's thread not loaded yet)."""

    def __init__(self, path: Path, status: str = "idle", hidden: int = 0) -> None:
        import threading

        from websockets.sync.server import unix_serve

        self.status, self.hidden = status, hidden
        self.lists = 0  # thread/loaded/list requests answered
        self.server = unix_serve(self._serve, str(path))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _serve(self, conn: Any) -> None:
        import json

        from websockets.exceptions import ConnectionClosed

        answers: dict[str, Any] = {
            "initialize": {"codexHome": "/nowhere"},
            "thread/read": {"thread": {"id": THREAD, "ephemeral": False,
                                       "status": {"type": self.status}}},
            "thread/resume": {"thread": {"id": THREAD}},
        }
        try:
            for raw in conn:
                msg = json.loads(raw)
                if msg.get("method") == "thread/loaded/list":
                    self.lists += 1
                    loaded = [THREAD] if self.lists > self.hidden else []
                    conn.send(json.dumps({"id": msg["id"], "result": {"data": loaded}}))
                elif "id" in msg and msg.get("method") in answers:
                    conn.send(json.dumps({"id": msg["id"], "result": answers[msg["method"]]}))
        except ConnectionClosed:
            pass

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=5)


def test_the_server_takes_the_messages_while_it_lives_and_typing_only_once_it_is_dead(
    tmp_path: Path,
) -> None:
    """Which channel a session on Codex's app-server types with: none while the
    server is not ready yet (nothing listens; a restart under way), the server's
    once it answers with the thread; typing (every kind) only once the server
    has been unusable for ``dead_after_s``."""
    from support.waiting import wait_for

    from agentwrap.app_server.delivery import server_takes
    from agentwrap.app_server.state import AppServerState
    from agentwrap.delivery.handover import CONSUMABLE_KINDS

    sock = tmp_path / "s.sock"
    waiting = AppServerState(sock)  # nothing listens yet: not ready, not dead
    assert server_takes(waiting) == CONSUMABLE_KINDS
    gone = AppServerState(sock, dead_after_s=0.0)  # unusable at once: declared dead
    assert server_takes(gone) == frozenset()
    server = _StandInServer(sock)
    try:
        # it comes back: the server's again (reconnections are tried every 2 s)
        wait_for(lambda: not gone.dead(), 30, "the stand-in server reached")
        assert server_takes(gone) == CONSUMABLE_KINDS
        assert gone.status() == ThreadStatus(THREAD, "idle", ())
    finally:
        server.stop()
        gone.close()
        waiting.close()


def test_a_thread_not_loaded_when_the_connection_looked_is_found_later(tmp_path: Path) -> None:
    """The connection's first look found no thread (the TUI's not loaded yet,
    and its ``thread/started`` went by before the connection listened): it
    looks again while connected, and the server's channel works, instead of
    the session's messages waiting for it to be declared dead."""
    from support.waiting import wait_for

    from agentwrap.app_server.delivery import server_takes
    from agentwrap.app_server.state import AppServerState
    from agentwrap.delivery.handover import CONSUMABLE_KINDS

    sock = tmp_path / "s.sock"
    server = _StandInServer(sock, hidden=2)
    state = AppServerState(sock)
    try:
        assert state.status() is None and state.thread_id is None  # the first look: none
        wait_for(lambda: state.status() is not None, 10, "the thread found by a later look")
        assert state.status() == ThreadStatus(THREAD, "idle", ()) and server.lists >= 3
        assert server_takes(state) == CONSUMABLE_KINDS and not state.dead()
    finally:
        state.close()
        server.stop()


@pytest.mark.parametrize("status", ["notLoaded", "systemError"])
def test_a_thread_status_nothing_can_be_sent_on_is_the_server_unusable(
        tmp_path: Path, status: str) -> None:
    """A status that is neither idle nor active: the server's delivery sends
    nothing on it and the screen decides the state, so it counts as unusable:
    once it lasts ``dead_after_s`` typing takes the messages (before, they
    waited for a status change that never came)."""
    from support.waiting import wait_for

    from agentwrap.app_server.delivery import server_takes
    from agentwrap.app_server.state import AppServerState

    sock = tmp_path / "s.sock"
    server = _StandInServer(sock, status=status)
    state = AppServerState(sock, dead_after_s=0.3)
    try:
        wait_for(lambda: state.status() is not None, 10, "the thread read")
        assert state.status() == ThreadStatus(THREAD, status, ()) and state.read() is None
        wait_for(state.dead, 10, "the unusable server declared dead")
        assert server_takes(state) == frozenset()
    finally:
        state.close()
        server.stop()


def test_a_message_too_long_for_one_block_goes_alone_and_whole_not_left_behind(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    """A message near the content limit: framed, it is longer than a typed
    block may be. The server's turn input takes it (1 MiB in Codex), and typing
    never takes a message while the server lives: so the server sends it alone
    and uncut, and what queued behind it follows in the next turn (left queued,
    it would have waited for its TTL and held up the rest)."""
    server = FakeServer()
    part = _part(server, store, tmp_path)
    big = _send(store, "x" * 9_990 + " the end")
    after = _send(store, "behind it")
    part.turn(_Host())  # type: ignore[arg-type]
    assert [m for m, _, _ in server.sent] == ["turn/start"]
    assert "x" * 9_990 + " the end" in server.sent[0][1] and "behind it" not in server.sent[0][1]
    assert len(server.sent[0][1]) > 10_000 and "characters cut" not in server.sent[0][1]
    assert store.get(big.id).status is Status.DELIVERED
    server.changed_at = time.monotonic()  # the turn ran and ended
    part.turn(_Host())  # type: ignore[arg-type]
    assert [m for m, _, _ in server.sent] == ["turn/start", "turn/start"]
    assert store.get(after.id).status is Status.DELIVERED


@dataclass
class TwoThreads(FakeServer):
    """The stand-in with each send's thread kept: the person's TUI moves to
    another thread (/new) while a batch's answer from the first is lost."""

    went_to: dict[str, str] = field(default_factory=dict)  # client id -> thread
    threads: list[str] = field(default_factory=list)  # each send's thread, in order

    def start_turn(self, thread_id: str, text: str, client_id: str) -> str:
        self.went_to[client_id] = thread_id
        self.threads.append(thread_id)
        return super().start_turn(thread_id, text, client_id)

    def steer(self, thread_id: str, turn_id: str, text: str, client_id: str) -> str:
        self.went_to[client_id] = thread_id
        self.threads.append(thread_id)
        return super().steer(thread_id, turn_id, text, client_id)

    def find_message(self, thread_id: str, client_id: str, *,
                     since: float | None = None) -> UserMessage | None:
        if self.went_to.get(client_id) != thread_id:
            return None  # the other thread's items do not list it
        return super().find_message(thread_id, client_id, since=since)


def test_a_batch_handed_to_the_thread_the_person_left_is_settled_there_once(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    """A steer's answer is lost in thread 1; the person types /new (the state now
    follows thread 2): the batch is looked for in thread 1's items, where it is,
    and delivered once, never sent again into thread 2; the next message goes to
    thread 2."""
    server = TwoThreads(kind="active", turn="turn-0", lose_answer=True, listed=False)
    part = _part(server, store, tmp_path)
    first = _send(store, "urgent", Priority.HIGH)
    part.turn(_Host())  # type: ignore[arg-type]
    assert server.threads == [THREAD] and store.get(first.id).status is Status.DELIVERING
    # /new: thread 2, idle a while; thread 1's items now list the steer
    server.thread_id, server.kind, server.turn = "th-2", "idle", None
    server.lose_answer, server.listed, server.changed_at = False, True, time.monotonic() - 5
    part.turn(_Host())  # type: ignore[arg-type]
    done = store.get(first.id)
    assert done.status is Status.DELIVERED and "found in turn turn-0" in done.detail, done.detail
    second = _send(store, "next one")
    part.turn(_Host())  # type: ignore[arg-type]
    assert server.threads == [THREAD, "th-2"]  # each once, the second into the new thread
    assert store.get(second.id).status is Status.DELIVERED


def test_an_ack_is_read_in_the_thread_its_batch_went_to(
    store: SQLiteMessageStore, tmp_path: Path,
) -> None:
    """A batch awaiting its ACK in thread 1 when the person types /new: the ACK is
    the model's reply in thread 1, read there (thread 2 never says it)."""
    from agentwrap.codex_server import AgentMessage

    class Acking(TwoThreads):
        def agent_messages(self, thread_id: str, **_: Any) -> list[Any]:
            return [AgentMessage("a-1", "turn-1", f"ACK {token}")
                    for token, went in self.went_to.items() if went == thread_id]

    server = Acking()
    part = AppServerDelivery(server, store, AuditLog(tmp_path / "audit.log"), "cx",  # type: ignore[arg-type]
                             ack_wording="Reply \"ACK {token}\".", require_ack=True,
                             ack_patterns=(r"ACK {token}",), syntax=None, limit_chars=10_000)
    msg = _send(store, "please ack")
    part.turn(_Host())  # type: ignore[arg-type]  # turn/start in thread 1, awaiting its ACK
    assert server.threads == [THREAD] and store.get(msg.id).status is Status.DELIVERING
    server.thread_id = "th-2"  # /new, before the ACK was looked for
    server.changed_at = time.monotonic()  # the server's word since the turn/start
    part.turn(_Host())  # type: ignore[arg-type]
    assert store.get(msg.id).status is Status.ACKNOWLEDGED
    assert server.threads == [THREAD]
