"""The queue's operations, written once for every SQL store.

:class:`SQLMessageStore` is each :class:`~agentwrap.queue.store.MessageStore`
operation as its documented semantics, done in the module for its job
(:mod:`.admission`, :mod:`.transitions`, :mod:`.reads`, :mod:`.metrics`)
inside the transaction the backend opens. A backend (SQLite: :mod:`.sqlite`,
PostgreSQL: :mod:`.postgres`) gives the plumbing only: its connection and
lock, :meth:`~SQLMessageStore._write` (one write transaction and the events
it announces after the commit), :meth:`~SQLMessageStore._read` (one
statement) and :meth:`~SQLMessageStore._reading` (a connection to read
several statements from), with its own errors turned into
:class:`~agentwrap.errors.StoreError`. The statements are in the SQL both
engines share, with ``?`` placeholders (:class:`agentwrap.events.Conn`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import events
from ..errors import MessageNotFound, QueueError
from ..message import (
    Attempt,
    Kind,
    Message,
    NewMessage,
    Phase,
    Priority,
    QueueLimits,
    Source,
    Status,
)
from . import admission, reads, transitions
from .keys import SessionKeys
from .metrics import queue_metrics
from .schema import to_message
from .store import QueueMetrics, SenderLimit
from .validate import Checked, validate
from .writes import Write

DEFAULT_LIMITS = QueueLimits()  # frozen: safe to share as a default


class SQLMessageStore:
    """:class:`MessageStore`'s operations over a backend's plumbing (see the module)."""

    limits: QueueLimits
    _clock: Callable[[], float]
    keys = SessionKeys()  # a shared store's: rows keyed HOST/NAME (:mod:`.keys`)
    where: Path  # what error messages name: the file, or the server (no password)
    # an empty answer read on an index is checked against the table (reads.checked):
    # SQLite's damaged index pages read as empty ones
    checks_indexes = True

    def __init__(self, limits: QueueLimits = DEFAULT_LIMITS,
                 clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self._clock = clock

    # --- plumbing: the backend's ----------------------------------------------------

    def _write(self) -> AbstractContextManager[Write]:
        raise NotImplementedError

    def _read(self, sql: str, params: Sequence[Any] = ()) -> Sequence[events.Row]:
        raise NotImplementedError

    def _reading(self) -> AbstractContextManager[events.Conn]:
        """A connection for reads of several statements, under the store's lock."""
        raise NotImplementedError

    def _admit(self, w: Write) -> None:
        """Called first in every enqueue transaction: a backend whose writers
        do not all take turns makes admissions take turns here (SQLite's
        write lock already orders them)."""

    def listen(self, wake: Callable[[str], object] | None = None) -> None:
        """Nothing to do where every writer is on this host: its commits are
        announced to the readers in ``events_dir`` already, and its sends
        wake the supervisor themselves."""

    def check_integrity(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now

    def _key(self, session: str | None) -> str | None:
        return None if session is None else self.keys.key(session)

    def _keyed(self, new: NewMessage, kind: Kind, internal: bool) -> Checked:
        """``new`` validated under its session's name, then stored under its key."""
        name, key = self.keys.checked(new.session)
        checked = validate(replace(new, session=name) if name != new.session else new,
                           self.limits, kind, internal)
        return checked if key == name else replace(checked, new=replace(checked.new, session=key))

    # --- enqueue ------------------------------------------------------------------

    def enqueue(
        self, new: NewMessage, *, kind: Kind = Kind.CONTENT, internal: bool = False,
        sender_limit: SenderLimit | None = None,
    ) -> tuple[Message, bool]:
        """Validate, apply limits and store durably (committed with synchronous=FULL).

        Returns ``(message, created)``. An idempotency key already used in the
        session for the same message (content, source, source_id, priority,
        kind) returns the first message unchanged with ``created=False``: no
        copy, no rate-limit charge, no capacity check (it was accepted), in
        whatever state it is now, terminal included. A key stays bound to its
        first message for as long as the store keeps it: the same key with
        different content raises :class:`IdempotencyConflict`.

        ``internal=True`` is for agentwrap's own messages only: it may use
        ``Source.SYSTEM``, ``Priority.STARTUP`` and a ``kind`` other than
        CONTENT, which senders can never claim, and its SYSTEM/STARTUP
        messages are exempt from the rate limit. Every rejection raises
        before anything is written. ``sender_limit``: the sender's own limit
        across sessions (:class:`SenderLimit`), checked in the same transaction.
        """
        checked = self._keyed(new, kind, internal)
        with self._write() as w:
            self._admit(w)
            if sender_limit is not None:
                admission.check_sender(w.conn, checked, sender_limit, self._clock())
            return admission.admit(w, checked, self.limits, self._clock)

    def enqueue_many(
        self, items: Sequence[tuple[NewMessage, Kind]]
    ) -> list[tuple[Message, bool] | QueueError]:
        """Several senders' :meth:`enqueue` in one transaction: one commit (one
        fsync) for all of them, which is what lets a server under load store
        hundreds of messages a second (group commit).

        Each item is checked and stored exactly as :meth:`enqueue` alone would,
        in order (a later one sees the earlier ones: rate limit, capacity,
        idempotency key); one that is refused is rolled back to its own
        savepoint and its error (a :class:`QueueError`) returned in its place,
        so it changes nothing and the others go on. A store error (locked,
        full, damaged) raises for all: nothing of the batch is committed.
        Results are returned only after the commit, so every message reported
        stored is durable. Never internal (senders only).
        """
        out: list[tuple[Message, bool] | QueueError | None] = [None] * len(items)
        checked: list[tuple[int, Checked]] = []
        for i, (new, kind) in enumerate(items):
            try:
                checked.append((i, self._keyed(new, kind, False)))
            except QueueError as exc:
                out[i] = exc
        if checked:
            with self._write() as w:
                self._admit(w)
                stored = admission.admit_many(w, [c for _, c in checked], self.limits, self._clock)
            for (i, _), result in zip(checked, stored, strict=True):
                out[i] = result
        return [r for r in out if r is not None]  # every slot was filled above

    # --- reading --------------------------------------------------------------------

    def get(self, message_id: str) -> Message:
        return reads.get(self._read, message_id)

    def get_by_prefix(self, prefix: str) -> Message:
        """Resolve a short id typed by a person (at least 4 characters, unique)."""
        return reads.get_by_prefix(self._read, prefix)

    def peek(
        self, session: str, now: float | None = None, *, kinds: Collection[Kind] | None = None,
        sources: Collection[Source] | None = None, contains: str | None = None,
        due: bool = False, limit: int | None = None,
        priorities: Collection[Priority] | None = None,
    ) -> list[Message]:
        """Pending, unexpired messages in delivery order; changes nothing.

        The filters are :meth:`claim_batch`'s (``due``: not waiting for a retry),
        so a reader can see what a claim with the same filters would take.
        """
        return [m for m in reads.peek(
            self._read, self.where, self.keys.key(session), self._now(now), kinds=kinds,
            sources=sources, contains=contains, due=due, limit=limit, priorities=priorities,
            check=self.checks_indexes)]

    def in_flight(self, session: str) -> list[Message]:
        """DELIVERING messages: what a restarted supervisor must resume (see phase)."""
        return [m for m in reads.in_flight(self._read, self.keys.key(session))]

    def attempts(self, message_id: str) -> list[Attempt]:
        return reads.attempts(self._read, message_id)

    def history(
        self, session: str | None, limit: int = 200, statuses: Iterable[Status] | None = None
    ) -> list[Message]:
        """Newest first; ``session=None`` covers all sessions."""
        return [m for m in reads.history(self._read, self.where, self._key(session), limit,
                                                    statuses, check=self.checks_indexes)]

    def batch_sessions(self, batch_id: str) -> set[str]:
        """The sessions (keys) of the messages ever claimed in ``batch_id``:
        what a hub checks before a host may act on the batch (issue 38)."""
        rows = self._read("SELECT DISTINCT session FROM messages WHERE batch_id = ?", (batch_id,))
        return {str(r["session"]) for r in rows}

    def pending_count(self, session: str | None = None) -> int:
        """Pending messages that have not expired (swept or not)."""
        return reads.pending_count(self._read, self._key(session), self._clock())

    def flow_started(self, correlation_id: str) -> float | None:
        """When the flow ``correlation_id`` began: the oldest message carrying
        it, or the message whose id it is (a flow rooted in a message that had
        none); None if no message is left of it."""
        return reads.flow_started(self._read, correlation_id)

    # --- delivery -------------------------------------------------------------------

    def claim_batch(
        self, session: str, batch_id: str, max_bytes: int, now: float | None = None,
        *, kinds: Collection[Kind] | None = None, sources: Collection[Source] | None = None,
        contains: str | None = None, limit: int | None = None,
        priorities: Collection[Priority] | None = None,
    ) -> list[Message]:
        """Atomically take the due messages that fit in ``max_bytes``, in delivery order.

        The batch stops at the first message that does not fit (never skipping
        ahead, which would break priority/FIFO order) but always holds at least
        one message if any is due, so an oversized message cannot block the queue.
        ``kinds``: only messages of these kinds are considered (a reader that
        is handed text, not a terminal, never takes a COMMAND meant to be typed).
        ``sources``, ``contains`` (text in the content or the ``source:source_id``
        label, ASCII letters in any case), ``priorities`` (only these: a
        SessionStart hook takes only start-up context) and ``limit`` (most
        messages) narrow what a reader that asked for them takes; the rest
        stays queued.
        """
        if not batch_id:
            raise ValueError("batch_id must not be empty")
        with self._write() as w:
            claimed = transitions.claim_batch(
                w, self.keys.key(session), batch_id, max_bytes, self._now(now), kinds=kinds, sources=sources,
                contains=contains, limit=limit, priorities=priorities)
        return [to_message(r) for r in claimed]

    def set_phase(self, batch_id: str, phase: Phase) -> list[Message]:
        """Record the write-ahead phase of a batch before acting on it.

        Returns the batch's messages that are still in flight: some may have
        expired while only CLAIMED, and those must not be typed.
        """
        with self._write() as w:
            rows = transitions.set_phase(w, batch_id, phase, self._clock())
        return [to_message(r) for r in rows]

    def record_attempt(self, attempt: Attempt) -> None:
        """Store an attempt; recording the same (message, number) again updates it,
        so a supervisor can write it when it starts and again when it ends."""
        with self._write() as w:
            if transitions.record_attempt(w.conn, attempt):
                return
        raise MessageNotFound(f"no message with id {attempt.message_id!r}")

    def retry_later(self, batch_id: str, next_attempt_at: float, detail: str) -> int:
        """Put a batch back in the queue after a failed attempt (counted).

        Messages whose TTL passed meanwhile end EXPIRED instead. Returns how
        many went back to PENDING.
        """
        with self._write() as w:
            return transitions.retry_later(w, batch_id, next_attempt_at, detail, self._clock())

    def hold(self, batch_id: str, next_attempt_at: float, detail: str) -> int:
        """Count a failed attempt but keep the batch in flight (DELIVERING, same
        phase and batch id).

        For a block that is still in the agent's input box: the next attempt
        must press the submit key again, never paste a second copy, and a
        restarted supervisor must find it in flight to do the same.
        """
        with self._write() as w:
            return transitions.hold(w, batch_id, next_attempt_at, detail, self._clock())

    def finish(
        self,
        status: Status,
        detail: str = "",
        *,
        message_ids: Sequence[str] | None = None,
        batch_id: str | None = None,
        consumed_through: str | None = None,
    ) -> int:
        """Move messages (by ids or by batch) to a terminal status, exactly once.

        Rows already terminal are left alone, so a late or repeated finish is a
        no-op; returns how many changed. Finishing a DELIVERING message counts
        its attempt. ``consumed_through``: a reader took them itself (an MCP
        tool, a hook) through that channel; a ``session.consumed`` event per
        session says how many and from which sources, in the same transaction.
        """
        status = Status(status)
        target = transitions.finish_target(status, message_ids, batch_id)
        if target is None:
            return 0
        with self._write() as w:
            return transitions.finish(w, status, detail, *target, consumed_through,
                                      self._clock())

    def cancel(self, message_id: str) -> Message:
        """Cancel a message that is still waiting; anything later is past recall."""
        with self._write() as w:
            row = transitions.cancel(w, message_id, self._clock)
        return to_message(row)

    def acknowledge(self, message_id: str, detail: str) -> bool:
        """Move a message the agent got to ACKNOWLEDGED, exactly once.

        Only a DELIVERED message, or one typed and submitted (DELIVERING in
        phase SUBMITTED, its ACK awaited), can be acknowledged; returns False
        for anything else (not delivered yet, acknowledged already, ended
        otherwise), so of two racing acknowledgements one wins.
        """
        with self._write() as w:
            return transitions.acknowledge(w, message_id, detail, self._clock())

    def expire_overdue(self, now: float | None = None) -> int:
        """Expire pending and claimed-but-not-typed messages past their TTL, all sessions."""
        with self._write() as w:
            return transitions.expire(w, self._now(now), None)

    def overdue(self, now: float | None = None) -> bool:
        """Whether :meth:`expire_overdue` would end anything (one read, no write)."""
        return transitions.overdue(self._read, self._now(now))

    # --- events and metrics ---------------------------------------------------------

    def events(
        self,
        after: int,
        *,
        session: str | None = None,
        kinds: Iterable[str] | None = None,
        subject: str | None = None,
        limit: int = 1000,
    ) -> list[events.Event]:
        """Events with ids above ``after``, oldest first (see :mod:`agentwrap.events`)."""
        with self._reading() as conn:
            return events.since(conn, after, session=self._key(session), kinds=kinds,
                                subject=subject, limit=limit)

    def last_event_id(self) -> int:
        with self._reading() as conn:
            return events.last_id(conn)

    def metrics(self, session: str | None) -> QueueMetrics:
        with self._reading() as conn:
            return queue_metrics(conn, self._key(session))

