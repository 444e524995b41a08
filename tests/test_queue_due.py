"""The hook's quick question (agentwrap.queue.due) agrees with the service's
answer (Service.inbox) on the same rows, whatever state the queue is in."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentwrap.message import Kind, NewMessage, Status
from agentwrap.queue.due import anything_due
from agentwrap.service import Service


def _agree(svc: Service, session: str = "fake") -> bool:
    quick = anything_due(svc.paths.db_path, session)
    assert quick == bool(svc.inbox(session)), (quick, svc.inbox(session))
    return quick


def test_the_quick_answer_is_the_inbox_answer(svc: Service) -> None:
    from agentwrap.delivery.handover import CONSUMABLE_KINDS

    assert {k.value for k in CONSUMABLE_KINDS} == {"content", "instruction"}  # the SQL's list
    store = svc.store
    assert _agree(svc) is False  # nothing queued
    mine = svc.send(NewMessage(session="fake", content="the person's own words")).message
    assert mine.kind is Kind.INSTRUCTION and _agree(svc) is True  # a hook hands these too
    store.cancel(mine.id)
    store.enqueue(NewMessage(session="fake", content="for the hook"))
    assert _agree(svc) is True
    (m,) = store.claim_batch("fake", "b1", 10_000)
    assert _agree(svc) is False  # claimed by another reader: in flight
    store.retry_later("b1", next_attempt_at=time.time() + 600, detail="busy")
    assert _agree(svc) is False  # back in the queue, but waiting for its retry
    later = store.enqueue(NewMessage(session="fake", content="after it"))[0]
    assert _agree(svc) is False  # behind one waiting for its retry: not due either
    store.cancel(later.id)
    store.cancel(m.id)
    store.enqueue(NewMessage(session="fake", content="a command"), kind=Kind.COMMAND)
    assert _agree(svc) is False  # typed only: never handed to a reader
    store.enqueue(NewMessage(session="fake", content="short lived", ttl_s=0.001))
    time.sleep(0.01)
    assert _agree(svc) is False  # expired
    svc.registry.register(type(svc.registry.get("fake"))(
        name="other", profile="standin", backend="tmux", command=["x"], cwd="/",
        started=time.time()))
    store.enqueue(NewMessage(session="other", content="not yours"))
    assert _agree(svc) is False and _agree(svc, "other") is True
    store.claim_batch("other", "b2", 10_000)
    store.finish(Status.DELIVERED, "typed", batch_id="b2")
    assert _agree(svc, "other") is False  # delivered


def test_in_doubt_it_says_yes(tmp_path: Path) -> None:
    """No database, or one that is not a database: the full path decides."""
    assert anything_due(tmp_path / "missing.db", "fake") is True
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all" * 100)
    assert anything_due(tmp_path / "junk.db", "fake") is True
    assert not (tmp_path / "missing.db").exists()  # nothing made


def test_a_queue_on_a_server_is_never_answered_from_the_local_file(
    svc: Service, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The local file may hold an old, empty queue: with AGENTWRAP_STORE_URL
    the quick answer is "maybe", and the service asks the server."""
    assert anything_due(svc.paths.db_path, "fake") is False
    monkeypatch.setenv("AGENTWRAP_STORE_URL", "postgresql://aw@db/agentwrap")
    assert anything_due(svc.paths.db_path, "fake") is True


def test_the_quick_check_reads_the_queue_in_the_stores_delivery_order() -> None:
    """The hook's quick check keeps its own SQL (it must not load the stores): its order
    is the store's, so it asks about the message a claim would take first."""
    from agentwrap.queue import due
    from agentwrap.queue.schema import ORDER

    assert f"ORDER BY {ORDER} LIMIT 1" in due._SQL
