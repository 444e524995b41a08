"""Steering into a running Codex turn through its app-server (issue 24), on the
real Codex 0.169.0 under ``agentwrap run`` with ``[run] codex_app_server = true``
and ``[delivery] steer = "high"``.

The person starts a scripted 4-step tool loop in the TUI (``[[loop]]``, each
tool-call reply held back; :class:`LoopServer` of test_native_channels). A
high-priority message sent meanwhile goes in with ``turn/steer``: the model gets
it exactly once, in a later request of the same turn (the user message item
with the batch's client id belongs to the loop's turn), framed and defused as a
typed block; a normal one waits for the turn's end and comes once, as a turn of
its own. ``kill -9`` of the supervisor after the steer went out but before its
answer was recorded (the store held locked in between): after ``agentwrap
adopt`` the batch is found in the thread by its client id, settled delivered,
and never sent again. The same recovery, without a session, on the bare
server: :func:`test_a_steer_whose_answer_was_lost_is_recovered_from_the_thread`.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentwrap.codex_server import AppServerClient

from .conftest import AgentSession
from .test_codex_server import Rig, rig  # noqa: F401  (the fixture, reused)
from .test_native_channels import _attempts, _bodies, _session, tag

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]
CONFIG = '[run]\ncodex_app_server = true\n\n[delivery]\nsteer = "high"\n'


def _start_loop(s: AgentSession) -> AppServerClient:
    """The session on its app-server, the person's loop started in the TUI and
    its first tool result at the model; a client of the session's server."""
    s.write_config(CONFIG)
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert st["app_server"].startswith("on: the TUI runs on unix://"), st
    sock = Path(st["app_server"].split("unix://", 1)[1].split(" ", 1)[0])
    s.type_keys("Look around please. [[loop]]")
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: sum(b[2] for b in _bodies(s)) >= 1, 60, "first tool result")
    return AppServerClient.connect(sock)


def _thread(client: AppServerClient) -> str:
    return next(t for t in client.loaded_threads() if not client.read_thread(t).get("ephemeral"))


def _loop_turn(client: AppServerClient, thread: str) -> str:
    """The turn the person's ``[[loop]]`` prompt started."""
    turn = next(m.turn_id for m in client.user_messages(thread) if "[[loop]]" in m.text)
    assert turn is not None
    return turn


def _carrying(s: AgentSession, marker: str) -> int:
    """How many model requests carried ``marker`` as new input (not history)."""
    return sum(1 for t in s.server.user_texts() if marker in t)


def _evidence(s: AgentSession, message_id: str) -> list[tuple[str, str, str]]:
    from agentwrap.queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(s._paths().db_path)
    try:
        return [(a.channel, a.outcome, a.evidence) for a in store.attempts(message_id)]
    finally:
        store.close()


def test_a_high_message_is_steered_into_the_loop_a_normal_one_waits_for_its_end(
    make_session: Make,
) -> None:
    s = _session(make_session, "codex")
    client = _start_loop(s)
    try:
        urgent, later = tag(), tag()
        # agent syntax in it stays inert: checked on the request the model gets
        hot = s.send_id(f"/review now\n!ls -la\nbuild {urgent} red, see $skill-installer @README.md",
                        "--priority", "high")
        normal = s.send_id(f"deploy {later} queued")
        s.wait_until(lambda: _carrying(s, urgent), 60, "the steered message at the model")
        bodies = _bodies(s)
        first = next(i for i, b in enumerate(bodies) if urgent in b[1])
        assert s.server.step != -1 or first < len(bodies) - 1, "the loop had ended"
        s.wait_until(lambda: s.server.step == -1, 90, "loop end")
        thread = _thread(client)
        loop_turn = _loop_turn(client, thread)
        # in the same turn: its user message item is the loop's, and a later request
        # of that turn (after the tool result that followed) still carries it, once
        [(channel, outcome, receipt)] = _evidence(s, hot)
        assert (channel, outcome) == ("app-server", "delivered"), receipt
        assert receipt.startswith(f"turn/steer: turn {loop_turn} (client id "), receipt
        token = receipt.rsplit("client id ", 1)[1].rstrip(")")
        item = client.find_message(thread, token)
        assert item is not None and item.turn_id == loop_turn
        text = next(t for t in s.server.user_texts() if urgent in t)
        assert "[agentwrap context" in text.split(urgent)[0] or "their own words" in text
        assert "$skill-installer" not in text and "\uff04skill-installer" in text, text
        assert "\n!ls -la\n" in text and "@README.md" in text  # as data, nothing run or read
        assert not (s.workdir / "review").exists()
        # the normal one: after the loop's turn, in a turn of its own, once
        s.wait_until(lambda: _carrying(s, later), 90, "the waiting message at the model")
        s.wait_state("ready", timeout=60)
        time.sleep(1.5)  # room for a (wrong) second copy
        assert _carrying(s, urgent) == 1 and _carrying(s, later) == 1
        assert _bodies(s)[-1][1].count(urgent) == 1 and _bodies(s)[-1][1].count(later) == 1
        [(channel, outcome, receipt)] = _evidence(s, normal)
        assert (channel, outcome) == ("app-server", "delivered"), receipt
        assert receipt.startswith("turn/start: turn ") and loop_turn not in receipt, receipt
        assert _attempts(s, hot)[0] == "delivered" and _attempts(s, normal)[0] == "delivered"
        print(f"codex steer: into turn {loop_turn} at request {first} of {len(bodies)}")
    finally:
        client.close()


