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

Every change a reader may wait for appends its event (:mod:`agentwrap.events`)
in the same transaction: ``message.queued`` for a new row, ``message.phase``
as a batch is claimed and typed, ``message.retry`` when an attempt failed,
``message.ended`` for every terminal status (finished, cancelled, expired,
evicted). After the commit the store announces them to the readers in
``events_dir`` (none given: the rows are written, nobody is woken).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import events
from ..errors import (
    InvalidMessage,
    MessageNotFound,
    QueueError,
    QueueFull,
    RateLimited,
    StoreCorrupt,
)
from ..message import (
    SECTION_REMOVED,
    TERMINAL_STATUSES,
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
from . import db
from .store import ChannelMetrics, QueueMetrics, SenderLimit
from .validate import Checked, check_same, validate

DEFAULT_LIMITS = QueueLimits()  # frozen: safe to share as a default
MIN_PREFIX = 4  # shortest id prefix a person may type
RATE_WINDOW_S = 60.0
SUCCESS_STATUSES = frozenset({Status.DELIVERED, Status.ACKNOWLEDGED})

_NOT_TERMINAL = (Status.PENDING.value, Status.DELIVERING.value)
_ORDER = "priority DESC, created ASC, seq ASC"  # delivery order; seq breaks ties of equal clocks
# In a session's queue queries "+expires" (unary plus) keeps the planner off
# messages_status_expires, so it walks messages_session_queue, which is
# already in delivery order (no sort, and no rows of other sessions).

_INDEX_NAME = re.compile(r"CREATE (?:UNIQUE )?INDEX IF NOT EXISTS (\w+)")
_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS messages (
        seq INTEGER PRIMARY KEY,          -- insertion order; stable tie-break
        id TEXT NOT NULL UNIQUE,          -- uuid4; the UNIQUE index serves get()/prefix look-ups
        session TEXT NOT NULL,
        content TEXT NOT NULL,            -- sanitized
        content_bytes INTEGER NOT NULL,   -- UTF-8 size, for claim_batch's max_bytes
        source TEXT NOT NULL,
        source_id TEXT NOT NULL,
        priority INTEGER NOT NULL,
        created REAL NOT NULL,
        expires REAL NOT NULL,
        metadata TEXT NOT NULL,           -- JSON object
        correlation_id TEXT,
        depth INTEGER NOT NULL,
        idempotency_key TEXT,
        require_ack INTEGER,              -- NULL: the session's config decides
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        updated REAL NOT NULL,
        finished REAL,
        detail TEXT NOT NULL DEFAULT '',
        batch_id TEXT,
        phase TEXT,
        next_attempt_at REAL NOT NULL,
        kind TEXT NOT NULL DEFAULT 'content'  -- message.Kind; set only by agentwrap itself
    )
    """,
    # peek / claim_batch / in_flight / pending_count(session) / eviction: one
    # session's rows of one status, already in delivery order.
    """CREATE INDEX IF NOT EXISTS messages_session_queue
       ON messages (session, status, priority DESC, created, seq)""",
    # expire_overdue (status + expires range) and pending_count() over all sessions.
    "CREATE INDEX IF NOT EXISTS messages_status_expires ON messages (status, expires)",
    # enqueue's idempotency look-up; UNIQUE also makes a second copy impossible.
    """CREATE UNIQUE INDEX IF NOT EXISTS messages_idempotency
       ON messages (session, idempotency_key) WHERE idempotency_key IS NOT NULL""",
    # the rate-limit window: accepted messages per (session, source) since t,
    # counted from the index alone (priority in it: STARTUP is not counted).
    "CREATE INDEX IF NOT EXISTS messages_rate_window ON messages (session, source, created, priority)",
    "DROP INDEX IF EXISTS messages_rate",  # its predecessor, without priority
    # set_phase / retry_later / finish(batch_id=...): the rows of one batch.
    "CREATE INDEX IF NOT EXISTS messages_batch ON messages (batch_id) WHERE batch_id IS NOT NULL",
    # history(session) newest first, and metrics(session).
    "CREATE INDEX IF NOT EXISTS messages_session_created ON messages (session, created)",
    # history(None) newest first over all sessions.
    "CREATE INDEX IF NOT EXISTS messages_created ON messages (created)",
    # flow_started(): the messages of one correlation flow (agent-to-agent limits).
    """CREATE INDEX IF NOT EXISTS messages_correlation
       ON messages (correlation_id) WHERE correlation_id IS NOT NULL""",
    # _check_sender(): what one sender (an agent's session) sent to every session.
    "CREATE INDEX IF NOT EXISTS messages_sender ON messages (source, source_id, created)",
    """
    CREATE TABLE IF NOT EXISTS attempts (
        message_id TEXT NOT NULL REFERENCES messages (id),
        number INTEGER NOT NULL,
        batch_id TEXT NOT NULL,
        started REAL NOT NULL,
        finished REAL,
        channel TEXT NOT NULL,
        outcome TEXT NOT NULL,
        evidence TEXT NOT NULL,
        PRIMARY KEY (message_id, number)  -- serves attempts(message_id) in order
    )
    """,
)

_INDEXES = [m.group(1) for m in map(_INDEX_NAME.search, _SCHEMA) if m]


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
        self._recorded = False  # the open write transaction appended events
        self.limits = limits
        self._clock = clock
        self._busy_timeout_ms = busy_timeout_ms
        self._lock = threading.RLock()
        self._conn = db.connect(path, busy_timeout_ms)
        if not self._schema_is_current():  # a read: opening needs no write lock
            with self._write() as conn:
                conn.execute(_SCHEMA[0])
                _migrate(conn)
                for statement in _SCHEMA[1:]:
                    conn.execute(statement)
                events.create(conn)

    # --- plumbing -----------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; once it committed, its events are announced."""
        with self._lock:
            self._recorded = False
            with (
                db.store_errors(self.path, self._busy_timeout_ms),
                db.transaction(self._conn) as conn,
            ):
                yield conn
            if self._recorded and self.events_dir is not None:
                self._recorded = False
                events.announce(self.events_dir)

    def _event(
        self, conn: sqlite3.Connection, now: float, session: str, kind: str, subject: str, /,
        **data: Any,
    ) -> None:
        """Append an event inside the open write transaction."""
        events.record(conn, now, session, kind, subject, **data)
        self._recorded = True

    def _ended(
        self, conn: sqlite3.Connection, now: float, rows: Iterable[sqlite3.Row], status: Status,
        detail: str,
    ) -> None:
        for r in rows:
            self._event(conn, now, r["session"], "message.ended", r["id"],
                        status=status.value, detail=detail)

    def _consumed(
        self, conn: sqlite3.Connection, now: float, rows: Iterable[sqlite3.Row], channel: str,
    ) -> None:
        by_session: dict[str, list[sqlite3.Row]] = {}
        for r in rows:
            by_session.setdefault(r["session"], []).append(r)
        for session, taken in by_session.items():
            self._event(conn, now, session, "session.consumed", "", count=len(taken),
                        sources=sorted({r["source"] for r in taken}), channel=channel,
                        ids=[r["id"] for r in taken])

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock, db.store_errors(self.path, self._busy_timeout_ms):
            return self._conn.execute(sql, params).fetchall()

    def _schema_is_current(self) -> bool:
        """Every table, index and column of this version is there.

        Checked with reads, so that opening the store to look at it (history,
        queue) works while another process holds the write lock.
        """
        names = {r[0] for r in self._read("SELECT name FROM sqlite_master")}
        if not {"messages", "attempts", "events", "events_by_session", *_INDEXES} <= names:
            return False
        return "kind" in {r["name"] for r in self._read("PRAGMA table_info(messages)")}

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
        with self._write() as conn:
            if sender_limit is not None:
                _check_sender(conn, checked, sender_limit, self._clock())
            return self._enqueue_in(conn, checked)

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
            with self._write() as conn:
                self._expire(conn, self._clock(), None)  # once: the batch is one instant
                counts = _PendingCounts()
                for i, c in checked:
                    conn.execute("SAVEPOINT enqueue_one")
                    try:
                        out[i] = self._enqueue_in(conn, c, counts)
                    except QueueError as exc:
                        conn.execute("ROLLBACK TO enqueue_one")
                        out[i] = exc
                    conn.execute("RELEASE enqueue_one")
        return [r for r in out if r is not None]  # every slot was filled above

    def _enqueue_in(self, conn: sqlite3.Connection, checked: Checked,
                    counts: _PendingCounts | None = None) -> tuple[Message, bool]:
        """:meth:`enqueue`'s work inside the open write transaction ``conn``.
        ``counts``: the pending counts of a group commit, kept as it stores
        (counting every pending row again for each message cost the most)."""
        new = checked.new
        now = self._clock()  # read under the write lock: created follows commit order
        if counts is None:
            self._expire(conn, now, None)  # a group commit expired once, before its first
        if new.idempotency_key is not None:
            row = conn.execute(
                "SELECT * FROM messages WHERE session = ? AND idempotency_key = ?",
                (new.session, new.idempotency_key),
            ).fetchone()
            if row is not None:
                first = _to_message(row)
                check_same(first, checked)
                return first, False
        self._check_rate(conn, checked, now, counts)
        message_id = str(uuid.uuid4())
        evicted = self._make_room(conn, new.session, message_id, now, counts)
        _insert(conn, message_id, checked, now)
        if counts is not None:
            counts.stored(new.session, 1 - evicted)
            counts.sent(new.session, checked.source.value, checked.priority)
        self._event(conn, now, new.session, "message.queued", message_id,
                    priority=str(checked.priority), source=checked.source.value,
                    kind=checked.kind.value)
        row = conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        return _to_message(row), True

    def _check_rate(self, conn: sqlite3.Connection, checked: Checked, now: float,
                    counts: _PendingCounts | None = None) -> None:
        """At most ``rate_per_minute`` accepted messages per (session, source) per 60 s.

        SYSTEM messages and STARTUP context are exempt (agentwrap's own, and
        needed to start a session) and are not counted either; only internal
        callers can enqueue them (see :func:`validate`). A group commit
        (``counts``) counts each (session, source) once and adds what it
        stores: counting every message's window again cost the most per
        message when the limit is high.
        """
        if checked.source is Source.SYSTEM or checked.priority is Priority.STARTUP:
            assert checked.internal, "reserved sources are refused in validate"
            return
        rate = self.limits.rate_per_minute
        if (counts or _PendingCounts()).in_window(
                conn, checked.new.session, checked.source.value, now - RATE_WINDOW_S, rate) < rate:
            return
        rows = conn.execute(
            "SELECT created FROM messages WHERE session = ? AND source = ? AND created > ?"
            " AND priority != ? ORDER BY created",
            (checked.new.session, checked.source.value, now - RATE_WINDOW_S, Priority.STARTUP),
        ).fetchall()
        if len(rows) < rate:
            return
        # Once this many have left the window there is room for one more.
        must_leave = len(rows) - rate + 1
        retry_after = max(0.0, rows[must_leave - 1]["created"] + RATE_WINDOW_S - now)
        raise RateLimited(
            f"rate limit: {len(rows)} messages from {checked.source} to session"
            f" {checked.new.session!r} in the last {RATE_WINDOW_S:.0f} s (limit {rate})",
            retry_after=retry_after,
        )

    def _make_room(self, conn: sqlite3.Connection, session: str, new_id: str, now: float,
                   counts: _PendingCounts | None = None) -> int:
        """Enforce the pending limits, evicting the oldest LOW/NORMAL if the session is full;
        returns how many were evicted.

        Fresh context is worth more than stale context, so the oldest ordinary
        message makes way; HIGH/CRITICAL/STARTUP are never dropped silently -
        the producer gets QueueFull instead.
        """
        counts = counts if counts is not None else _PendingCounts()
        in_session = counts.of(conn, session)
        n_evict = max(0, in_session - self.limits.max_pending_per_session + 1)
        total = counts.of(conn, None)
        if total - n_evict >= self.limits.max_pending_total:
            raise QueueFull(
                f"the queue holds {total} pending messages in all sessions"
                f" (limit {self.limits.max_pending_total})"
            )
        if n_evict == 0:
            return 0
        victims = conn.execute(
            "SELECT id FROM messages WHERE session = ? AND status = ? AND priority < ?"
            " ORDER BY created ASC, seq ASC LIMIT ?",
            (session, Status.PENDING.value, Priority.HIGH, n_evict),
        ).fetchall()
        if len(victims) < n_evict:
            raise QueueFull(
                f"session {session!r} has {in_session} pending messages"
                f" (limit {self.limits.max_pending_per_session}) and none can be evicted:"
                " all are high, critical or startup priority"
            )
        detail = f"evicted by {new_id}: session queue full"
        for victim in victims:
            conn.execute(
                "UPDATE messages SET status = ?, detail = ?, finished = ?, updated = ? WHERE id = ?",
                (Status.EVICTED.value, detail, now, now, victim["id"]),
            )
            self._event(conn, now, session, "message.ended", victim["id"],
                        status=Status.EVICTED.value, detail=detail)
        return n_evict

    # --- reading --------------------------------------------------------------------

    def get(self, message_id: str) -> Message:
        rows = self._read("SELECT * FROM messages WHERE id = ?", (message_id,))
        if not rows:
            raise MessageNotFound(f"no message with id {message_id!r}")
        return _to_message(rows[0])

    def get_by_prefix(self, prefix: str) -> Message:
        """Resolve a short id typed by a person (at least 4 characters, unique)."""
        p = prefix.strip().lower()
        if len(p) < MIN_PREFIX:
            raise InvalidMessage(
                f"message id prefix {prefix!r} is too short",
                hint=f"type at least {MIN_PREFIX} characters of the id",
            )
        # Ids are lowercase hex and '-', all below '~': a range scan on the UNIQUE index.
        rows = self._read(
            "SELECT * FROM messages WHERE id >= ? AND id < ? ORDER BY id LIMIT 2", (p, p + "~")
        )
        if not rows:
            raise MessageNotFound(f"no message id starts with {prefix!r}")
        if len(rows) > 1:
            raise InvalidMessage(
                f"message id prefix {prefix!r} is ambiguous",
                hint="type more characters of the id",
            )
        return _to_message(rows[0])

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
        t = self._now(now)
        where = "session = ? AND status = ? AND +expires > ?"
        params: list[Any] = [session, Status.PENDING.value, t]
        if due:
            where += " AND next_attempt_at <= ?"
            params.append(t)
        extra, extra_params = _selection(kinds, sources, contains, priorities)
        where += extra
        params += extra_params
        rows = self._read(
            f"SELECT * FROM messages WHERE {where} ORDER BY {_ORDER}"
            + (" LIMIT ?" if limit is not None else ""),
            [*params, limit] if limit is not None else params,
        )
        if not rows and limit != 0:
            self._verify_none(where, params)
        return [_to_message(r) for r in rows]

    def in_flight(self, session: str) -> list[Message]:
        """DELIVERING messages: what a restarted supervisor must resume (see phase)."""
        rows = self._read(
            f"SELECT * FROM messages WHERE session = ? AND status = ? ORDER BY {_ORDER}",
            (session, Status.DELIVERING.value),
        )
        return [_to_message(r) for r in rows]

    def attempts(self, message_id: str) -> list[Attempt]:
        rows = self._read(
            "SELECT * FROM attempts WHERE message_id = ? ORDER BY number", (message_id,)
        )
        return [_to_attempt(r) for r in rows]

    def history(
        self, session: str | None, limit: int = 200, statuses: Iterable[Status] | None = None
    ) -> list[Message]:
        """Newest first; ``session=None`` covers all sessions."""
        where, params = _session_filter(session)
        if statuses is not None:
            values = [Status(s).value for s in statuses]
            if not values:
                return []
            where += f" AND status IN ({','.join('?' * len(values))})"
            params.extend(values)
        rows = self._read(
            f"SELECT * FROM messages WHERE {where} ORDER BY created DESC, seq DESC LIMIT ?",
            [*params, limit],
        )
        if not rows and limit > 0:
            self._verify_none(where, params)
        return [_to_message(r) for r in rows]

    def _verify_none(self, where: str, params: Sequence[Any]) -> None:
        """An indexed query found no rows: make sure the table agrees.

        A damaged index page can read as a valid, empty one (SQLite's
        quick_check does not compare indexes with their table), and then
        ``history`` would say "no messages yet" about a full table. Checking
        the table itself, without indexes, costs a scan only when the answer
        is empty.
        """
        if self._read(f"SELECT 1 FROM messages NOT INDEXED WHERE {where} LIMIT 1", params):
            raise StoreCorrupt(
                f"the database {self.path} is damaged: an index of the messages table has"
                " lost rows that the table still holds",
                hint=f"rebuild the indexes (sqlite3 {self.path} REINDEX), or move the file"
                " aside to start empty; `agentwrap doctor` checks the store",
            )

    def pending_count(self, session: str | None = None) -> int:
        """Pending messages that have not expired (swept or not)."""
        where, params = _session_filter(session)
        rows = self._read(
            f"SELECT COUNT(*) FROM messages WHERE {where} AND status = ? AND expires > ?",
            [*params, Status.PENDING.value, self._clock()],
        )
        return int(rows[0][0])

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
        with self._write() as conn:
            t = self._now(now)
            self._expire(conn, t, session)
            extra, extra_params = _selection(kinds, sources, contains, priorities)
            rows = conn.execute(
                f"SELECT id, content_bytes, kind FROM messages WHERE session = ? AND status = ?"
                f" AND next_attempt_at <= ? AND +expires > ?{extra} ORDER BY {_ORDER}"
                + (" LIMIT ?" if limit is not None else ""),
                (session, Status.PENDING.value, t, t, *extra_params,
                 *((limit,) if limit is not None else ())),
            ).fetchall()
            ids = _fit(rows, max_bytes)
            if not ids:
                return []
            marks = ",".join("?" * len(ids))
            conn.execute(
                f"UPDATE messages SET status = ?, phase = ?, batch_id = ?, updated = ?"
                f" WHERE id IN ({marks})",
                (Status.DELIVERING.value, Phase.CLAIMED.value, batch_id, t, *ids),
            )
            for message_id in ids:
                self._event(conn, t, session, "message.phase", message_id,
                            phase=Phase.CLAIMED.value, batch=batch_id)
            claimed = conn.execute(
                f"SELECT * FROM messages WHERE batch_id = ? AND status = ? ORDER BY {_ORDER}",
                (batch_id, Status.DELIVERING.value),
            ).fetchall()
        return [_to_message(r) for r in claimed]

    def set_phase(self, batch_id: str, phase: Phase) -> list[Message]:
        """Record the write-ahead phase of a batch before acting on it.

        Returns the batch's messages that are still in flight: some may have
        expired while only CLAIMED, and those must not be typed.
        """
        with self._write() as conn:
            now = self._clock()
            changed = conn.execute(
                "UPDATE messages SET phase = ?, updated = ? WHERE batch_id = ? AND status = ?"
                " RETURNING id, session",
                (Phase(phase).value, now, batch_id, Status.DELIVERING.value),
            ).fetchall()
            for r in changed:
                self._event(conn, now, r["session"], "message.phase", r["id"],
                            phase=Phase(phase).value, batch=batch_id)
            rows = conn.execute(
                f"SELECT * FROM messages WHERE batch_id = ? AND status = ? ORDER BY {_ORDER}",
                (batch_id, Status.DELIVERING.value),
            ).fetchall()
        return [_to_message(r) for r in rows]

    def record_attempt(self, attempt: Attempt) -> None:
        """Store an attempt; recording the same (message, number) again updates it,
        so a supervisor can write it when it starts and again when it ends."""
        with self._write() as conn:
            if conn.execute(
                "SELECT 1 FROM messages WHERE id = ?", (attempt.message_id,)
            ).fetchone():
                conn.execute(
                    "INSERT INTO attempts (message_id, number, batch_id, started, finished,"
                    " channel, outcome, evidence) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (message_id, number) DO UPDATE SET batch_id = excluded.batch_id,"
                    " started = excluded.started, finished = excluded.finished,"
                    " channel = excluded.channel, outcome = excluded.outcome,"
                    " evidence = excluded.evidence",
                    (
                        attempt.message_id,
                        attempt.number,
                        attempt.batch_id,
                        attempt.started,
                        attempt.finished,
                        attempt.channel,
                        attempt.outcome,
                        attempt.evidence,
                    ),
                )
                return
        raise MessageNotFound(f"no message with id {attempt.message_id!r}")

    def retry_later(self, batch_id: str, next_attempt_at: float, detail: str) -> int:
        """Put a batch back in the queue after a failed attempt (counted).

        Messages whose TTL passed meanwhile end EXPIRED instead. Returns how
        many went back to PENDING.
        """
        with self._write() as conn:
            now = self._clock()
            expired_detail = f"expired before a retry: {detail}"
            expired = conn.execute(
                "UPDATE messages SET status = ?, attempts = attempts + 1,"
                " finished = ?, updated = ?, detail = ? WHERE batch_id = ? AND status = ?"
                " AND expires <= ? RETURNING id, session",
                (
                    Status.EXPIRED.value,
                    now,
                    now,
                    expired_detail,
                    batch_id,
                    Status.DELIVERING.value,
                    now,
                ),
            ).fetchall()
            self._ended(conn, now, expired, Status.EXPIRED, expired_detail)
            back = conn.execute(
                "UPDATE messages SET status = ?, phase = NULL, batch_id = NULL,"
                " attempts = attempts + 1, next_attempt_at = ?, updated = ?, detail = ?"
                " WHERE batch_id = ? AND status = ? RETURNING id, session, attempts",
                (
                    Status.PENDING.value,
                    next_attempt_at,
                    now,
                    detail,
                    batch_id,
                    Status.DELIVERING.value,
                ),
            ).fetchall()
            for r in back:
                self._event(conn, now, r["session"], "message.retry", r["id"],
                            next_attempt_at=next_attempt_at, detail=detail,
                            attempts=r["attempts"], held=False)
            return len(back)

    def hold(self, batch_id: str, next_attempt_at: float, detail: str) -> int:
        """Count a failed attempt but keep the batch in flight (DELIVERING, same
        phase and batch id).

        For a block that is still in the agent's input box: the next attempt
        must press the submit key again, never paste a second copy, and a
        restarted supervisor must find it in flight to do the same.
        """
        with self._write() as conn:
            now = self._clock()
            held = conn.execute(
                "UPDATE messages SET attempts = attempts + 1, next_attempt_at = ?,"
                " updated = ?, detail = ? WHERE batch_id = ? AND status = ?"
                " RETURNING id, session, attempts",
                (next_attempt_at, now, detail, batch_id, Status.DELIVERING.value),
            ).fetchall()
            for r in held:
                self._event(conn, now, r["session"], "message.retry", r["id"],
                            next_attempt_at=next_attempt_at, detail=detail,
                            attempts=r["attempts"], held=True)
            return len(held)

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
        if not status.terminal:
            raise ValueError(f"finish() needs a terminal status, not {status}")
        if (message_ids is None) == (batch_id is None):
            raise ValueError("finish() needs exactly one of message_ids and batch_id")
        if message_ids is not None:
            ids = list(message_ids)
            if not ids:
                return 0
            target = f"id IN ({','.join('?' * len(ids))})"
            target_params: list[Any] = ids
        else:
            target, target_params = "batch_id = ?", [batch_id]
        with self._write() as conn:
            now = self._clock()
            rows = conn.execute(
                "UPDATE messages SET status = ?, detail = ?, finished = ?, updated = ?,"
                " attempts = attempts + (status = ?)"
                f" WHERE {target} AND status IN (?, ?) RETURNING id, session, source",
                (
                    status.value,
                    detail,
                    now,
                    now,
                    Status.DELIVERING.value,
                    *target_params,
                    *_NOT_TERMINAL,
                ),
            ).fetchall()
            self._ended(conn, now, rows, status, detail)
            if consumed_through is not None:
                self._consumed(conn, now, rows, consumed_through)
            return len(rows)

    def cancel(self, message_id: str) -> Message:
        """Cancel a message that is still waiting; anything later is past recall."""
        with self._write() as conn:
            row = conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise MessageNotFound(f"no message with id {message_id!r}")
            if row["status"] != Status.PENDING.value:
                raise InvalidMessage(
                    f"message {message_id} is {row['status']}; only pending messages can be"
                    " cancelled",
                    hint="`agentwrap history NAME` shows what happened to it",
                )
            now = self._clock()
            conn.execute(
                "UPDATE messages SET status = ?, detail = ?, finished = ?, updated = ?"
                " WHERE id = ?",
                (Status.CANCELLED.value, "cancelled", now, now, message_id),
            )
            self._event(conn, now, row["session"], "message.ended", message_id,
                        status=Status.CANCELLED.value, detail="cancelled")
            row = conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        return _to_message(row)

    def acknowledge(self, message_id: str, detail: str) -> bool:
        """Move a message the agent got to ACKNOWLEDGED, exactly once.

        Only a DELIVERED message, or one typed and submitted (DELIVERING in
        phase SUBMITTED, its ACK awaited), can be acknowledged; returns False
        for anything else (not delivered yet, acknowledged already, ended
        otherwise), so of two racing acknowledgements one wins.
        """
        with self._write() as conn:
            now = self._clock()
            rows = conn.execute(
                "UPDATE messages SET status = ?, detail = ?, finished = COALESCE(finished, ?),"
                " updated = ?, attempts = attempts + (status = ?)"
                " WHERE id = ? AND (status = ? OR (status = ? AND phase = ?)) RETURNING id, session",
                (Status.ACKNOWLEDGED.value, detail, now, now, Status.DELIVERING.value, message_id,
                 Status.DELIVERED.value, Status.DELIVERING.value, Phase.SUBMITTED.value),
            ).fetchall()
            self._ended(conn, now, rows, Status.ACKNOWLEDGED, detail)
            return bool(rows)

    def flow_started(self, correlation_id: str) -> float | None:
        """When the flow ``correlation_id`` began: the oldest message carrying
        it, or the message whose id it is (a flow rooted in a message that had
        none); None if no message is left of it."""
        rows = self._read(
            "SELECT MIN(created) FROM (SELECT created FROM messages WHERE correlation_id = ?"
            " UNION ALL SELECT created FROM messages WHERE id = ?)",
            (correlation_id, correlation_id),
        )
        return None if rows[0][0] is None else float(rows[0][0])

    def expire_overdue(self, now: float | None = None) -> int:
        """Expire pending and claimed-but-not-typed messages past their TTL, all sessions."""
        with self._write() as conn:
            return self._expire(conn, self._now(now), None)

    def _expire(self, conn: sqlite3.Connection, now: float, session: str | None) -> int:
        """Expire overdue PENDING rows and DELIVERING rows not yet typed (phase CLAIMED).

        Rows past PASTING may already be in the agent's input box: those are left
        to their supervisor, which must finish them with evidence.
        """
        where, params = _session_filter(session)
        detail = "expired: TTL passed before delivery"
        changed = 0
        for extra, extra_params in (
            ("status = ?", [Status.PENDING.value]),
            ("status = ? AND phase = ?", [Status.DELIVERING.value, Phase.CLAIMED.value]),
        ):
            rows = conn.execute(
                f"UPDATE messages SET status = ?, detail = ?, finished = ?, updated = ?"
                f" WHERE {extra} AND expires <= ? AND {where} RETURNING id, session",
                [Status.EXPIRED.value, detail, now, now, *extra_params, now, *params],
            ).fetchall()
            self._ended(conn, now, rows, Status.EXPIRED, detail)
            changed += len(rows)
        return changed

    # --- events ---------------------------------------------------------------------

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

    # --- metrics --------------------------------------------------------------------

    def metrics(self, session: str | None) -> QueueMetrics:
        where, params = _session_filter(session)
        with self._lock, db.store_errors(self.path, self._busy_timeout_ms):
            return _metrics(self._conn, where, params)


# --- helpers (module functions: no state) ---------------------------------------------


def _insert(conn: sqlite3.Connection, message_id: str, c: Checked, now: float) -> None:
    new = c.new
    conn.execute(
        "INSERT INTO messages (id, session, content, content_bytes, source, source_id,"
        " priority, created, expires, metadata, correlation_id, depth, idempotency_key,"
        " require_ack, status, attempts, updated, finished, detail, batch_id, phase,"
        " next_attempt_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?,"
        " NULL, '', NULL, NULL, ?, ?)",
        (
            message_id,
            new.session,
            c.content,
            c.content_bytes,
            c.source.value,
            new.source_id,
            int(c.priority),
            now,
            now + c.ttl_s,
            c.metadata_json,
            new.correlation_id,
            new.depth,
            new.idempotency_key,
            None if new.require_ack is None else int(bool(new.require_ack)),
            Status.PENDING.value,
            now,
            now,
            c.kind.value,
        ),
    )


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a database made by an older agentwrap up to this schema."""
    columns = {row["name"] for row in conn.execute("PRAGMA table_info(messages)")}
    if "kind" not in columns:  # before internal kinds; every old row is content
        conn.execute("ALTER TABLE messages ADD COLUMN kind TEXT NOT NULL DEFAULT 'content'")


class _PendingCounts:
    """Pending messages per session and in all, and messages in each rate
    window, counted once per write transaction and then kept as messages are
    stored and evicted: inside the transaction no other writer changes them."""

    def __init__(self) -> None:
        self._known: dict[str | None, int] = {}
        self._rated: dict[tuple[str, str], int] = {}  # (session, source) -> in the rate window

    def of(self, conn: sqlite3.Connection, session: str | None) -> int:
        if session not in self._known:
            self._known[session] = _count_pending(conn, session)
        return self._known[session]

    def stored(self, session: str, change: int) -> None:
        """A message stored for ``session`` (``change``: 1 less the evicted ones)."""
        for key in (session, None):
            if key in self._known:
                self._known[key] += change

    def in_window(self, conn: sqlite3.Connection, session: str, source: str, since: float,
                  rate: int) -> int:
        """How many rate-counted messages (session, source) has stored since
        ``since``, up to ``rate`` (at least: counting stops there). Counted once
        per transaction, at its first message's window: a later message's window
        starts later, so the kept count can only be higher than its own, never
        lower (a count below the limit is below for every message of the batch;
        one at the limit is counted exactly by the caller)."""
        key = (session, source)
        if key not in self._rated:
            self._rated[key] = int(conn.execute(
                "SELECT COUNT(*) FROM (SELECT 1 FROM messages WHERE session = ? AND source = ?"
                " AND created > ? AND priority != ? LIMIT ?)",
                (session, source, since, Priority.STARTUP, rate)).fetchone()[0])
        return self._rated[key]

    def sent(self, session: str, source: str, priority: Priority) -> None:
        """A message stored from ``source``: one more in its window (STARTUP is not counted)."""
        key = (session, source)
        if key in self._rated and priority is not Priority.STARTUP:
            self._rated[key] += 1


def _count_pending(conn: sqlite3.Connection, session: str | None) -> int:
    where, params = _session_filter(session)
    row = conn.execute(
        f"SELECT COUNT(*) FROM messages WHERE status = ? AND {where}",
        [Status.PENDING.value, *params],
    ).fetchone()
    return int(row[0])


def _selection(
    kinds: Collection[Kind] | None, sources: Collection[Source] | None, contains: str | None,
    priorities: Collection[Priority] | None = None,
) -> tuple[str, list[Any]]:
    """SQL (`` AND ...``) and parameters narrowing a session's queue, for
    :meth:`SQLiteMessageStore.claim_batch` and :meth:`SQLiteMessageStore.peek`.

    ``contains`` is looked for in the content and in the ``source:source_id``
    label; SQLite's ``lower`` folds ASCII letters only, on both sides alike.
    """
    sql = ""
    params: list[Any] = []
    for column, values in (("kind", kinds), ("source", sources)):
        if values is not None:
            only = sorted(str(Kind(v).value if column == "kind" else Source(v).value)
                          for v in values)
            sql += f" AND {column} IN ({','.join('?' * len(only))})"
            params += only
    if priorities is not None:
        levels = sorted(int(Priority(p)) for p in priorities)
        sql += f" AND priority IN ({','.join('?' * len(levels))})"
        params += levels
    if contains:
        sql += (" AND (instr(lower(content), lower(?)) > 0"
                " OR instr(lower(source || ':' || source_id), lower(?)) > 0)")
        params += [contains, contains]
    return sql, params


def _session_filter(session: str | None) -> tuple[str, list[Any]]:
    if session is None:
        return "1", []
    return "session = ?", [session]


def _check_sender(conn: sqlite3.Connection, checked: Checked, limit: SenderLimit,
                  now: float) -> None:
    """:class:`RateLimited` when the sender stored ``limit.count`` messages (to
    any session) in the last ``limit.window_s``; inside the write transaction,
    so concurrent writers are counted in turn."""
    rows = conn.execute(
        "SELECT created FROM messages WHERE source = ? AND source_id = ? AND created > ?"
        " ORDER BY created DESC LIMIT ?",
        (checked.source.value, checked.new.source_id, now - limit.window_s, limit.count),
    ).fetchall()
    if len(rows) < limit.count:
        return
    retry = max(0.0, float(rows[-1]["created"]) + limit.window_s - now)
    raise RateLimited(
        f"{limit.what} sent {len(rows)} messages to other agents in the last"
        f" {limit.window_s:.0f} s (limit {limit.count})",
        retry_after=retry, hint=f"wait {retry:.0f} s; send fewer, fuller messages",
    )


def _fit(rows: Iterable[sqlite3.Row], max_bytes: int) -> list[str]:
    """Ids of the leading rows whose sizes sum to at most max_bytes (at least one).

    A COMMAND is typed as is, on its own: it never shares a batch.
    """
    ids: list[str] = []
    total = 0
    for row in rows:
        size = int(row["content_bytes"])
        command = row["kind"] == Kind.COMMAND.value
        if ids and (command or total + size > max_bytes):
            break
        if command:
            return [str(row["id"])]
        ids.append(str(row["id"]))
        total += size
    return ids


def _metrics(conn: sqlite3.Connection, where: str, params: list[Any]) -> QueueMetrics:
    by_status = {s: 0 for s in Status}
    for row in conn.execute(
        f"SELECT status, COUNT(*) AS n FROM messages WHERE {where} GROUP BY status", params
    ):
        by_status[Status(row["status"])] = int(row["n"])
    success = [s.value for s in SUCCESS_STATUSES]
    terminal = [s.value for s in TERMINAL_STATUSES]
    row = conn.execute(
        "SELECT"
        " SUM(attempts >= 1),"
        f" SUM(status IN (?, ?) AND attempts = 1),"
        f" SUM(status IN (?, ?) AND attempts > 1),"
        f" AVG(CASE WHEN status IN ({','.join('?' * len(terminal))}) THEN attempts END),"
        " AVG(CASE WHEN status IN (?, ?) THEN finished - created END),"
        " SUM(status IN (?, ?))"
        f" FROM messages WHERE {where}",
        [*success, *success, *terminal, *success, *success, *params],
    ).fetchone()
    n_success = int(row[5] or 0)
    return QueueMetrics(
        by_status=by_status,
        total=sum(by_status.values()),
        attempted=int(row[0] or 0),
        succeeded_first_try=int(row[1] or 0),
        succeeded_after_retry=int(row[2] or 0),
        escalated=by_status[Status.ESCALATED],
        failed=by_status[Status.FAILED],
        mean_attempts=None if row[3] is None else float(row[3]),
        mean_latency_s=None if row[4] is None else float(row[4]),
        p95_latency_s=_p95(conn, where, params, success, n_success),
        by_channel=_by_channel(conn, where, params, success),
    )


def _by_channel(
    conn: sqlite3.Connection, where: str, params: list[Any], success: list[str]
) -> dict[str, ChannelMetrics]:
    """Per channel: its attempts, and the messages its attempt ended (a message
    counts for the channel of its last attempt). An attempt neither ended a
    message successfully nor is still open failed."""
    counts = conn.execute(
        "SELECT a.channel, COUNT(*),"
        " SUM(a.number = m.attempts AND m.status IN (?, ?)),"
        " SUM(a.number = m.attempts + 1 AND m.status = ?)"  # counted once it ends
        f" FROM attempts a JOIN messages m ON m.id = a.message_id WHERE a.outcome != ? AND {where}"
        " GROUP BY a.channel",
        [*success, Status.DELIVERING.value, SECTION_REMOVED, *params],
    ).fetchall()
    latencies: dict[str, list[float]] = {}
    first: dict[str, int] = {}
    for channel, attempts, latency in conn.execute(
        "SELECT a.channel, m.attempts, m.finished - m.created"
        " FROM messages m JOIN attempts a ON a.message_id = m.id AND a.number = m.attempts"
        f" WHERE m.status IN (?, ?) AND {where}",
        [*success, *params],
    ):
        latencies.setdefault(channel, []).append(float(latency))
        first[channel] = first.get(channel, 0) + (attempts == 1)
    out: dict[str, ChannelMetrics] = {}
    for channel, n, ok, open_ in counts:
        lat = sorted(latencies.get(channel, ()))
        done = int(ok or 0)
        out[channel] = ChannelMetrics(
            attempts=int(n), failed_attempts=int(n) - done - int(open_ or 0), delivered=done,
            first_try=first.get(channel, 0),
            first_try_rate=first.get(channel, 0) / done if done else None,
            p50_latency_s=_nearest_rank(lat, 0.50), p95_latency_s=_nearest_rank(lat, 0.95),
        )
    return dict(sorted(out.items()))


def _nearest_rank(ordered: list[float], q: float) -> float | None:
    return ordered[math.ceil(q * len(ordered)) - 1] if ordered else None


def _p95(
    conn: sqlite3.Connection, where: str, params: list[Any], success: list[str], n: int
) -> float | None:
    """Nearest-rank 95th percentile of created -> success, sorted in SQL."""
    if n == 0:
        return None
    rank = math.ceil(0.95 * n)
    row = conn.execute(
        f"SELECT finished - created FROM messages WHERE status IN (?, ?) AND {where}"
        " ORDER BY 1 LIMIT 1 OFFSET ?",
        [*success, *params, rank - 1],
    ).fetchone()
    return float(row[0])


def _to_message(row: sqlite3.Row) -> Message:
    require_ack = row["require_ack"]
    phase = row["phase"]
    return Message(
        id=row["id"],
        session=row["session"],
        content=row["content"],
        source=Source(row["source"]),
        source_id=row["source_id"],
        priority=Priority(row["priority"]),
        created=row["created"],
        expires=row["expires"],
        metadata=json.loads(row["metadata"]),
        correlation_id=row["correlation_id"],
        depth=row["depth"],
        idempotency_key=row["idempotency_key"],
        require_ack=None if require_ack is None else bool(require_ack),
        status=Status(row["status"]),
        attempts=row["attempts"],
        updated=row["updated"],
        finished=row["finished"],
        detail=row["detail"],
        batch_id=row["batch_id"],
        phase=None if phase is None else Phase(phase),
        next_attempt_at=row["next_attempt_at"],
        kind=Kind(row["kind"]),
    )


def _to_attempt(row: sqlite3.Row) -> Attempt:
    return Attempt(
        message_id=row["message_id"],
        batch_id=row["batch_id"],
        number=row["number"],
        started=row["started"],
        finished=row["finished"],
        channel=row["channel"],
        outcome=row["outcome"],
        evidence=row["evidence"],
    )
