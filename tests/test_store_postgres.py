"""What the PostgreSQL store must do beyond the contract (tests/test_queue.py
runs that against both backends): several processes on several hosts write
at once, so claims never take a row twice, limits and idempotency are decided
one admission at a time, event ids follow commit order, and a commit wakes
every listener. Real server (tests/support/pg.py); several stores on one
server stand for several hosts (each its own connection)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.pg import PgServer
from support.waiting import wait_for

from agentwrap.errors import QueueError, StoreUnavailable
from agentwrap.message import NewMessage, Priority, QueueLimits, Status
from agentwrap.queue import transitions
from agentwrap.queue.postgres import (
    CHANNEL,
    NotifyBridge,
    PgSubscription,
    PostgresMessageStore,
    display,
)

ROOMY = QueueLimits(max_pending_per_session=1000, max_pending_total=10_000,
                    rate_per_minute=100_000)


@pytest.fixture
def hosts(pg_url: str) -> Iterator[Callable[..., PostgresMessageStore]]:
    """Open stores on the test's schema: one per simulated host."""
    opened: list[PostgresMessageStore] = []

    def open_store(limits: QueueLimits = ROOMY) -> PostgresMessageStore:
        s = PostgresMessageStore(pg_url, limits)
        opened.append(s)
        return s

    yield open_store
    for s in opened:
        s.close()


def _waiting_on_a_lock(url: str) -> bool:
    """Some other backend of this server waits for a lock (row or advisory)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND pid <> pg_backend_pid()").fetchone()
    return bool(row and row[0])


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_event_ids_follow_commit_order_so_a_resuming_reader_misses_nothing(
    hosts: Callable[..., PostgresMessageStore], pg_url: str,
) -> None:
    """Host A has drawn its event id and not committed yet; host B commits a
    change meanwhile. A reader that resumes after the highest id it saw must
    still get A's event: B's id may not be handed out (and committed) before
    A's commit, or "after id N" skips A's for good."""
    a, b, reader = hosts(), hosts(), hosts()
    drawn, release = threading.Event(), threading.Event()

    def slow_commit() -> None:
        with a._write() as w:
            w.event(time.time(), "s1", "message.queued", "from-a")
            w.flush()  # the id is drawn: A now only has to commit
            drawn.set()
            release.wait(30)

    ta, a_out = _in_thread(slow_commit)
    assert drawn.wait(30)
    tb, b_out = _in_thread(lambda: b.enqueue(NewMessage(session="s1", content="from b")))
    wait_for(lambda: b_out or _waiting_on_a_lock(pg_url), 30, "B committed or waits")
    seen = reader.events(0)
    last = max((e.id for e in seen), default=0)
    release.set()
    ta.join(30)
    tb.join(30)
    assert a_out == [None] and not isinstance(b_out[0], BaseException)
    later = reader.events(last)
    subjects = [e.subject for e in [*seen, *later]]
    assert "from-a" in subjects and b_out[0][0].id in subjects
    ids = [e.id for e in reader.events(0)]
    assert ids == sorted(ids)


def test_claims_of_one_session_take_turns_and_never_take_a_message_twice(
    hosts: Callable[..., PostgresMessageStore], pg_url: str,
) -> None:
    """Two hosts claim one session's queue at the same moment: the second
    waits for the first's batch (the head of the queue, in order) and then
    takes the next message, never the one the first holds; a claim of
    another session does not wait at all."""
    a, b, c = hosts(), hosts(), hosts()
    first, _ = a.enqueue(NewMessage(session="s1", content="one"))
    second, _ = a.enqueue(NewMessage(session="s1", content="two"))
    other, _ = a.enqueue(NewMessage(session="s2", content="elsewhere"))
    holding, release = threading.Event(), threading.Event()

    def claim_and_hold() -> list[str]:
        with a._write() as w:
            rows = transitions.claim_batch(w, a.keys.key("s1"), "batch-a", 1, time.time(), kinds=None,
                                           sources=None, contains=None, limit=None,
                                           priorities=None)
            holding.set()
            release.wait(30)
        return [str(r["id"]) for r in rows]

    ta, a_out = _in_thread(claim_and_hold)
    assert holding.wait(30)
    assert [m.id for m in c.claim_batch("s2", "batch-c", max_bytes=100)] == [other.id]
    tb, b_out = _in_thread(lambda: b.claim_batch("s1", "batch-b", max_bytes=1))
    wait_for(lambda: _waiting_on_a_lock(pg_url), 30, "B waits for A's claim")
    assert not b_out
    release.set()
    ta.join(30)
    tb.join(30)
    assert a_out == [[first.id]]
    assert [m.id for m in b_out[0]] == [second.id]
    assert b.get(first.id).batch_id == "batch-a" and b.get(second.id).batch_id == "batch-b"


def _race(n: int, fn: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait(30)
        try:
            results[i] = fn(i)
        except QueueError as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_limits_hold_across_hosts(hosts: Callable[..., PostgresMessageStore]) -> None:
    """Four hosts fill one session at once: exactly the limit is accepted
    (high priority: nothing can be evicted), the rest are refused."""
    limits = QueueLimits(max_pending_per_session=5, max_pending_total=10_000,
                         rate_per_minute=100_000)
    stores = [hosts(limits) for _ in range(4)]

    def fill(i: int) -> list[Any]:
        out: list[Any] = []
        for j in range(4):
            try:
                out.append(stores[i].enqueue(NewMessage(
                    session="s1", content=f"{i}/{j}", priority=Priority.HIGH)))
            except QueueError as exc:
                out.append(exc)
        return out

    results = [r for rs in _race(4, fill) for r in rs]
    accepted = [r for r in results if isinstance(r, tuple)]
    assert len(accepted) == 5
    assert stores[0].pending_count("s1") == 5


def test_an_idempotency_key_sent_by_several_hosts_at_once_stores_one_message(
    hosts: Callable[..., PostgresMessageStore],
) -> None:
    stores = [hosts() for _ in range(4)]
    results = _race(4, lambda i: stores[i].enqueue(
        NewMessage(session="s1", content="once", idempotency_key="k1")))
    assert all(isinstance(r, tuple) for r in results), results
    assert len({m.id for m, _ in results}) == 1
    assert sorted(created for _, created in results) == [False, False, False, True]
    assert len(stores[0].history("s1")) == 1


def test_a_commit_wakes_a_listener_of_another_host(
    hosts: Callable[..., PostgresMessageStore], pg_url: str,
) -> None:
    store = hosts()
    with PgSubscription(pg_url) as sub:
        assert sub.wait(0.05) is False
        m, _ = store.enqueue(NewMessage(session="s1", content="wake up"))
        assert sub.wait(30) is True
        store.finish(Status.CANCELLED, "test", message_ids=[m.id])
        assert sub.wait(30) is True
        assert sub.wait(0.05) is False  # drained: one wake-up per commit at most


def test_an_empty_queue_is_read_in_one_statement(
    hosts: Callable[..., PostgresMessageStore], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQLite checks an empty answer against the table, NOT INDEXED (a damaged
    index page reads as empty); PostgreSQL takes no such hint, so the check
    would read the same index again: every idle supervisor's poll, twice."""
    store = hosts()
    sent: list[str] = []
    read = store._db.read

    def counted(sql: str, params: Any = ()) -> Any:
        sent.append(sql)
        return read(sql, params)

    monkeypatch.setattr(store._db, "read", counted)
    assert store.peek("s1") == [] and store.history("s1") == []
    assert len(sent) == 2, sent
    m, _ = store.enqueue(NewMessage(session="s1", content="one"))
    assert [x.id for x in store.peek("s1")] == [m.id] and len(sent) == 3