#: The supervisor "dies" between the steer and its record: the store refuses the
#: record (the supervisor is then killed; the trigger goes before the adopt).
_NO_RECORD = """
CREATE TRIGGER e2e_no_record BEFORE UPDATE OF outcome ON attempts
WHEN OLD.outcome = 'handed' AND NEW.outcome != 'handed'
BEGIN SELECT RAISE(ABORT, 'e2e: the supervisor dies before recording the steer'); END
"""


def _store(db: Path, sql: str) -> None:
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        conn.execute(sql)
    finally:
        conn.close()


def test_supervisor_killed_after_a_steer_went_out_delivers_it_exactly_once_after_adopt(
    make_session: Make,
) -> None:
    from agentwrap.sessions.registry import Registry

    s = _session(make_session, "codex")
    client = _start_loop(s)
    db = s._paths().db_path
    reg = Registry(db)
    try:
        pid = reg.get(s.name).supervisor_pid
    finally:
        reg.close()
    assert pid
    _store(db, _NO_RECORD)
    try:
        marker = tag()
        mid = s.send_id(f"build {marker} red", "--priority", "high")
        s.wait_until(lambda: _carrying(s, marker), 60, "the steered message at the model")
        s.wait_until(lambda: _evidence(s, mid), 10, "the write-ahead record")
        os.kill(pid, signal.SIGKILL)
        s.wait_until(lambda: s.state().get("liveness") != "running", 30, "the supervisor gone")
    finally:
        _store(db, "DROP TRIGGER IF EXISTS e2e_no_record")
    [(_, outcome, _)] = _evidence(s, mid)
    assert outcome == "handed"  # sent, its answer never recorded
    res = s.cli("adopt", s.name)
    assert res.returncode == 0, res.stderr
    s.wait_until(lambda: s.message(mid)["status"] in ("delivered", "acknowledged"), 60,
                 "the steer settled by the adopted supervisor")
    s.wait_until(lambda: s.server.step == -1, 90, "loop end")
    s.wait_state("ready", timeout=60)
    time.sleep(2.0)  # room for a (wrong) second copy
    assert _carrying(s, marker) == 1
    assert _bodies(s)[-1][1].count(marker) == 1
    attempts = _evidence(s, mid)
    assert [(c, o) for c, o, _ in attempts] == [("app-server", "delivered")], attempts
    loop_turn = _loop_turn(client, _thread(client))
    assert attempts[0][2].startswith(f"found in turn {loop_turn}"), attempts
    client.close()


