"""The application service, the one path from every surface to the store, and
the events its store and registry write (real SQLite, real sockets, real CLI).

A test here covers every surface: the CLI commands are thin adapters over
these methods (the contract in pyproject.toml keeps them so).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import AwEnv
from support.waiting import wait_for

from agentwrap.detect.states import State
from agentwrap.errors import InvalidMessage, QueueFull, SessionNotFound, UntrustedSource
from agentwrap.message import Kind, NewMessage, Phase, Priority, QueueLimits, Source, Status
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.service import Service, SessionRecord
from agentwrap.sessions.registry import Registry


def new(content: str = "hello", **kw: object) -> NewMessage:
    return NewMessage(session="fake", content=content, **kw)  # type: ignore[arg-type]


def kinds_of(svc: Service, subject: str) -> list[tuple[str, str]]:
    """(kind, phase or status) of one message's events, in order."""
    return [(e.kind, str(e.data.get("phase") or e.data.get("status") or ""))
            for e in svc.events(0, subject=subject)]


def sockets(aw: AwEnv) -> list[str]:
    d = aw.paths.events_dir
    return sorted(p.name for p in d.glob("*.sock")) if d.is_dir() else []


# --- every method once ------------------------------------------------------------------------


def test_every_service_method(aw: AwEnv, svc: Service) -> None:
    sent = svc.send(new("look at CI", idempotency_key="k1"))
    assert sent.created and not sent.supervised  # no supervisor: it waits for adopt
    again = svc.send(new("look at CI", idempotency_key="k1"))
    assert not again.created and again.message.id == sent.message.id
    mid = sent.message.id

    view = svc.peek("fake")
    assert view.session.name == "fake"
    assert [(w.message.id, w.waiting_because) for w in view.entries] == [
        (mid, "supervisor not running (`agentwrap adopt`)")]
    assert svc.get(mid[:8]).id == mid and svc.get(mid).id == mid
    assert [(v.record.name, v.pending) for v in svc.sessions()] == [("fake", 1)]
    assert svc.state("fake").state == State.STARTING.value
    assert [t.state for t in svc.transitions("fake")] == ["starting"]
    with pytest.raises(SessionNotFound):
        svc.state("nosuch")
    with pytest.raises(SessionNotFound):
        svc.history("nosuch")

    assert svc.cancel(mid[:6]).status is Status.CANCELLED
    with pytest.raises(InvalidMessage):
        svc.cancel(mid)  # no longer pending
    (entry,) = svc.history("fake")
    assert entry.message.id == mid and entry.attempts == [] and entry.channel == "-"
    assert svc.metrics("fake").by_status[Status.CANCELLED] == 1
    assert svc.wait_for_end_state(mid, timeout=0.0) is not None  # already ended
    svc.check_store()

    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines()]
    assert [(a["event"], a["message"]) for a in audit] == [("queued", mid), ("cancelled", mid)]
    assert all("look at CI" not in json.dumps(a) for a in audit)  # ids and sizes, no content


def test_a_pending_message_times_out_waiting(svc: Service) -> None:
    mid = svc.send(new()).message.id
    assert svc.wait_for_end_state(mid, timeout=0.05) is None


# --- events written by the store and the registry -------------------------------------------


def test_one_message_life_in_order(svc: Service) -> None:
    mid = svc.send(new()).message.id
    store = svc.store
    assert [m.id for m in store.claim_batch("fake", "b1", 1000)] == [mid]
    store.set_phase("b1", Phase.PASTING)
    assert store.retry_later("b1", time.time(), "the box stayed empty") == 1
    store.claim_batch("fake", "b2", 1000)
    for phase in (Phase.PASTING, Phase.SUBMITTING):
        store.set_phase("b2", phase)
    assert store.hold("b2", time.time(), "submit again") == 1
    store.set_phase("b2", Phase.SUBMITTED)
    assert store.finish(Status.DELIVERED, "seen in the transcript", batch_id="b2") == 1
    assert store.finish(Status.FAILED, "late", message_ids=[mid]) == 0  # no second end
    assert kinds_of(svc, mid) == [
        ("message.queued", ""), ("message.phase", "claimed"), ("message.phase", "pasting"),
        ("message.retry", ""), ("message.phase", "claimed"), ("message.phase", "pasting"),
        ("message.phase", "submitting"), ("message.retry", ""), ("message.phase", "submitted"),
        ("message.ended", "delivered"),
    ]
    evs = svc.events(0, "fake", kinds=["message.retry", "message.queued"])
    assert [e.data.get("held") for e in evs] == [None, False, True]
    assert evs[0].data == {"priority": "normal", "source": "user", "kind": "instruction"}
    assert all(e.session == "fake" for e in evs)


