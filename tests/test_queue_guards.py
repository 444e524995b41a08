"""What senders may not do to the queue: claim agentwrap's own sources and
kinds, reuse an idempotency key for other content, or hand it metadata that
is huge or deeply nested. Part of the store contract: each test with the
``store`` fixture runs against SQLite (a real file) and PostgreSQL (a real
server); migrating an older SQLite file is SQLite's alone."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.stores import StoreTarget

from agentwrap.errors import IdempotencyConflict, InvalidMessage, MessageTooLarge, RateLimited
from agentwrap.message import Kind, NewMessage, Priority, QueueLimits, Source, Status
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.queue.sqlstore import SQLMessageStore


@pytest.fixture
def store(store_target: StoreTarget) -> Iterator[SQLMessageStore]:
    s = store_target.open()
    yield s
    s.close()


def msg(content: str = "hello", **kw: Any) -> NewMessage:
    return NewMessage(session="s1", content=content, **kw)


# --- internal sources, priorities and kinds ------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "kind", "named"),
    [
        ({"source": Source.SYSTEM}, Kind.CONTENT, "source 'system'"),
        ({"priority": Priority.STARTUP}, Kind.CONTENT, "priority 'startup'"),
        ({}, Kind.FALLBACK_NOTICE, "kind 'fallback_notice'"),
    ],
    ids=["system-source", "startup-priority", "fallback-kind"],
)
def test_senders_cannot_claim_what_is_agentwraps(
    store: SQLMessageStore, fields: dict[str, Any], kind: Kind, named: str
) -> None:
    with pytest.raises(InvalidMessage) as info:
        store.enqueue(msg(**fields), kind=kind)
    assert info.value.message == f"{named} is reserved for agentwrap"
    assert store.history(None) == []
    stored, created = store.enqueue(msg(**fields), kind=kind, internal=True)
    assert created and stored.kind is kind
    assert store.get(stored.id).kind is kind


@pytest.mark.parametrize("ttl", [5e-324, 1e-9, 0.0009])
def test_a_ttl_too_short_to_outlast_its_timestamp_is_refused(
    store: SQLMessageStore, ttl: float
) -> None:
    """Found by the HTTP fuzzer: the tiniest positive TTL was accepted and
    stored as expires == created, a message expired at birth."""
    with pytest.raises(InvalidMessage, match=r"out of range \[0.001, 3600\]"):
        store.enqueue(msg(ttl_s=ttl))
    assert store.history(None) == []
    m, _ = store.enqueue(msg(ttl_s=0.001))
    assert m.expires > m.created


def test_metadata_is_never_a_flag(store: SQLMessageStore) -> None:
    """A sender writing the old marker into metadata gets plain content."""
    m, _ = store.enqueue(msg(metadata={"fallback_notice": True}))
    assert m.kind is Kind.CONTENT
    assert m.metadata == {"fallback_notice": True}


def test_only_internal_system_messages_skip_the_rate_limit(store_target: StoreTarget) -> None:
    store = store_target.open(QueueLimits(rate_per_minute=1))
    for _ in range(3):
        store.enqueue(msg(source=Source.SYSTEM), internal=True)
    store.enqueue(msg(source=Source.USER))
    with pytest.raises(RateLimited):
        store.enqueue(msg(source=Source.USER))
    with pytest.raises(InvalidMessage, match="reserved"):  # not a way around it either
        store.enqueue(msg(source=Source.SYSTEM))
    store.close()


def test_a_database_without_the_kind_column_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SQLiteMessageStore(path)
    old, _ = store.enqueue(msg("from before"))
    store.close()
    conn = sqlite3.connect(path)  # what an older agentwrap left behind
    conn.execute("ALTER TABLE messages DROP COLUMN kind")
    conn.commit()
    conn.close()
    store = SQLiteMessageStore(path)
    assert store.get(old.id).kind is Kind.CONTENT
    new, _ = store.enqueue(msg("notice"), kind=Kind.FALLBACK_NOTICE, internal=True)
    assert store.get(new.id).kind is Kind.FALLBACK_NOTICE
    store.close()



def test_the_rate_window_index_of_an_older_database_is_replaced(tmp_path: Path) -> None:
    """The rate limit counts from a covering index (priority in it); an older
    store's index without it is dropped when the store is opened."""
    path = tmp_path / "old.db"
    SQLiteMessageStore(path).close()
    conn = sqlite3.connect(path)  # what an older agentwrap left behind
    conn.execute("DROP INDEX messages_rate_window")
    conn.execute("CREATE INDEX messages_rate ON messages (session, source, created)")
    conn.commit()
    conn.close()
    SQLiteMessageStore(path).close()
    conn = sqlite3.connect(path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    plan = " ".join(str(r) for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM messages WHERE session = 's' AND source = 'u'"
        " AND created > 0 AND priority != 5"))
    conn.close()
    assert "messages_rate_window" in names and "messages_rate" not in names
    assert "COVERING INDEX messages_rate_window" in plan