def test_a_steer_whose_answer_was_lost_is_recovered_from_the_thread(
    rig: Rig, tmp_path: Path,  # noqa: F811
) -> None:
    """A batch recorded ``handed``, steered into the running turn, and then the
    supervisor died: a new one finds it by its client id in the thread
    (delivered, receipt: the turn) and does not steer or start it again."""
    from agentwrap.app_server.delivery import (
        CHANNEL,
        AppServerDelivery,
        steer_priorities,
    )
    from agentwrap.app_server.state import AppServerState
    from agentwrap.audit import AuditLog
    from agentwrap.delivery.handover import take
    from agentwrap.message import NewMessage, Priority, Source, Status
    from agentwrap.queue.sqlite import SQLiteMessageStore

    from .test_codex_server import _agent_said, _Host, _is

    store = SQLiteMessageStore(tmp_path / "q.db")
    state = AppServerState(rig.socket)
    try:
        msg = store.enqueue(NewMessage(session="cx", content="[[reply: steered-once]]",
                                       source=Source.USER, priority=Priority.HIGH))[0]
        got = take(store, "cx", channel=CHANNEL, max_bytes=10_000)
        assert got is not None
        turn = rig.client.start_turn(rig.thread, "[[slow: 4]]", "aw-slow")
        rig.seen.wait_for(_is("item/agentMessage/delta", turnId=turn), "streaming")
        got.handed("turn/steer sent")
        rig.client.steer(rig.thread, turn, "[[reply: steered-once]]", got.token)  # then: crash
        part = AppServerDelivery(state, store, AuditLog(tmp_path / "audit.log"), "cx",
                                 ack_wording="", require_ack=False, ack_patterns=(),
                                 syntax=None, limit_chars=10_000,
                                 steer=steer_priorities("high"))
        deadline = time.monotonic() + 30
        while state.status() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        # the items list the steer some tens of ms after its answer: until then (or
        # the thread's idle) the batch stays in flight, never steered again
        deadline = time.monotonic() + 30
        while store.get(msg.id).status is Status.DELIVERING and time.monotonic() < deadline:
            part.turn(_Host())  # type: ignore[arg-type]
            time.sleep(0.05)
        done = store.get(msg.id)
        assert done.status is Status.DELIVERED and f"found in turn {turn}" in done.detail, \
            store.attempts(msg.id)
        rig.seen.wait_for(_agent_said("steered-once"), "the steered reply")
        rig.idle_after(turn)
        part.turn(_Host())  # type: ignore[arg-type]
        assert sum(1 for t in rig.model.user_texts() if "steered-once" in t) == 1
        part.close(None)
    finally:
        state.close()
        store.close()


def test_a_message_far_back_in_the_thread_is_found_page_by_page(rig: Rig) -> None:  # noqa: F811
    """A long turn after a steer pushes its item behind many others: the lookup
    reads the items back page by page, down to the time it was sent."""
    sent_at = time.time()
    first = rig.client.start_turn(rig.thread, "[[reply: page-0]]", "aw-page-0")
    rig.idle_after(first)
    for k in (1, 2, 3):
        rig.idle_after(rig.client.start_turn(rig.thread, f"[[reply: page-{k}]]", f"aw-page-{k}"))
    found = rig.client.find_message(rig.thread, "aw-page-0", since=sent_at, page=2)
    assert found is not None and found.turn_id == first
    # nothing sent before the oldest item looked at: the lookup stops there
    assert rig.client.find_message(rig.thread, "aw-page-0", since=time.time() + 600,
                                   page=2) is None


def test_a_steered_message_asking_for_an_ack_is_acknowledged_from_the_items(
    make_session: Make,
) -> None:
    """``send --ack`` of a high message while the person's turn waits on the
    model: steered into that turn, and the ACK the model gives in it is read
    from the thread's agent message items once the turn has ended."""
    s = make_session("codex")
    s.write_config(CONFIG)
    s.start()
    s.wait_state("ready", timeout=90)
    s.type_keys("Think about it. [[delay: 3]]")
    time.sleep(0.5)
    s.press("Enter")
    s.wait_state("busy", timeout=60)
    s.wait_until(lambda: any("Think about it." in t for t in s.server.user_texts()), 60,
                 "the person's turn at the model")
    marker = tag()
    res = s.send(f"urgent {marker}", "--priority", "high", "--ack", "--wait", "--timeout", "90")
    assert res.returncode == 0 and res.stdout.startswith("acknowledged"), res.stdout + s.screen()
    msg = next(m for m in s.history() if marker in m["content"])
    attempts = _evidence(s, msg["id"])
    assert [(c, o) for c, o, _ in attempts] == [("app-server", "acknowledged")], attempts
    sock = Path(s.state()["app_server"].split("unix://", 1)[1].split(" ", 1)[0])
    client = AppServerClient.connect(sock)
    try:
        thread = _thread(client)
        person = next(m.turn_id for m in client.user_messages(thread) if "Think about it." in m.text)
        assert attempts[0][2].startswith(f"turn {person}, item "), attempts  # the same turn
        assert len(client.user_messages(thread)) == 2  # the person's and the steer: no new turn
    finally:
        client.close()
    assert _carrying(s, marker) == 1