def test_every_terminal_status_is_an_ended_event(aw: AwEnv, svc: Service) -> None:
    store = SQLiteMessageStore(
        aw.paths.db_path, QueueLimits(max_pending_per_session=1, rate_per_minute=100),
        events_dir=aw.paths.events_dir,
    )
    try:
        first, _ = store.enqueue(new("first"))
        second, _ = store.enqueue(new("second"))  # the session is full: first is evicted
        assert store.expire_overdue(now=time.time() + 10_000) == 1
    finally:
        store.close()
    assert kinds_of(svc, first.id) == [("message.queued", ""), ("message.ended", "evicted")]
    assert kinds_of(svc, second.id) == [("message.queued", ""), ("message.ended", "expired")]
    assert svc.events(0, subject=first.id)[-1].data["detail"].startswith("evicted by")


def test_no_event_for_a_refused_or_rolled_back_enqueue(aw: AwEnv, svc: Service) -> None:
    store = SQLiteMessageStore(aw.paths.db_path, QueueLimits(max_pending_per_session=1))
    try:
        store.enqueue(new("urgent", priority=Priority.HIGH))
        before = svc.last_event_id()
        with pytest.raises(QueueFull):  # refused inside the transaction: rolled back
            store.enqueue(new("no room", priority=Priority.HIGH))
        with pytest.raises(InvalidMessage):  # refused before the transaction
            store.enqueue(new("   "))
    finally:
        store.close()
    assert svc.events(before) == []


def test_session_state_changes_and_end_are_events(aw: AwEnv, svc: Service) -> None:
    reg = svc.registry

    def set_state(state: State, changed: bool) -> None:
        reg.set_state("fake", state, signal="screen", rule="prompt", reason=f"saw {state}",
                      evidence="> ", quiet_ms=10, draft=False, changed=changed)

    set_state(State.READY, True)
    set_state(State.READY, False)  # a heartbeat: no event
    set_state(State.BUSY, True)
    reg.mark_ended("fake", 0)
    reg.mark_ended("fake", 0)  # recorded once
    evs = svc.events(0, "fake")
    assert [(e.kind, e.data.get("state")) for e in evs] == [
        ("session.state", "starting"), ("session.state", "ready"), ("session.state", "busy"),
        ("session.state", "exited"), ("session.ended", None)]
    assert evs[1].data == {"state": "ready", "reason": "saw ready", "signal": "screen",
                           "rule": "prompt"}
    assert evs[-1].data == {"exit_code": 0} and evs[-1].subject == ""


# --- waiting on the bus ---------------------------------------------------------------------


def test_wait_for_end_state_is_woken_by_the_bus(aw: AwEnv, svc: Service) -> None:
    mid = svc.send(new()).message.id
    waiter = Service.open(aw.paths)
    waiter.recheck_s = 3600.0  # no re-check: only an announcement can end the wait
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(waiter.wait_for_end_state(mid, 3600.0)))
    t.start()
    try:
        wait_for(lambda: sockets(aw), 30, "the waiter to subscribe")
        supervisor_side = SQLiteMessageStore(aw.paths.db_path, events_dir=aw.paths.events_dir)
        supervisor_side.finish(Status.DELIVERED, "typed", message_ids=[mid])
        supervisor_side.close()
        t.join(60)  # a deadline for a hung test, not a speed limit
        assert not t.is_alive(), "the announcement did not wake the waiter"
    finally:
        if t.is_alive():  # unblock it so the test run can end
            SQLiteMessageStore(aw.paths.db_path).finish(Status.FAILED, "", message_ids=[mid])
            waiter.recheck_s = 0.01
        t.join(60)
        waiter.close()
    (final,) = got
    assert getattr(final, "status", None) is Status.DELIVERED
    assert sockets(aw) == []  # the subscription was closed