def _voluntary_switches() -> int:
    """How many times the calling thread has given up the CPU (went to sleep)."""
    status = Path(f"/proc/self/task/{threading.get_native_id()}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("voluntary_ctxt_switches")))


def test_a_listener_with_nothing_to_hear_sleeps_until_its_timeout(pg_url: str) -> None:
    """A host's LISTEN waits in one sleep, not in psycopg's 100 ms steps
    (ten wake-ups a second of every idle host, for nothing), and a NOTIFY
    still ends the wait."""
    switches: list[int] = []
    with PgSubscription(pg_url) as sub:

        def listen() -> None:
            before = _voluntary_switches()
            assert sub.receive(1.5) is None
            switches.append(_voluntary_switches() - before)

        t = threading.Thread(target=listen)
        t.start()
        t.join(30)
        assert switches and switches[0] < 5, switches  # psycopg's own wait: ~15
        with psycopg.connect(pg_url, autocommit=True) as other:
            other.execute(f"SELECT pg_notify('{CHANNEL}', 'HOST/a' || chr(10) || 'HOST/b')".encode())
        assert sub.receive(30) == {"HOST/a", "HOST/b"}


def test_the_password_is_never_shown() -> None:
    url = "postgresql://aw:s3cr3t-pw@127.0.0.1:1/agentwrap?sslmode=disable"
    shown = display(url)
    assert "s3cr3t" not in shown and "127.0.0.1" in shown and "sslmode=disable" in shown
    with pytest.raises(StoreUnavailable) as info:
        PostgresMessageStore(url, connect_timeout_s=2)
    text = f"{info.value} {info.value.hint} {info.value.__cause__!r}"
    assert "s3cr3t" not in text and "cannot use the store" in str(info.value)


def test_a_server_restart_is_survived_without_a_person(
    hosts: Callable[..., PostgresMessageStore], pg_server: PgServer,
) -> None:
    """The kept connection dies with the server; the next read and the next
    write open a new one (nothing was sent on the dead one) and go on."""
    store = hosts()
    before, _ = store.enqueue(NewMessage(session="s1", content="before"))
    pg_server.restart()
    assert store.get(before.id).content == "before"
    pg_server.restart()
    after, _ = store.enqueue(NewMessage(session="s1", content="after"))
    assert [m.id for m in store.peek("s1")] == [before.id, after.id]


def test_another_hosts_commit_wakes_this_hosts_waiters(
    pg_url: str, tmp_path: Path,
) -> None:
    """Each host's readers wait on its own events dir; a commit on host B is
    announced there by host A's bridge (LISTEN), so ``send --wait``, ``events
    -f`` and SSE on A wake for it as for a local one."""
    from agentwrap.events import Subscription

    dirs = [tmp_path / "a-events", tmp_path / "b-events"]
    for d in dirs:
        d.mkdir(mode=0o700)
    a = PostgresMessageStore(pg_url, events_dir=dirs[0])
    b = PostgresMessageStore(pg_url, events_dir=dirs[1])
    try:
        with Subscription(dirs[0]) as sub:
            first, _ = b.enqueue(NewMessage(session="s1", content="before the bridge"))
            assert sub.wait(0.5) is False  # B announces on its own host only
            a.listen()
            bridge = NotifyBridge.start(pg_url, dirs[0])
            assert bridge.listening.wait(30)
            sub.drain()  # the bridge's first announcement (anything missed before it)
            m, _ = b.enqueue(NewMessage(session="s1", content="from host b"))
            assert sub.wait(30) is True
            assert [e.subject for e in a.events(0)] == [first.id, m.id]
    finally:
        a.close()
        b.close()
