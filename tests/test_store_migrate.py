"""Moving a store (issue 23): ``agentwrap store migrate`` copies every row
from SQLite to PostgreSQL and back, refuses while a supervisor of the source
runs or when the target holds rows (changing nothing), and never shows the
password."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from conftest import AwEnv
from support.pg import PgServer

from agentwrap.answers.actions import AnswerStatus, DenyAnswer, OptionAnswer
from agentwrap.answers.store import AnswerStore
from agentwrap.errors import StoreInUse, StoreNotEmpty
from agentwrap.message import Attempt, NewMessage, Phase, Status
from agentwrap.queue.backend import ENV, open_database
from agentwrap.queue.postgres import PostgresMessageStore
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.service.moving import TABLES, Place, migrate
from agentwrap.sessions.host import IDLE_EXIT_ENV
from agentwrap.sessions.registry import Registry, SessionRecord

SECRET = "s3cr3t-pw"


def _populate(path: Path) -> None:
    """A store with pending, delivering, delivered, acknowledged and expired
    messages, attempts, events, a registry row with a transition, answers."""
    store = SQLiteMessageStore(path)
    for i in range(5):
        store.enqueue(NewMessage(session="api", content=f"message {i}", source_id=f"s{i}",
                                 metadata={"n": i}, require_ack=i == 1 or None))
    store.enqueue(NewMessage(session="api", content="short-lived", ttl_s=1.0))
    delivered = store.claim_batch("api", "b1", 10_000, limit=2)
    store.set_phase("b1", Phase.SUBMITTED)
    store.record_attempt(Attempt(delivered[0].id, "b1", 1, time.time(), time.time(),
                                 "tmux-paste", "submitted", "screen line"))
    store.finish(Status.DELIVERED, "typed", batch_id="b1")
    assert store.acknowledge(delivered[1].id, "ack from the agent")
    store.claim_batch("api", "b2", 10_000, limit=1)
    store.set_phase("b2", Phase.PASTING)  # delivering, in flight
    store.expire_overdue(time.time() + 5)  # the short-lived one (and only it) expires
    store.close()
    reg = Registry(path, host="here")
    reg.register(SessionRecord(name="api", profile="standin", backend="tmux",
                               command=["agent"], cwd="/work", started=time.time()))
    from agentwrap.detect.states import State

    reg.set_state("api", State.READY, signal="screen", rule="prompt", reason="prompt shown",
                  evidence="> ", quiet_ms=300, draft=False, changed=True)
    reg.mark_ended("api", 0)
    reg.close()
    answers = AnswerStore(path)
    a = answers.request("api", "q1", OptionAnswer(option=2, number=2, label="Yes"), source="cli")
    answers.conclude(a.id, AnswerStatus.APPLIED, "typed 2")
    answers.request("api", "q2", DenyAnswer(), source="http")
    answers.close()


def _dump(where: Place) -> dict[str, list[tuple[object, ...]]]:
    db = open_database(where.path, where.url)
    try:
        return {table: [tuple(r) for r in db.read(
            f"SELECT {', '.join(sorted(db.columns(table)))} FROM {table} ORDER BY {key}")]
            for table, key in TABLES if db.columns(table)}
    finally:
        db.close()


def test_a_round_trip_through_postgresql_keeps_every_row(tmp_path: Path, pg_url: str) -> None:
    first, back = Place(tmp_path / "a.db"), Place(tmp_path / "b.db")
    _populate(first.path)
    before = _dump(first)
    statuses = {r.status for r in SQLiteMessageStore(first.path).history(None, limit=100)}
    assert statuses == {Status.PENDING, Status.DELIVERING, Status.DELIVERED,
                        Status.ACKNOWLEDGED, Status.EXPIRED}
    assert all(before[t] for t, _ in TABLES if t != "hosts")
    report = migrate(first, Place(Path("/nonexistent"), pg_url))
    assert report.rows == {t: len(before[t]) for t, _ in TABLES}
    shared = _dump(Place(Path("/nonexistent"), pg_url))
    there = PostgresMessageStore(pg_url, host="here")
    try:  # a shared store keys the rows by the host the registry ran the session on
        assert {r.session for r in there.history(None, limit=100)} == {"here/api"}
    finally:
        there.close()
    assert {t: len(v) for t, v in shared.items()} == {t: len(v) for t, v in before.items()}
    migrate(Place(Path("/nonexistent"), pg_url), back)
    assert _dump(back) == before
    assert _dump(first) == before  # the source as it was
    # new ids continue after the copied ones, on both sides
    pg = PostgresMessageStore(pg_url)
    try:
        last_event = pg.last_event_id()
        m, _ = pg.enqueue(NewMessage(session="api", content="after the move"))
        assert pg.last_event_id() > last_event
        assert pg.history("api", limit=1)[0].id == m.id
    finally:
        pg.close()
    db = open_database(Path("/nonexistent"), pg_url)
    try:
        seqs = [int(r[0]) for r in db.read("SELECT seq FROM messages ORDER BY seq")]
        assert seqs[-1] == seqs[-2] + 1 == len(before["messages"]) + 1
    finally:
        db.close()


def test_a_target_that_holds_rows_is_refused_and_left_alone(
    tmp_path: Path, pg_url: str,
) -> None:
    first = Place(tmp_path / "a.db")
    _populate(first.path)
    pg = PostgresMessageStore(pg_url)
    pg.enqueue(NewMessage(session="other", content="already here"))
    pg.close()
    target = Place(Path("/nonexistent"), pg_url)
    held = {t: rows for t, rows in _dump(target).items() if rows}
    with pytest.raises(StoreNotEmpty, match=r"already holds 1 messages rows, 1 events rows"):
        migrate(first, target)
    assert {t: rows for t, rows in _dump(target).items() if rows} == held  # the same rows
    with pytest.raises(StoreNotEmpty, match="same store"):
        migrate(first, Place(tmp_path / "." / "a.db"))


def test_the_cli_moves_a_pending_message_that_a_supervisor_then_delivers(
    aw: AwEnv, pg_server: PgServer,
) -> None:
    """SQLite -> PostgreSQL with `store migrate`: refused while the session's
    supervisor runs, done once it stopped, and the pending message is typed
    by a supervisor on the new store. The password shows nowhere."""
    name, _ = pg_server.new_schema()
    url = (f"postgresql://{pg_server.user}:{SECRET}@127.0.0.1:{pg_server.port}/postgres"
           f"?sslmode=disable&options=-csearch_path%3D{name}")
    # the host's idle exit, waited for below, after 5 s instead of 30 (~25 s of this test)
    aw.env[IDLE_EXIT_ENV] = "5"
    try:
        aw.start_standin("sa")
        aw.wait_state("sa", "ready", timeout=30)
        busy = aw.cli("store", "migrate", "--to", url, "--json")
        assert busy.returncode == StoreInUse.exit_code, busy.stderr
        assert "sa" in busy.stderr and "agentwrap stop" in busy.stderr
        assert json.loads(busy.stdout)["error"] == "StoreInUse"
        assert SECRET not in busy.stdout + busy.stderr
        host = aw.registry().get("sa").supervisor_pid  # the session's thread is the host's
        assert host
        aw.cli("stop", "sa", check=True)
        # held still while idle (its lock held), so that the refusal below is seen
        # however long it takes; let go, it exits by itself after its idle 5 s
        os.kill(host, signal.SIGSTOP)
        try:
            old = aw.store()  # queued for a session that runs nowhere now
            old.enqueue(NewMessage(session="sb", content="moved while nobody ran"))
            old.close()
            idle = aw.cli("store", "migrate", "--to", url)  # the idle host still runs
        finally:
            os.kill(host, signal.SIGCONT)
        assert idle.returncode == StoreInUse.exit_code, idle.stderr
        assert "supervisor host is running" in idle.stderr
        moved = aw.wait_for(lambda: (r := aw.cli("store", "migrate", "--to", url, "--json"))
                            .returncode == 0 and r, timeout=90, what="the idle host gone")
        done = moved
        rep = json.loads(done.stdout)
        assert rep["rows"]["messages"] == 1 and rep["sourceUntouched"] is True
        assert SECRET not in done.stdout + done.stderr
        copy = aw.cli("store", "migrate", "--from", url, "--to", str(aw.root / "copy.db"))
        assert copy.returncode == 0, copy.stderr
        assert "moved postgresql host=127.0.0.1" in copy.stdout and "next:" in copy.stderr
        assert SECRET not in copy.stdout + copy.stderr
        human = aw.cli("store", "migrate", "--to", url)  # now the target holds rows
        assert human.returncode == StoreNotEmpty.exit_code
        assert "already holds" in human.stderr and SECRET not in human.stdout + human.stderr
        aw.env[ENV] = url
        aw.start_standin("sb")
        aw.wait_for(lambda: any("moved while nobody ran" in t for t in aw.received()), timeout=30,
                    what="the moved message delivered from the new store")
    finally:
        aw.cli("stop", "--all")  # sb's supervisor works in the schema dropped next
        aw.env.pop(ENV, None)
        pg_server.drop_schema(name)