def test_follow_events_yields_the_past_then_what_happens(aw: AwEnv, svc: Service) -> None:
    mid = svc.send(new()).message.id
    follow = svc.follow_events(0, "fake", kinds=["message.queued", "message.ended"])
    assert next(follow).kind == "message.queued"

    def cancel_once_subscribed() -> None:
        wait_for(lambda: sockets(aw), 30, "the follower to subscribe")
        with Service.open(aw.paths) as other:
            other.cancel(mid)

    t = threading.Thread(target=cancel_once_subscribed)
    t.start()
    ended = next(follow)
    t.join(60)
    assert (ended.kind, ended.subject, ended.data["status"]) == ("message.ended", mid, "cancelled")
    follow.close()
    assert sockets(aw) == []


# --- the CLI's readers ----------------------------------------------------------------------


def test_events_json_lines(aw: AwEnv, svc: Service) -> None:
    mid = aw.cli("send", "fake", "hi [b]there[/b]", check=True).stdout.strip()
    res = aw.cli("events", "fake", "--json", check=True)
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert all(set(d) == {"id", "at", "session", "kind", "subject", "data"} for d in lines)
    assert [(d["kind"], d["subject"]) for d in lines] == [
        ("session.state", ""), ("message.queued", mid)]
    assert lines[1]["data"] == {"priority": "normal", "source": "user", "kind": "instruction"}
    after = aw.cli("events", "--json", "--after", str(lines[0]["id"]), check=True)
    assert [json.loads(x)["kind"] for x in after.stdout.splitlines()] == ["message.queued"]
    people = aw.cli("events", "fake", check=True).stdout.splitlines()
    assert len(people) == 2 and f"message.queued {mid[:8]} priority=normal" in people[1]
    assert aw.cli("events", "nosuch").returncode == 3
    last = aw.cli("events", "--json", "--last", "1", check=True).stdout.splitlines()
    assert [json.loads(x)["kind"] for x in last] == ["message.queued"]


