"""The durable message queue.

Producers (CLI, webhooks, schedulers, other agents) call
:meth:`MessageStore.enqueue`; supervisors claim batches, type them into the
agent and finish them. Everything is persisted in the one shared SQLite file
(:mod:`agentwrap.queue.db`), so a message survives crashes of either side and every
status change is visible to every process.

Concurrency model: each mutation is one short ``BEGIN IMMEDIATE`` transaction
(read-then-write under the write lock), so two supervisors can never claim the
same message and limits cannot be overrun by racing producers. Reads are single
statements and need no transaction.

:class:`MessageStore` (:mod:`agentwrap.queue.store`) is the storage interface;
it mentions no SQLite type so another backend (Redis) can implement it. The
stateless checks of a new message are in :mod:`agentwrap.queue.validate`.

:class:`SQLiteMessageStore` here owns the connection, its lock and its
transactions, and is the interface's one implementation; the work of each
operation is done, inside the transaction it opens, by the module for its
job: the tables (:mod:`.schema`), admitting a new message (:mod:`.admission`,
with the limits' rules in :mod:`.rules`), moving messages through their
statuses (:mod:`.transitions`), reading them (:mod:`.reads`) and their
figures (:mod:`.metrics`).

Every change a reader may wait for appends its event (:mod:`agentwrap.events`)
in the same transaction: ``message.queued`` for a new row, ``message.phase``
as a batch is claimed and typed, ``message.retry`` when an attempt failed,
``message.ended`` for every terminal status (finished, cancelled, expired,
evicted). After the commit the store announces them to the readers in
``events_dir`` (none given: the rows are written, nobody is woken).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import events
from ..errors import MessageNotFound, QueueError, StoreCorrupt
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
from . import admission, db, reads, schema, transitions
from .metrics import queue_metrics
from .schema import to_message
from .store import QueueMetrics, SenderLimit
from .validate import Checked, validate
from .writes import Write

DEFAULT_LIMITS = QueueLimits()  # frozen: safe to share as a default


class SQLiteMessageStore:
    """:class:`MessageStore` over the shared SQLite file.

    One connection per instance, guarded by a lock so a store may be shared by
    threads; processes each open their own store and SQLite's write lock
    (``BEGIN IMMEDIATE`` + busy timeout) orders them. All SQL runs inside
    :meth:`_write` or :meth:`_read`, where :func:`db.store_errors` turns a
    locked, full, corrupt or unreadable file into a :class:`StoreError`.
    """

    def __init__(
        self,
        path: Path,
        limits: QueueLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.time,
        *,
        busy_timeout_ms: int = db.BUSY_TIMEOUT_MS,
        events_dir: Path | None = None,
    ) -> None:
        self.path = path
        self.events_dir = events_dir
        self.limits = limits
        self._clock = clock
        self._busy_timeout_ms = busy_timeout_ms
        self._lock = threading.RLock()
        self._conn = db.connect(path, busy_timeout_ms)
        if not self._schema_is_current():  # a read: opening needs no write lock
            with self._write() as w:
                schema.create(w.conn)

    # --- plumbing -----------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[Write]:
        """One write transaction; once it committed, its events are announced."""
        with self._lock:
            with (
                db.store_errors(self.path, self._busy_timeout_ms),
                db.transaction(self._conn) as conn,
            ):
                w = Write(conn)
                yield w
            if w.recorded and self.events_dir is not None:
                events.announce(self.events_dir)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock, db.store_errors(self.path, self._busy_timeout_ms):
            return self._conn.execute(sql, params).fetchall()

    def _schema_is_current(self) -> bool:
        """Every table, index and column of this version is there.

        Checked with reads, so that opening the store to look at it (history,
        queue) works while another process holds the write lock.
        """
        names = {r[0] for r in self._read("SELECT name FROM sqlite_master")}
        if not schema.NAMES.issubset(names):
            return False
        columns = {r["name"] for r in self._read("PRAGMA table_info(messages)")}
        return schema.NEWEST_COLUMN in columns

    def check_integrity(self) -> None:
        """Raise :class:`StoreCorrupt` unless SQLite's ``quick_check`` passes.

        For answers that an unreadable page could fake: an empty history must
        mean no messages, not a damaged table.
        """
        rows = self._read("PRAGMA quick_check")
        problems = [
            line
            for r in rows
            for line in str(r[0]).splitlines()
            if line != "ok" and not line.startswith("***")  # "*** in database main ***"
        ]
        if problems:
            raise StoreCorrupt(
                f"the database {self.path} is damaged: {problems[0]}"
                + (f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""),
                hint=f"move it aside (mv {self.path} {self.path}.broken, and its -wal/-shm files),"
                " then agentwrap starts a new, empty one; `agentwrap doctor` checks the store",
            )

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now

    def close(self) -> None:
        with self._lock:
            self._conn.close()

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
        checked = validate(new, self.limits, kind, internal)
        with self._write() as w:
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
                checked.append((i, validate(new, self.limits, kind, False)))
            except QueueError as exc:
                out[i] = exc
        if checked:
            with self._write() as w:
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
        return reads.peek(self._read, self.path, session, self._now(now), kinds=kinds,
                          sources=sources, contains=contains, due=due, limit=limit,
                          priorities=priorities)

    def in_flight(self, session: str) -> list[Message]:
        """DELIVERING messages: what a restarted supervisor must resume (see phase)."""
        return reads.in_flight(self._read, session)

    def attempts(self, message_id: str) -> list[Attempt]:
        return reads.attempts(self._read, message_id)

    def history(
        self, session: str | None, limit: int = 200, statuses: Iterable[Status] | None = None
    ) -> list[Message]:
        """Newest first; ``session=None`` covers all sessions."""
        return reads.history(self._read, self.path, session, limit, statuses)

    def pending_count(self, session: str | None = None) -> int:
        """Pending messages that have not expired (swept or not)."""
        return reads.pending_count(self._read, session, self._clock())

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
                w, session, batch_id, max_bytes, self._now(now), kinds=kinds, sources=sources,
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
        with self._lock, db.store_errors(self.path, self._busy_timeout_ms):
            return events.since(self._conn, after, session=session, kinds=kinds,
                                subject=subject, limit=limit)

    def last_event_id(self) -> int:
        with self._lock, db.store_errors(self.path, self._busy_timeout_ms):
            return events.last_id(self._conn)

    def metrics(self, session: str | None) -> QueueMetrics:
        with self._lock, db.store_errors(self.path, self._busy_timeout_ms):
            return queue_metrics(self._conn, session)
