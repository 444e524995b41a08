"""The session registry and the answers table, the contract every store keeps:
each test runs against SQLite (a real file) and PostgreSQL (a real server, a
schema of its own) through the ``store_target`` fixture, like tests/test_queue.py.
What a supervisor's process does with them is tests/test_registry.py's."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.records import record as base_record
from support.stores import StoreTarget

from agentwrap.answers.actions import AnswerStatus, DenyAnswer, OptionAnswer, TextAnswer
from agentwrap.answers.store import AnswerStore
from agentwrap.detect.states import State
from agentwrap.errors import SessionNameTaken, SessionNotFound
from agentwrap.events import Subscription
from agentwrap.session_options import SessionOptions
from agentwrap.sessions.registry import Registry, SessionRecord
from agentwrap.terminal.proctree import start_time


def record(name: str, **kw: object) -> SessionRecord:
    return base_record(name, **{"command": ["agent", "--x"], "cwd": "/work", **kw})


@pytest.fixture
def reg(store_target: StoreTarget) -> Iterator[Registry]:
    r = store_target.registry()
    yield r
    r.close()


def kinds(store_target: StoreTarget, session: str) -> list[tuple[str, dict[str, object]]]:
    store = store_target.open()
    try:
        return [(e.kind, dict(e.data)) for e in store.events(0, session=session)]
    finally:
        store.close()


# --- the registry -------------------------------------------------------------------------


def test_a_record_round_trips_every_field(reg: Registry) -> None:
    opts = SessionOptions.from_json({"trust_folder": True, "channels": ["hook"]})
    question = {"id": "q1", "kind": "choice", "options": ["Yes", "No"]}
    rec = reg.register(record("a", tmux_socket="/r/a.sock", agent_pid=123, options=opts,
                              question=question, draft=True, quiet_ms=40))
    got = reg.get("a")
    assert got == rec
    assert got.command == ["agent", "--x"] and got.options == opts and got.question == question
    assert isinstance(got.started, float) and got.started == rec.started  # double precision
    assert got.state is State.STARTING and got.draft is True
    assert reg.find("nope") is None
    with pytest.raises(SessionNotFound):
        reg.get("nope")


def test_a_live_name_is_refused_and_an_ended_one_taken_over(
    reg: Registry, sleeper: subprocess.Popen[bytes],
) -> None:
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    reg.register(record("a", **live))
    with pytest.raises(SessionNameTaken):
        reg.register(record("a", **live))
    reg.set_state("a", State.READY, signal="screen", rule="r", reason="prompt", evidence="> ",
                  quiet_ms=5, draft=False, changed=True)
    reg.mark_ended("a", 0)
    assert reg.get("a").liveness == "ended" and reg.transitions("a")
    reg.register(record("a", command=["new"]))
    assert reg.get("a").command == ["new"] and reg.get("a").ended is None
    assert [t.reason for t in reg.transitions("a")] == ["just launched"]  # the old ones went


def test_state_changes_log_transitions_and_events_heartbeats_do_not(
    reg: Registry, store_target: StoreTarget,
) -> None:
    reg.register(record("a"))
    reg.set_state("a", State.READY, signal="screen", rule="ready", reason="prompt",
                  evidence="> ", quiet_ms=10, draft=False, changed=True)
    reg.set_state("a", State.READY, signal="screen", rule="ready", reason="prompt",
                  evidence="> ", quiet_ms=900, draft=True, changed=False)  # a heartbeat
    q = {"id": "q", "kind": "confirm"}
    reg.set_state("a", State.WAITING_INPUT, signal="screen", rule="dialog", reason="asks",
                  evidence="?", quiet_ms=0, draft=False, changed=True, question=q)
    got = reg.get("a")
    assert got.state is State.WAITING_INPUT and got.question == q
    ts = reg.transitions("a")
    assert [t.state for t in ts] == ["starting", "ready", "waiting_input"]
    assert [t.id for t in reg.transitions("a", ts[0].id)] == [t.id for t in ts[1:]]
    assert ts[1].draft is False and ts[1].quiet_ms == 10
    reg.mark_ended("a", 3)
    reg.mark_ended("a", 3)  # once: no second event
    evs = kinds(store_target, "a")
    assert [k for k, _ in evs] == ["session.state"] * 3 + ["session.state", "session.ended"]
    assert evs[2][1]["question"] == q and evs[-1][1] == {"exit_code": 3}
    assert reg.get("a").exit_code == 3 and reg.get("a").state is State.EXITED


def test_an_address_is_name_or_host_slash_name(reg: Registry) -> None:
    reg.register(record("a"))
    assert reg.get("a").host == reg.host
    key = f"{reg.host}/a" if reg.db.shared else "a"  # what the stores call it (issue 23)
    assert reg.resolve("a") == key and reg.resolve(f"{reg.host}/a") == key
    with pytest.raises(SessionNotFound, match="no session 'a' on host 'elsewhere'") as info:
        reg.resolve("elsewhere/a")
    assert f"runs on host {reg.host!r}: {reg.host}/a" in str(info.value.hint)
    with pytest.raises(SessionNotFound):
        reg.resolve(f"{reg.host}/nope")
    for odd in ("../a", f"{reg.host}/a b", "[/x]"):  # no address: an unknown name as it is
        assert reg.resolve(odd) == odd
        with pytest.raises(SessionNotFound, match="no session named"):
            reg.get(odd)


def test_update_and_list(reg: Registry) -> None:
    reg.register(record("a", started=100.0))
    reg.register(record("b", started=50.0))
    reg.update("a", agent_pid=7, options=SessionOptions.from_json({"require_ack": True}),
               question={"id": "x"}, draft=True, state=State.BUSY)
    a = reg.get("a")
    assert (a.agent_pid, a.options.require_ack, a.question, a.draft, a.state) == (
        7, True, {"id": "x"}, True, State.BUSY)
    reg.update("a", question=None)
    assert reg.get("a").question is None
    with pytest.raises(ValueError, match="unknown session fields"):
        reg.update("a", nope=1)
    assert [r.name for r in reg.list()] == ["b", "a"]  # by start
    reg.mark_ended("b", 0)
    assert [r.name for r in reg.list()] == ["a"]
    assert [r.name for r in reg.list(include_ended=True)] == ["b", "a"]


def test_a_second_connection_sees_the_same_rows(
    reg: Registry, store_target: StoreTarget,
) -> None:
    """Every process (on PostgreSQL: every host) reads what another wrote."""
    reg.register(record("a"))
    other = store_target.registry()
    try:
        assert other.get("a").name == "a"
        other.set_state("a", State.BUSY, signal="s", rule="r", reason="working", evidence="",
                        quiet_ms=0, draft=False, changed=True)
        assert reg.get("a").state is State.BUSY
    finally:
        other.close()


def test_racing_registrations_of_one_name_leave_one_winner(store_target: StoreTarget) -> None:
    """Two processes (hosts) registering the same new name at once: one
    registers it, the other is refused, never a crash or two rows."""
    live = {"supervisor_pid": 1, "supervisor_start": start_time(1)}  # init: always running
    results: list[str] = []
    regs = [store_target.registry() for _ in range(4)]
    barrier = threading.Barrier(len(regs))

    def go(r: Registry) -> None:
        barrier.wait()
        try:
            r.register(record("same", **live))
            results.append("ok")
        except SessionNameTaken:
            results.append("taken")

    threads = [threading.Thread(target=go, args=(r,)) for r in regs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert sorted(results) == ["ok", "taken", "taken", "taken"]
        assert [r.name for r in regs[0].list()] == ["same"]
    finally:
        for r in regs:
            r.close()


def test_a_state_change_wakes_a_reader(store_target: StoreTarget, tmp_path: Path) -> None:
    events_dir = tmp_path / "events"
    events_dir.mkdir(mode=0o700)
    reg = store_target.registry(events_dir=events_dir)
    try:
        reg.register(record("a"))
        with Subscription(events_dir) as sub:
            reg.set_state("a", State.READY, signal="s", rule="r", reason="", evidence="",
                          quiet_ms=0, draft=False, changed=True)
            assert sub.wait(10.0)
    finally:
        reg.close()


# --- the answers ----------------------------------------------------------------------------


def test_an_answer_is_pending_until_concluded_once(store_target: StoreTarget) -> None:
    answers = store_target.answers()
    try:
        opt = OptionAnswer(option=2, number=2, label="Yes, and don't ask again")
        a = answers.request("s1", "q1", opt, source="cli")
        b = answers.request("s1", "q1", TextAnswer("no, do X", 3, 3, "Tell it"), source="http")
        answers.request("s2", "q9", DenyAnswer(), source="policy", rule="deny-rm")
        assert a.status is AnswerStatus.PENDING and a.answer == opt
        assert a.session == (answers.keys.key("s1"))  # a shared store's: HOST/s1
        assert answers.get(a.id) == a and isinstance(a.created, float)
        assert [x.id for x in answers.pending("s1")] == [a.id, b.id]
        assert answers.conclude(a.id, AnswerStatus.APPLIED, "typed 2")
        assert not answers.conclude(a.id, AnswerStatus.FAILED, "again")  # ended already
        got = answers.get(a.id)
        assert got.status is AnswerStatus.APPLIED and got.detail == "typed 2" and got.finished
        assert [x.id for x in answers.pending("s1")] == [b.id]
        assert {x.id for x in answers.recent("s1")} == {a.id, b.id}
        with pytest.raises(KeyError):
            answers.get("nope")
        with pytest.raises(ValueError):
            answers.conclude(b.id, AnswerStatus.PENDING, "")
    finally:
        answers.close()
    evs = kinds(store_target, "s1")
    assert [(k, d["status"]) for k, d in evs] == [
        ("session.answered", "pending"), ("session.answered", "pending"),
        ("session.answered", "applied")]
    assert evs[2][1]["by"] == "person" and kinds(store_target, "s2")[0][1]["rule"] == "deny-rm"


def test_racing_conclusions_of_one_answer_leave_one_winner(store_target: StoreTarget) -> None:
    answers = [store_target.answers() for _ in range(4)]
    a = answers[0].request("s1", "q1", DenyAnswer())
    won: list[bool] = []
    barrier = threading.Barrier(len(answers))

    def go(store: AnswerStore) -> None:
        barrier.wait()
        won.append(store.conclude(a.id, AnswerStatus.APPLIED, ""))

    threads = [threading.Thread(target=go, args=(s,)) for s in answers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert sorted(won) == [False, False, False, True]
        ended = [e for e in kinds(store_target, "s1") if e[1]["status"] != "pending"]
        assert len(ended) == 1
    finally:
        for s in answers:
            s.close()