def test_events_follow_stops_cleanly_on_sigint(aw: AwEnv, svc: Service) -> None:
    # faulthandler: a follower that does not stop is made to print where each of
    # its threads is (SIGABRT) before it is killed (once, at load, one did not stop)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentwrap", "events", "--follow", "--json"],
        env={**aw.env, "PYTHONFAULTHANDLER": "1"},
        cwd=aw.project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["kind"] == "session.state"  # the past
        wait_for(lambda: sockets(aw), 30, "the follower to subscribe")
        mid = svc.send(new()).message.id
        line = json.loads(proc.stdout.readline())  # what happens: woken by the store
        assert (line["kind"], line["subject"]) == ("message.queued", mid)
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, stderr = proc.communicate(timeout=30)
            raise AssertionError(f"events --follow did not stop on SIGINT; its threads:\n{stderr}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    assert sockets(aw) == []  # its socket went with it


def test_state_watch_ends_with_the_session(aw: AwEnv, svc: Service) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentwrap", "state", "fake", "--watch", "--json"], env=aw.env,
        cwd=aw.project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["state"] == "starting"
        wait_for(lambda: sockets(aw), 30, "the watcher to subscribe")
        reg = Registry(aw.paths.db_path, events_dir=aw.paths.events_dir)
        reg.mark_ended("fake", 3)
        reg.close()
        out, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert json.loads(out.splitlines()[-1])["state"] == "exited"


def test_state_watch_misses_no_change_made_as_it_starts(
    aw: AwEnv, svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session turns ready just after the watcher's first look at its state,
    # before it reads where the transition log ends: that ready was neither its
    # first line nor followed (it showed "starting", then nothing until the next change).
    import argparse
    import io

    from agentwrap.surfaces.cli.inspection import _watch_state

    real_state, looks = svc.state, []

    def state(name: str) -> SessionRecord:
        rec = real_state(name)
        if not looks:
            svc.registry.set_state("fake", State.READY, signal="screen", rule="prompt",
                                   reason="saw ready", evidence="> ", quiet_ms=10, draft=False,
                                   changed=True)
        looks.append(rec.state.value)
        return rec

    monkeypatch.setattr(svc, "state", state)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    watcher = threading.Thread(
        target=_watch_state, args=(svc, argparse.Namespace(name="fake", json=True)), daemon=True)
    watcher.start()

    def shown() -> list[str]:
        return [json.loads(x)["state"] for x in out.getvalue().splitlines()]

    try:
        wait_for(lambda: "ready" in shown(), 10, "the watcher to show ready")
    finally:
        svc.registry.mark_ended("fake", 0)  # the end of the session ends the watcher
        watcher.join(timeout=30)
    assert not watcher.is_alive()
    assert shown() == ["ready", "exited"]


def test_consume_hands_messages_to_a_reader_exactly_once(aw: AwEnv, svc: Service) -> None:
    # A pull channel (an MCP tool, a hook) takes the due messages: each ends
    # delivered through that channel, once, highest priority first; a COMMAND
    # stays for the terminal.
    low = svc.send(new("later", priority=Priority.LOW)).message
    high = svc.send(new("first", priority=Priority.HIGH)).message
    store = svc.store
    cmd, _ = store.enqueue(new("/compact"), kind=Kind.COMMAND)
    got = svc.consume("fake", channel="mcp")
    assert [m.content for m in got] == ["first", "later"]
    assert all(m.status is Status.DELIVERED for m in got)
    assert svc.store.attempts(high.id)[-1].channel == "mcp"
    assert svc.consume("fake", channel="mcp") == []  # nothing twice
    assert svc.get(cmd.id).status is Status.PENDING
    assert svc.get(low.id).detail == "delivered: consumed through mcp"
    (taken,) = svc.events(0, "fake", kinds=["session.consumed"])
    assert {**taken.data, "ids": sorted(taken.data["ids"])} == {
        "count": 2, "sources": ["user"], "channel": "mcp", "ids": sorted([high.id, low.id])}
    with pytest.raises(InvalidMessage):
        svc.consume("fake", channel="a b")


def test_a_source_sends_only_as_the_ids_the_user_config_lists(aw: AwEnv, svc: Service) -> None:
    # [sources] webhook = ["github"]: a webhook claiming another id (or none) is
    # refused before anything is stored; sources not listed are not limited.
    aw.paths.config_file.write_text('[sources]\nwebhook = ["github", "ci"]\n')
    ok = svc.send(new("CI failed", source=Source.WEBHOOK, source_id="github")).message
    assert ok.source_id == "github"
    for bad in ("evil", ""):
        with pytest.raises(UntrustedSource, match="may send only as github, ci"):
            svc.send(new("spoofed", source=Source.WEBHOOK, source_id=bad))
    assert svc.send(new("from a person")).created
    res = aw.cli("send", "fake", "x", "--source", "webhook", "--source-id", "evil")
    assert res.returncode == 77 and "may send only as" in res.stderr
    assert sorted(e.message.content for e in svc.history("fake")) == ["CI failed", "from a person"]


def test_sources_rules_are_the_users_alone(aw: AwEnv) -> None:
    from agentwrap.config import load_config
    from agentwrap.errors import ConfigError

    (aw.project / ".agentwrap.toml").write_text('[sources]\nwebhook = ["anything"]\n')
    with pytest.raises(ConfigError, match="may only be set in your own config file"):
        load_config(aw.paths, aw.project)
    (aw.project / ".agentwrap.toml").unlink()
    for text in ('[sources]\nnobody = ["x"]\n', '[sources]\nwebhook = "github"\n'):
        aw.paths.config_file.write_text(text)
        with pytest.raises(ConfigError):
            load_config(aw.paths, aw.project)