# --- idempotency ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"content": "other text"}, "content"),
        ({"source": Source.WEBHOOK}, "source"),
        ({"source_id": "ci"}, "source_id"),
        ({"priority": Priority.HIGH}, "priority"),
    ],
    ids=["content", "source", "source_id", "priority"],
)
def test_a_key_reused_for_another_message_is_a_conflict(
    store: SQLMessageStore, change: dict[str, Any], named: str
) -> None:
    first, _ = store.enqueue(msg("the text", idempotency_key="k"))
    fields: dict[str, Any] = {"content": "the text", "idempotency_key": "k", **change}
    with pytest.raises(IdempotencyConflict) as info:
        store.enqueue(NewMessage(session="s1", **fields))
    assert f"different {named}" in info.value.message
    assert first.id[:8] in info.value.message
    assert info.value.exit_code not in (0, 1, 65)  # its own code: scripts can tell
    assert [m.id for m in store.history(None)] == [first.id]


def test_a_key_whose_message_ended_still_answers_with_that_message(
    store: SQLMessageStore,
) -> None:
    """Documented choice: a key stays bound to its first message, terminal or not."""
    first, _ = store.enqueue(msg("x", idempotency_key="k", ttl_s=1))
    store.expire_overdue(now=time.time() + 5)
    again, created = store.enqueue(msg("x", idempotency_key="k"))
    assert not created and again.id == first.id and again.status is Status.EXPIRED


# --- metadata limits --------------------------------------------------------------------------


def nested(depth: int) -> dict[str, Any]:
    """An object nesting ``depth`` levels (the top object is level 1), built
    without recursion."""
    top: dict[str, Any] = {}
    cur = top
    for _ in range(depth - 1):
        child: dict[str, Any] = {}
        cur["a"] = child
        cur = child
    return top


def test_metadata_depth_is_capped_without_recursion(store: SQLMessageStore) -> None:
    store.enqueue(msg(metadata=nested(8)))
    for depth in (9, 600, 100_000):  # 100 000 would overflow any recursive walk
        with pytest.raises(InvalidMessage, match="deeper than 8 levels"):
            store.enqueue(msg(metadata=nested(depth)))
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(InvalidMessage, match="deeper than 8 levels"):
        store.enqueue(msg(metadata=looped))


def test_metadata_size_is_capped(store: SQLMessageStore) -> None:
    store.enqueue(msg(metadata={"blob": "x" * (16 * 1024 - 20)}))
    with pytest.raises(MessageTooLarge, match="the limit is 16384"):
        store.enqueue(msg(metadata={"blob": "x" * (16 * 1024)}))
    with pytest.raises(MessageTooLarge, match="metadata is more than 16384 bytes"):
        # refused from a lower bound: never serialized
        store.enqueue(msg(metadata={"blob": "x" * (20 * 1024 * 1024)}))
    many = {"list": list(range(1_000_000))}
    with pytest.raises(MessageTooLarge):
        store.enqueue(msg(metadata=many))
    assert store.history(None)[0].metadata["blob"].startswith("x")
    assert len(store.history(None)) == 1


class Unserialisable:
    """Proves the size walk refuses before json.dumps is ever reached."""

    def __repr__(self) -> str:
        raise AssertionError("json.dumps must not run for an oversized object")


def test_oversized_metadata_is_refused_before_serializing(store: SQLMessageStore) -> None:
    with pytest.raises(MessageTooLarge):
        store.enqueue(msg(metadata={"blob": "x" * 20_000, "z": Unserialisable()}))


def test_metadata_keys_are_capped(store: SQLMessageStore) -> None:
    with pytest.raises(InvalidMessage, match="more than 256 keys"):
        store.enqueue(msg(metadata={str(i): 0 for i in range(257)}))
    with pytest.raises(InvalidMessage, match="129 characters; the limit is 128"):
        store.enqueue(msg(metadata={"k" * 129: 0}))
    with pytest.raises(InvalidMessage, match="not a string"):
        store.enqueue(msg(metadata={1: 0}))
    ok, _ = store.enqueue(msg(metadata={"k" * 128: [1, 2.5, None, True, {"x": "y"}]}))
    assert json.dumps(ok.metadata)
