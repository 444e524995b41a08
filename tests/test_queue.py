"""The durable queue, the contract every store keeps: each test runs against
SQLite (a real file) and PostgreSQL (a real server, its own schema) through
the ``store_target`` fixture; time comes from an injected clock."""

from __future__ import annotations

import math
import multiprocessing
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.stores import StoreTarget

from agentwrap.errors import (
    InvalidMessage,
    MessageNotFound,
    MessageTooLarge,
    QueueFull,
    RateLimited,
)
from agentwrap.message import (
    Attempt,
    Kind,
    NewMessage,
    Phase,
    Priority,
    QueueLimits,
    Source,
    Status,
)
from agentwrap.queue.sqlstore import SQLMessageStore
from agentwrap.queue.store import ChannelMetrics, MessageStore, QueueMetrics

T0 = 1_700_000_000.0
ROOMY = QueueLimits(
    max_pending_per_session=1000,
    max_pending_total=10_000,
    rate_per_minute=100_000,
    max_content_bytes=10 * 1024,
)


class Clock:
    """A settable clock: tests move time instead of sleeping."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_store(
    store_target: StoreTarget, clock: Clock
) -> Iterator[Callable[..., SQLMessageStore]]:
    stores: list[SQLMessageStore] = []

    def make(limits: QueueLimits = ROOMY) -> SQLMessageStore:
        store = store_target.open(limits, clock)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def store(make_store: Callable[..., SQLMessageStore]) -> SQLMessageStore:
    return make_store()


def msg(content: str = "hello", session: str = "s1", **kw: Any) -> NewMessage:
    return NewMessage(session=session, content=content, **kw)


def total_rows(store: SQLMessageStore) -> int:
    return len(store.history(None, limit=1_000_000))


# --- enqueue: storing and round trips ---------------------------------------------------


def test_store_satisfies_the_protocol(store: SQLMessageStore) -> None:
    as_protocol: MessageStore = store
    assert as_protocol.pending_count() == 0


def test_enqueue_stores_every_field(store: SQLMessageStore, clock: Clock) -> None:
    new = msg(
        "do the thing",
        source=Source.WEBHOOK,
        source_id="github#42",
        priority=Priority.HIGH,
        ttl_s=120,
        metadata={"repo": "x/y", "nested": {"n": [1, 2.5, None, True]}, "ü": "漢"},
        correlation_id="corr-1",
        depth=3,
        idempotency_key="key-1",
        require_ack=True,
    )
    message, created = store.enqueue(new)
    assert created
    assert len(message.id) == 36 and message.id.count("-") == 4
    assert message.content == "do the thing"
    assert message.source is Source.WEBHOOK and message.source_id == "github#42"
    assert message.priority is Priority.HIGH
    assert message.created == T0 and message.expires == T0 + 120
    assert message.metadata == {"repo": "x/y", "nested": {"n": [1, 2.5, None, True]}, "ü": "漢"}
    assert message.correlation_id == "corr-1" and message.depth == 3
    assert message.idempotency_key == "key-1" and message.require_ack is True
    assert message.status is Status.PENDING and message.attempts == 0
    assert message.next_attempt_at == message.created
    assert message.finished is None and message.batch_id is None and message.phase is None
    assert message.label == "[webhook:github#42]"
    assert store.get(message.id) == message


def test_require_ack_none_and_false_round_trip(store: SQLMessageStore) -> None:
    a, _ = store.enqueue(msg(require_ack=None))
    b, _ = store.enqueue(msg(require_ack=False))
    assert store.get(a.id).require_ack is None
    assert store.get(b.id).require_ack is False
    # what enqueue returns is built, not read back: it must be the stored row
    assert (store.get(a.id), store.get(b.id)) == (a, b)
    [(c, _), (d, _)] = store.enqueue_many([(msg(metadata={"t": (1, "x")}), Kind.INSTRUCTION),
                                           (msg(require_ack=True), Kind.CONTENT)])  # type: ignore[misc]
    assert (store.get(c.id), store.get(d.id)) == (c, d)
    assert c.metadata == {"t": [1, "x"]} and c.kind is Kind.INSTRUCTION


def test_content_is_stored_sanitized(store: SQLMessageStore) -> None:
    message, _ = store.enqueue(msg("run\x1b[201~\rrm -rf /\x1b]0;x\x07 now\r\n"))
    assert message.content == "run\nrm -rf / now\n"
    assert message.metadata["sanitized_removed"] == 2
    clean, _ = store.enqueue(msg("plain\r\ntext"))
    assert clean.content == "plain\ntext"
    assert "sanitized_removed" not in clean.metadata


def test_size_limit_applies_after_sanitizing(make_store: Callable[..., SQLMessageStore]) -> None:
    store = make_store(QueueLimits(max_content_bytes=10, rate_per_minute=100))
    message, _ = store.enqueue(msg("\x1b[31m" * 20 + "0123456789"))  # fits once cleaned
    assert message.content == "0123456789"
    with pytest.raises(MessageTooLarge):
        store.enqueue(msg("漢字漢字"))  # 4 characters, 12 bytes
    assert total_rows(store) == 1


@pytest.mark.parametrize(
    ("new", "error"),
    [
        (msg(""), InvalidMessage),
        (msg(" \n\t "), InvalidMessage),
        (msg("\x1b[2J\x1b]0;title\x07"), InvalidMessage),  # empty once sanitized
        (msg("a\ud800b"), InvalidMessage),
        (msg("x" * 10 * 1024 + "y"), MessageTooLarge),
        (msg(ttl_s=0), InvalidMessage),
        (msg(ttl_s=-5), InvalidMessage),
        (msg(ttl_s=3600.5), InvalidMessage),
        (msg(ttl_s=math.nan), InvalidMessage),
        (msg(ttl_s=math.inf), InvalidMessage),
        (msg(source_id="x" * 129), InvalidMessage),
        (msg(source_id="a\x1b[201~b"), InvalidMessage),
        (msg(source_id="line\nbreak"), InvalidMessage),
        (msg(source_id="\u202eevil"), InvalidMessage),
        (msg(correlation_id="c\x00"), InvalidMessage),
        (msg(idempotency_key=""), InvalidMessage),
        (msg(metadata={"s": {1, 2}}), InvalidMessage),
        (msg(metadata={"o": object()}), InvalidMessage),
        (msg(metadata={"f": math.nan}), InvalidMessage),
        (msg(metadata={(1, 2): "tuple key"}), InvalidMessage),
        (msg(depth=-1), InvalidMessage),
        (msg(depth=17), InvalidMessage),
        (msg(session="bad name/.."), InvalidMessage),
        (msg(session=""), InvalidMessage),
    ],
    ids=lambda v: repr(v)[:40] if not isinstance(v, NewMessage) else None,
)
def test_invalid_input_is_rejected_and_nothing_stored(
    store: SQLMessageStore, new: NewMessage, error: type[Exception]
) -> None:
    store.enqueue(msg("already here"))
    with pytest.raises(error) as info:
        store.enqueue(new)
    assert isinstance(info.value, InvalidMessage)
    assert info.value.hint or info.value.message
    assert total_rows(store) == 1
    assert store.pending_count() == 1


def test_limits_at_the_boundary_are_accepted(store: SQLMessageStore) -> None:
    store.enqueue(msg("x" * 10 * 1024, ttl_s=3600, depth=16, source_id="s" * 128))
    store.enqueue(msg(ttl_s=0.001, depth=0))
    assert total_rows(store) == 2


def test_ttl_defaults_to_the_configured_value(
    make_store: Callable[..., SQLMessageStore],
) -> None:
    store = make_store(QueueLimits(default_ttl_s=42.0))
    message, _ = store.enqueue(msg())
    assert message.expires - message.created == 42.0


# --- idempotency ------------------------------------------------------------------------


def test_same_idempotency_key_returns_the_first_message(
    store: SQLMessageStore, clock: Clock
) -> None:
    first, created = store.enqueue(msg("first", idempotency_key="k"))
    clock.advance(5)
    # a retry: same message, recomputed TTL and metadata
    again, created_again = store.enqueue(
        msg("first", idempotency_key="k", ttl_s=60, metadata={"try": 2})
    )
    assert created and not created_again
    assert again == first
    assert total_rows(store) == 1
    other_session, created_other = store.enqueue(msg("other", session="s2", idempotency_key="k"))
    assert created_other and other_session.id != first.id


def test_idempotent_repeat_is_not_rate_limited_or_refused(
    make_store: Callable[..., SQLMessageStore],
) -> None:
    store = make_store(QueueLimits(rate_per_minute=1, max_pending_per_session=1))
    first, _ = store.enqueue(msg(idempotency_key="k", priority=Priority.HIGH))
    for _ in range(3):  # would be RateLimited and QueueFull if it were new
        again, created = store.enqueue(msg(idempotency_key="k", priority=Priority.HIGH))
        assert not created and again.id == first.id
    with pytest.raises(RateLimited):
        store.enqueue(msg(idempotency_key="new"))


def test_idempotency_survives_the_first_message_finishing(store: SQLMessageStore) -> None:
    first, _ = store.enqueue(msg(idempotency_key="k"))
    store.finish(Status.DELIVERED, "ok", message_ids=[first.id])
    again, created = store.enqueue(msg(idempotency_key="k"))
    assert not created and again.status is Status.DELIVERED


# --- ordering, peek and claim -------------------------------------------------------


def test_peek_orders_by_priority_then_age(store: SQLMessageStore, clock: Clock) -> None:
    plan = [
        ("low-1", Priority.LOW),
        ("normal-1", Priority.NORMAL),
        ("critical", Priority.CRITICAL),
        ("normal-2", Priority.NORMAL),
        ("high", Priority.HIGH),
        ("startup", Priority.STARTUP),
        ("low-2", Priority.LOW),
    ]
    for content, priority in plan:
        store.enqueue(msg(content, priority=priority), internal=priority is Priority.STARTUP)
        clock.advance(1)
    store.enqueue(msg("normal-3-same-time", priority=Priority.NORMAL))
    store.enqueue(msg("normal-4-same-time", priority=Priority.NORMAL))
    assert [m.content for m in store.peek("s1")] == [
        "startup",
        "critical",
        "high",
        "normal-1",
        "normal-2",
        "normal-3-same-time",
        "normal-4-same-time",
        "low-1",
        "low-2",
    ]


def test_peek_changes_nothing_and_claim_does(store: SQLMessageStore, clock: Clock) -> None:
    for i in range(3):
        store.enqueue(msg(f"m{i}"))
    before = store.peek("s1")
    assert store.peek("s1") == before
    assert all(m.status is Status.PENDING for m in before)
    clock.advance(1)
    claimed = store.claim_batch("s1", "batch-1", max_bytes=1000)
    assert [m.id for m in claimed] == [m.id for m in before]
    for m in claimed:
        assert m.status is Status.DELIVERING and m.phase is Phase.CLAIMED
        assert m.batch_id == "batch-1" and m.updated == T0 + 1
    assert store.peek("s1") == []
    assert store.claim_batch("s1", "batch-2", max_bytes=1000) == []
    assert store.in_flight("s1") == claimed
    assert store.peek("s2") == [] and store.in_flight("s2") == []


def test_claim_respects_max_bytes_in_order(store: SQLMessageStore, clock: Clock) -> None:
    for content in ["a" * 10, "b" * 10, "c" * 10, "d" * 3]:
        store.enqueue(msg(content))
        clock.advance(1)
    batch = store.claim_batch("s1", "b1", max_bytes=25)
    assert [m.content for m in batch] == ["a" * 10, "b" * 10]  # "d" would fit: not skipped to
    batch = store.claim_batch("s1", "b2", max_bytes=13)
    assert [m.content for m in batch] == ["c" * 10, "d" * 3]


def test_claim_takes_one_oversized_message(store: SQLMessageStore) -> None:
    store.enqueue(msg("x" * 100))
    store.enqueue(msg("y"))
    assert [m.content for m in store.claim_batch("s1", "b1", max_bytes=10)] == ["x" * 100]


def test_claim_counts_utf8_bytes(store: SQLMessageStore) -> None:
    store.enqueue(msg("漢"))  # 3 bytes
    store.enqueue(msg("字"))
    assert len(store.claim_batch("s1", "b1", max_bytes=5)) == 1


def test_claim_respects_next_attempt_at(store: SQLMessageStore, clock: Clock) -> None:
    a, _ = store.enqueue(msg("a", priority=Priority.HIGH))
    b, _ = store.enqueue(msg("b"))
    store.claim_batch("s1", "b1", max_bytes=1)
    assert store.retry_later("b1", next_attempt_at=T0 + 30, detail="no window") == 1
    clock.advance(10)
    assert store.claim_batch("s1", "b2", max_bytes=1) == []  # b waits behind a: in order
    assert [m.id for m in store.peek("s1")] == [a.id, b.id]  # backed off, but still queued
    assert [m.id for m in store.claim_batch("s1", "b4", max_bytes=1, now=T0 + 30)] == [a.id]
    assert [m.id for m in store.claim_batch("s1", "b5", max_bytes=1, now=T0 + 30)] == [b.id]


# --- eviction and capacity ----------------------------------------------------------


def test_full_session_evicts_oldest_below_high(
    make_store: Callable[..., SQLMessageStore], clock: Clock
) -> None:
    store = make_store(QueueLimits(max_pending_per_session=4, rate_per_minute=100))
    ids = {}
    for content, priority in [
        ("high", Priority.HIGH),
        ("normal-old", Priority.NORMAL),
        ("critical", Priority.CRITICAL),
        ("low-young", Priority.LOW),
    ]:
        ids[content] = store.enqueue(msg(content, priority=priority))[0].id
        clock.advance(1)
    newcomer, _ = store.enqueue(msg("newcomer", priority=Priority.LOW))
    evicted = store.get(ids["normal-old"])
    assert evicted.status is Status.EVICTED
    assert newcomer.id in evicted.detail
    assert evicted.finished == clock.t
    clock.advance(1)
    second, _ = store.enqueue(msg("second newcomer"))
    assert store.get(ids["low-young"]).status is Status.EVICTED
    assert second.id in store.get(ids["low-young"]).detail
    assert {m.content for m in store.peek("s1")} == {
        "high",
        "critical",
        "newcomer",
        "second newcomer",
    }
    assert store.pending_count("s1") == 4


def test_queue_full_when_nothing_is_evictable(
    make_store: Callable[..., SQLMessageStore],
) -> None:
    store = make_store(QueueLimits(max_pending_per_session=3, rate_per_minute=100))
    for priority in (Priority.HIGH, Priority.CRITICAL, Priority.STARTUP):
        store.enqueue(msg(priority=priority), internal=priority is Priority.STARTUP)
    before = store.peek("s1")
    for priority in (Priority.LOW, Priority.CRITICAL):
        with pytest.raises(QueueFull):
            store.enqueue(msg("no room", priority=priority))
    assert store.peek("s1") == before
    assert total_rows(store) == 3
    store.enqueue(msg("other session", session="s2"))  # the limit is per session


def test_delivering_and_finished_messages_do_not_take_room(
    make_store: Callable[..., SQLMessageStore],
) -> None:
    store = make_store(QueueLimits(max_pending_per_session=2, rate_per_minute=100))
    store.enqueue(msg("a", priority=Priority.HIGH))
    store.enqueue(msg("b", priority=Priority.HIGH))
    store.claim_batch("s1", "b1", max_bytes=1)
    store.enqueue(msg("c", priority=Priority.HIGH))
    assert store.pending_count("s1") == 2


def test_total_pending_limit(make_store: Callable[..., SQLMessageStore]) -> None:
    store = make_store(
        QueueLimits(max_pending_per_session=2, max_pending_total=3, rate_per_minute=100)
    )
    store.enqueue(msg("1", session="s1"))
    store.enqueue(msg("2", session="s1"))
    store.enqueue(msg("3", session="s2"))
    with pytest.raises(QueueFull, match="all sessions"):
        store.enqueue(msg("4", session="s3"))
    with pytest.raises(QueueFull):
        store.enqueue(msg("5", session="s2"))
    assert total_rows(store) == 3
    # Evicting inside a full session keeps the total constant, so it is allowed.
    store.enqueue(msg("6", session="s1"))
    assert store.pending_count() == 3
    assert store.history(None, statuses=[Status.EVICTED])[0].content == "1"


def test_expired_messages_free_room(
    make_store: Callable[..., SQLMessageStore], clock: Clock
) -> None:
    store = make_store(QueueLimits(max_pending_per_session=1, rate_per_minute=100))
    old, _ = store.enqueue(msg(priority=Priority.HIGH, ttl_s=10))
    clock.advance(10)
    store.enqueue(msg(priority=Priority.HIGH))
    assert store.get(old.id).status is Status.EXPIRED


# --- rate limit -----------------------------------------------------------------------


def test_rate_limit_window_and_retry_after(
    make_store: Callable[..., SQLMessageStore], clock: Clock
) -> None:
    store = make_store(QueueLimits(rate_per_minute=3))
    for _ in range(3):
        store.enqueue(msg(source=Source.WEBHOOK))
        clock.advance(10)  # created at T0, T0+10, T0+20
    clock.t = T0 + 35
    with pytest.raises(RateLimited) as info:
        store.enqueue(msg(source=Source.WEBHOOK))
    assert info.value.retry_after == pytest.approx(25.0)
    assert total_rows(store) == 3
    # other sources and sessions have their own windows
    store.enqueue(msg(source=Source.SCHEDULER))
    store.enqueue(msg(source=Source.WEBHOOK, session="s2"))
    # rejected attempts are not charged: once the oldest leaves, one more fits
    clock.t = T0 + 60
    store.enqueue(msg(source=Source.WEBHOOK))
    with pytest.raises(RateLimited) as info:
        store.enqueue(msg(source=Source.WEBHOOK))
    assert info.value.retry_after == pytest.approx(10.0)


def test_rate_limit_exemptions(make_store: Callable[..., SQLMessageStore]) -> None:
    store = make_store(QueueLimits(rate_per_minute=2))
    for _ in range(5):  # agentwrap's own: internal=True
        store.enqueue(msg(source=Source.SYSTEM), internal=True)
        store.enqueue(msg(source=Source.USER, priority=Priority.STARTUP), internal=True)
    # exempt messages are not counted against the window either
    store.enqueue(msg(source=Source.USER))
    store.enqueue(msg(source=Source.USER))
    with pytest.raises(RateLimited):
        store.enqueue(msg(source=Source.USER))
    assert total_rows(store) == 12


def test_rate_limit_counts_messages_that_already_left_the_queue(
    make_store: Callable[..., SQLMessageStore],
) -> None:
    store = make_store(QueueLimits(rate_per_minute=1))
    first, _ = store.enqueue(msg())
    store.cancel(first.id)
    with pytest.raises(RateLimited):
        store.enqueue(msg())



def test_a_group_commit_counts_the_rate_window_as_single_sends_do(
    make_store: Callable[..., SQLMessageStore], clock: Clock
) -> None:
    """enqueue_many counts each (session, source) window once and adds what it
    stores: a batch that crosses the limit accepts exactly the messages that fit,
    STARTUP context stays uncounted, and a refused one is not charged."""
    store = make_store(QueueLimits(rate_per_minute=3))
    store.enqueue(msg(source=Source.WEBHOOK))
    store.enqueue(msg(source=Source.USER, priority=Priority.STARTUP), internal=True)
    clock.advance(1)
    got = store.enqueue_many([(msg(source=Source.WEBHOOK), Kind.CONTENT) for _ in range(4)]
                             + [(msg(source=Source.WEBHOOK, session="s2"), Kind.CONTENT)])
    assert [type(r).__name__ for r in got] == ["tuple", "tuple", "RateLimited", "RateLimited",
                                               "tuple"]
    assert total_rows(store) == 5
    clock.t = T0 + 60  # the first left the window: room for exactly one more
    got = store.enqueue_many([(msg(source=Source.WEBHOOK), Kind.CONTENT) for _ in range(2)])
    assert [type(r).__name__ for r in got] == ["tuple", "RateLimited"]


# --- TTL and expiry -------------------------------------------------------------------


def test_expired_messages_are_never_claimed(store: SQLMessageStore, clock: Clock) -> None:
    short, _ = store.enqueue(msg("short", ttl_s=5, priority=Priority.CRITICAL))
    long, _ = store.enqueue(msg("long", ttl_s=60))
    clock.advance(5)
    assert [m.id for m in store.peek("s1")] == [long.id]
    assert store.pending_count("s1") == 1
    assert [m.id for m in store.claim_batch("s1", "b1", max_bytes=1000)] == [long.id]
    expired = store.get(short.id)
    assert expired.status is Status.EXPIRED and expired.finished == clock.t
    assert "expired" in expired.detail and expired.attempts == 0


def test_expire_overdue_covers_all_sessions_and_untyped_claims(
    store: SQLMessageStore, clock: Clock
) -> None:
    a, _ = store.enqueue(msg("a", session="s1", ttl_s=10))
    b, _ = store.enqueue(msg("b", session="s2", ttl_s=10))
    c, _ = store.enqueue(msg("c", session="s3", ttl_s=10))
    d, _ = store.enqueue(msg("d", session="s4", ttl_s=10))
    keep, _ = store.enqueue(msg("keep", session="s1", ttl_s=100))
    store.claim_batch("s3", "claimed-only", max_bytes=100)
    store.claim_batch("s4", "typing", max_bytes=100)
    store.set_phase("typing", Phase.PASTING)
    assert not store.overdue(now=T0 + 9.9)  # what expire_overdue would end, in one read
    assert store.expire_overdue(now=T0 + 9.9) == 0
    assert store.overdue(now=T0 + 10)
    assert store.expire_overdue(now=T0 + 10) == 3
    assert [store.get(m.id).status for m in (a, b, c, d, keep)] == [
        Status.EXPIRED,
        Status.EXPIRED,
        Status.EXPIRED,
        Status.DELIVERING,  # may already be in the input box: its supervisor decides
        Status.PENDING,
    ]
    assert not store.overdue(now=T0 + 10)  # the one left typing is its supervisor's
    assert store.expire_overdue(now=T0 + 10) == 0
    assert store.overdue(now=T0 + 100)


def test_set_phase_returns_only_messages_still_in_flight(
    store: SQLMessageStore, clock: Clock
) -> None:
    short, _ = store.enqueue(msg("short", ttl_s=5, priority=Priority.HIGH))
    long, _ = store.enqueue(msg("long", ttl_s=60))
    store.claim_batch("s1", "b1", max_bytes=1000)
    clock.advance(5)
    store.expire_overdue()
    remaining = store.set_phase("b1", Phase.PASTING)
    assert [m.id for m in remaining] == [long.id]
    assert remaining[0].phase is Phase.PASTING
    assert store.get(short.id).phase is Phase.CLAIMED


# --- retry, finish, cancel --------------------------------------------------------------


def test_retry_later_requeues_and_counts_the_attempt(
    store: SQLMessageStore, clock: Clock
) -> None:
    m, _ = store.enqueue(msg())
    store.claim_batch("s1", "b1", max_bytes=100)
    store.set_phase("b1", Phase.PASTING)
    clock.advance(2)
    assert store.retry_later("b1", next_attempt_at=T0 + 12, detail="paste not seen") == 1
    again = store.get(m.id)
    assert again.status is Status.PENDING and again.attempts == 1
    assert again.phase is None and again.batch_id is None
    assert again.next_attempt_at == T0 + 12 and again.detail == "paste not seen"
    assert store.in_flight("s1") == []
    assert store.retry_later("b1", next_attempt_at=T0 + 20, detail="again") == 0


def test_a_later_message_never_overtakes_one_waiting_for_its_retry(
    store: SQLMessageStore, clock: Clock
) -> None:
    """Three commands to a shell ran 0, 2, 1 when the second's attempt went back to
    the queue: the claim and the due view stop at a message waiting out its backoff,
    and a higher priority still goes first (delivery order is priority, then age)."""
    first, _ = store.enqueue(msg("first"))
    second, _ = store.enqueue(msg("second"))
    store.claim_batch("s1", "b1", max_bytes=len("first"))
    store.retry_later("b1", next_attempt_at=T0 + 10, detail="shell not ready")
    assert store.claim_batch("s1", "b2", max_bytes=1000) == []
    assert store.peek("s1", due=True) == []
    assert [m.id for m in store.peek("s1")] == [first.id, second.id]
    urgent, _ = store.enqueue(msg("urgent", priority=Priority.HIGH))
    assert [m.id for m in store.claim_batch("s1", "b3", max_bytes=1000)] == [urgent.id]
    clock.advance(10)
    assert [m.id for m in store.peek("s1", due=True)] == [first.id, second.id]
    assert [m.id for m in store.claim_batch("s1", "b4", max_bytes=1000)] == [first.id, second.id]


def test_retry_later_expires_messages_whose_ttl_passed(
    store: SQLMessageStore, clock: Clock
) -> None:
    m, _ = store.enqueue(msg(ttl_s=10))
    store.claim_batch("s1", "b1", max_bytes=100)
    clock.advance(11)
    assert store.retry_later("b1", next_attempt_at=T0 + 20, detail="busy") == 0
    gone = store.get(m.id)
    assert gone.status is Status.EXPIRED and gone.attempts == 1
    assert gone.finished == clock.t and "busy" in gone.detail


def test_finish_happens_exactly_once(store: SQLMessageStore, clock: Clock) -> None:
    a, _ = store.enqueue(msg("a"))
    b, _ = store.enqueue(msg("b"))
    store.claim_batch("s1", "b1", max_bytes=100)
    clock.advance(3)
    assert store.finish(Status.ACKNOWLEDGED, "ACK 3f9c", batch_id="b1") == 2
    done = store.get(a.id)
    assert done.status is Status.ACKNOWLEDGED and done.attempts == 1
    assert done.finished == T0 + 3 and done.detail == "ACK 3f9c"
    clock.advance(1)
    assert store.finish(Status.FAILED, "late", batch_id="b1") == 0
    assert store.finish(Status.FAILED, "late", message_ids=[a.id, b.id]) == 0
    assert store.get(a.id) == done


def test_finish_pending_by_id_is_not_an_attempt(store: SQLMessageStore) -> None:
    a, _ = store.enqueue(msg("a"))
    b, _ = store.enqueue(msg("b"))
    assert store.finish(Status.ESCALATED, "needs a person", message_ids=[a.id]) == 1
    assert store.get(a.id).attempts == 0 and store.get(a.id).status is Status.ESCALATED
    assert store.get(b.id).status is Status.PENDING
    assert store.finish(Status.FAILED, message_ids=[]) == 0
    assert store.finish(Status.FAILED, message_ids=["no-such-id"]) == 0


def test_finish_rejects_misuse(store: SQLMessageStore) -> None:
    with pytest.raises(ValueError):
        store.finish(Status.PENDING, batch_id="b1")
    with pytest.raises(ValueError):
        store.finish(Status.DELIVERED)
    with pytest.raises(ValueError):
        store.finish(Status.DELIVERED, message_ids=["x"], batch_id="b1")


def test_cancel_only_pending(store: SQLMessageStore, clock: Clock) -> None:
    a, _ = store.enqueue(msg("a"))
    clock.advance(1)
    cancelled = store.cancel(a.id)
    assert cancelled.status is Status.CANCELLED and cancelled.finished == T0 + 1
    assert store.peek("s1") == []
    with pytest.raises(InvalidMessage, match="is cancelled"):
        store.cancel(a.id)
    b, _ = store.enqueue(msg("b"))
    store.claim_batch("s1", "b1", max_bytes=100)
    with pytest.raises(InvalidMessage, match="is delivering"):
        store.cancel(b.id)
    assert store.get(b.id).status is Status.DELIVERING
    with pytest.raises(MessageNotFound):
        store.cancel("00000000-0000-4000-8000-000000000000")


# --- attempts -------------------------------------------------------------------------


def test_attempts_are_recorded_in_order_and_updated_in_place(store: SQLMessageStore) -> None:
    m, _ = store.enqueue(msg())
    second = Attempt(m.id, "b2", 2, T0 + 20, None, "tmux-paste", "started", "")
    first = Attempt(m.id, "b1", 1, T0 + 1, T0 + 2, "tmux-paste", "no_window", "busy spinner")
    store.record_attempt(second)
    store.record_attempt(first)
    assert store.attempts(m.id) == [first, second]
    done = Attempt(m.id, "b2", 2, T0 + 20, T0 + 21, "tmux-paste", "submitted", "prompt cleared")
    store.record_attempt(done)
    assert store.attempts(m.id) == [first, done]
    assert store.attempts("unknown") == []
    with pytest.raises(MessageNotFound):
        store.record_attempt(Attempt("unknown", "b", 1, T0, None, "hook", "x", ""))


# --- lookup and history -------------------------------------------------------------------


def test_get_and_prefix_lookup(store: SQLMessageStore, store_target: StoreTarget) -> None:
    m, _ = store.enqueue(msg())
    assert store.get_by_prefix(m.id[:8]) == m
    assert store.get_by_prefix(m.id[:4].upper()) == m
    assert store.get_by_prefix(m.id) == m
    with pytest.raises(MessageNotFound):
        store.get("nope")
    with pytest.raises(InvalidMessage, match="too short"):
        store.get_by_prefix(m.id[:3])
    with pytest.raises(MessageNotFound):
        store.get_by_prefix("zzzz")
    with pytest.raises(MessageNotFound):
        store.get_by_prefix("%%%%")
    # make two ids share a prefix (uuid4 collisions are too rare to wait for)
    n, _ = store.enqueue(msg())
    store_target.execute("UPDATE messages SET id = ? WHERE id = ?", ("abcd1" + m.id[5:], m.id))
    store_target.execute("UPDATE messages SET id = ? WHERE id = ?", ("abcd2" + n.id[5:], n.id))
    with pytest.raises(InvalidMessage, match="ambiguous"):
        store.get_by_prefix("abcd")
    assert store.get_by_prefix("abcd2").content == n.content


def test_history_newest_first_with_filters(store: SQLMessageStore, clock: Clock) -> None:
    a, _ = store.enqueue(msg("a", session="s1"))
    clock.advance(1)
    b, _ = store.enqueue(msg("b", session="s2"))
    clock.advance(1)
    c, _ = store.enqueue(msg("c", session="s1"))
    store.cancel(a.id)
    assert [m.id for m in store.history(None)] == [c.id, b.id, a.id]
    assert [m.id for m in store.history("s1")] == [c.id, a.id]
    assert [m.id for m in store.history("s1", limit=1)] == [c.id]
    assert [m.id for m in store.history(None, statuses=[Status.CANCELLED])] == [a.id]
    assert [m.id for m in store.history("s1", statuses=[Status.PENDING, Status.CANCELLED])] == [
        c.id,
        a.id,
    ]
    assert store.history(None, statuses=[]) == []
    assert store.pending_count() == 2 and store.pending_count("s1") == 1
    assert store.pending_count("nobody") == 0


def test_everything_survives_reopening(
    make_store: Callable[..., SQLMessageStore], store_target: StoreTarget
) -> None:
    first = make_store()
    m, _ = first.enqueue(msg(metadata={"k": 1}))
    first.claim_batch("s1", "b1", max_bytes=100)
    first.set_phase("b1", Phase.SUBMITTING)
    first.close()
    second = make_store()
    resumed = second.in_flight("s1")
    assert [x.id for x in resumed] == [m.id] and resumed[0].phase is Phase.SUBMITTING
    # the event log is the store's too (sqlite_sequence: its AUTOINCREMENT ids);
    # the registry's sessions table is not ours
    assert store_target.tables() == {"messages", "attempts", "events"} | (
        {"sqlite_sequence"} if store_target.backend == "sqlite" else {"session_keys"})


# --- metrics ---------------------------------------------------------------------------


def _deliver(store: SQLMessageStore, session: str, status: Status, detail: str) -> None:
    assert store.claim_batch(session, f"{session}-{detail}", max_bytes=10_000)
    store.finish(status, detail, batch_id=f"{session}-{detail}")


def test_metrics_on_a_known_scenario(store: SQLMessageStore, clock: Clock) -> None:
    # m1: delivered first try after 2 s; m2: acknowledged on the third try after 10 s;
    # m3: escalated after one try; m4: failed pending (no try); m5: expired;
    # m6: still pending; m7 (other session): delivered first try after 1 s.
    for name in ("m1", "m2", "m3", "m4", "m5", "m6"):
        store.enqueue(msg(name, session=name, ttl_s=1000 if name != "m5" else 1))
    store.enqueue(msg("m7", session="other"))
    clock.advance(1)
    _deliver(store, "other", Status.DELIVERED, "ok")
    clock.advance(1)
    _deliver(store, "m1", Status.DELIVERED, "ok")
    for i in range(2):
        store.claim_batch("m2", f"r{i}", max_bytes=100)
        store.retry_later(f"r{i}", next_attempt_at=clock.t, detail="busy")
    clock.advance(8)
    _deliver(store, "m2", Status.ACKNOWLEDGED, "ack")
    _deliver(store, "m3", Status.ESCALATED, "stuck")
    store.finish(Status.FAILED, "gave up", message_ids=[store.peek("m4")[0].id])
    store.expire_overdue()

    everything = store.metrics(None)
    assert everything == QueueMetrics(
        by_status={
            **{s: 0 for s in Status},
            Status.DELIVERED: 2,
            Status.ACKNOWLEDGED: 1,
            Status.ESCALATED: 1,
            Status.FAILED: 1,
            Status.EXPIRED: 1,
            Status.PENDING: 1,
        },
        total=7,
        attempted=4,
        succeeded_first_try=2,
        succeeded_after_retry=1,
        escalated=1,
        failed=1,
        mean_attempts=(1 + 3 + 1 + 0 + 0 + 1) / 6,
        mean_latency_s=(2 + 10 + 1) / 3,
        p95_latency_s=10.0,
    )
    one = store.metrics("m2")
    assert one.total == 1 and one.succeeded_after_retry == 1 and one.mean_latency_s == 10.0
    empty = store.metrics("nobody")
    assert empty.total == 0 and empty.mean_attempts is None and empty.p95_latency_s is None


def test_metrics_p95_uses_nearest_rank(store: SQLMessageStore, clock: Clock) -> None:
    for i in range(20):
        store.enqueue(msg(f"m{i}", session=f"s{i}"))
    for i in range(20):
        clock.t = T0 + i + 1  # latencies 1..20 s
        _deliver(store, f"s{i}", Status.DELIVERED, "ok")
    metrics = store.metrics(None)
    assert metrics.p95_latency_s == 19.0  # ceil(0.95 * 20) = 19th of 20
    assert metrics.mean_latency_s == pytest.approx(10.5)


def _attempt(store: SQLMessageStore, session: str, token: str, channel: str,
             outcome: str, status: Status | None, clock: Clock) -> None:
    """One attempt the way a channel makes it: claim, record, then end or retry."""
    (m,) = store.claim_batch(session, token, max_bytes=10_000)
    store.record_attempt(Attempt(m.id, token, m.attempts + 1, clock.t, clock.t, channel,
                                 outcome, "test"))
    if status is None:
        store.retry_later(token, next_attempt_at=clock.t, detail=outcome)
    else:
        store.finish(status, outcome, batch_id=token)


def test_metrics_by_channel_count_each_message_for_the_channel_that_ended_it(
    store: SQLMessageStore, clock: Clock,
) -> None:
    # a: typed first try after 1 s; b: typing failed twice, then a hook took it
    # after 5 s; c: one failed paste, still pending; d: mcp, acknowledged after 2 s;
    # e: typed, its batch still in flight
    for name in "abcde":
        store.enqueue(msg(name, session=name))
    clock.advance(1)
    _attempt(store, "a", "ta", "tmux-paste", "submitted", Status.DELIVERED, clock)
    _attempt(store, "b", "tb1", "tmux-paste", "paste_not_seen", None, clock)
    _attempt(store, "b", "tb2", "tmux-paste", "no_window", None, clock)
    _attempt(store, "c", "tc", "tmux-paste", "submit_not_confirmed", None, clock)
    clock.advance(1)
    _attempt(store, "d", "td", "mcp", "delivered", Status.ACKNOWLEDGED, clock)
    (e,) = store.claim_batch("e", "te", max_bytes=10_000)
    store.record_attempt(Attempt(e.id, "te", e.attempts + 1, clock.t, None, "tmux-paste",
                                 "awaiting_ack", "typed"))
    clock.advance(3)
    _attempt(store, "b", "tb3", "hook", "delivered", Status.DELIVERED, clock)

    by = store.metrics(None).by_channel
    assert by == {
        "hook": ChannelMetrics(attempts=1, failed_attempts=0, delivered=1, first_try=0,
                               first_try_rate=0.0, p50_latency_s=5.0, p95_latency_s=5.0),
        "mcp": ChannelMetrics(attempts=1, failed_attempts=0, delivered=1, first_try=1,
                              first_try_rate=1.0, p50_latency_s=2.0, p95_latency_s=2.0),
        "tmux-paste": ChannelMetrics(attempts=5, failed_attempts=3, delivered=1, first_try=1,
                                     first_try_rate=1.0, p50_latency_s=1.0, p95_latency_s=1.0),
    }
    assert store.metrics("b").by_channel == {
        "hook": ChannelMetrics(attempts=1, failed_attempts=0, delivered=1, first_try=0,
                               first_try_rate=0.0, p50_latency_s=5.0, p95_latency_s=5.0),
        "tmux-paste": ChannelMetrics(attempts=2, failed_attempts=2, delivered=0),
    }
    assert store.metrics("nobody").by_channel == {}


# --- many processes -----------------------------------------------------------------


RACE = 120  # messages two claimers fight over


def _enqueue_worker(target: StoreTarget, session: str, n: int, barrier: Any) -> None:
    store = target.open(ROOMY)
    barrier.wait()
    for i in range(n):
        store.enqueue(NewMessage(session=session, content=f"{session} #{i}"))
    store.close()


def _claim_worker(target: StoreTarget, session: str, name: str, barrier: Any,
                  results: Any) -> None:
    store = target.open(ROOMY)
    barrier.wait()
    claimed: list[str] = []
    k = 0
    while batch := store.claim_batch(session, f"{name}-{k}", max_bytes=1):
        claimed.extend(m.id for m in batch)
        k += 1
        os.sched_yield()  # let the other claimer at the write lock: more interleaving
    results.put((name, claimed))
    store.close()


def test_many_processes_store_once_and_never_claim_twice(store_target: StoreTarget) -> None:
    setup = store_target.open(ROOMY)
    race_ids = {setup.enqueue(msg(f"race {i}", session="race"))[0].id for i in range(RACE)}
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(6)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_enqueue_worker, args=(store_target, f"w{i}", 50, barrier))
        for i in range(4)
    ] + [
        ctx.Process(target=_claim_worker, args=(store_target, "race", name, barrier, results))
        for name in ("c1", "c2")
    ]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=120) for _ in range(2))
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    results.close()

    claimed = got["c1"] + got["c2"]
    assert len(claimed) == len(set(claimed)) == RACE
    assert set(claimed) == race_ids
    for name, ids in got.items():
        for message_id in ids:
            row = setup.get(message_id)
            assert row.status is Status.DELIVERING and row.batch_id is not None
            assert row.batch_id.startswith(f"{name}-")
    for i in range(4):
        stored = setup.history(f"w{i}", limit=1000)
        contents = sorted(m.content for m in stored)
        assert contents == sorted(f"w{i} #{j}" for j in range(50))
    assert total_rows(setup) == 4 * 50 + RACE
    setup.close()


def test_writers_of_one_process_take_turns_on_its_lock(tmp_path: Path) -> None:
    """Two connections of one process to one file share a write lock, held for
    the whole transaction: a second thread waits its turn on it (and is handed
    the turn at the commit) instead of retrying in SQLite's busy handler."""
    import threading

    from agentwrap.queue import db

    a = db.connect(tmp_path / "q.db")
    b = db.connect(tmp_path / "q.db")
    other = db.connect(tmp_path / "other.db")
    try:
        a.execute("CREATE TABLE t (x)")
        got: list[bool] = []

        def try_lock(conn: sqlite3.Connection) -> None:
            assert isinstance(conn, db.Connection)
            lock = conn.write_lock
            ok = lock.acquire(blocking=False)
            got.append(ok)
            if ok:
                lock.release()

        with db.transaction(a) as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            for c in (b, other):
                t = threading.Thread(target=try_lock, args=(c,))
                t.start()
                t.join()
        assert got == [False, True]  # b's turn waits for a's commit; another file's does not
        try_lock(b)
        assert got[-1] is True
        with db.transaction(b) as conn:  # and after the commit b writes at once
            conn.execute("INSERT INTO t VALUES (2)")
        assert a.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 2
    finally:
        for c in (a, b, other):
            c.close()
