"""Admitting a new message: the limits that need the stored rows.

:func:`~agentwrap.queue.validate.validate` has already checked the message
alone; what is decided here needs what the store holds, read in the same
write transaction that stores the message, so producers racing each other
(other processes included) are counted in turn and cannot overrun a limit:
an idempotency key already used (the first message answers), the rate limit
per (session, source), the sender's own limit across sessions, the pending
limits with the eviction of the oldest ordinary messages, then the row and
its ``message.queued`` event. What the counts allow is :mod:`.rules`'; this
module runs SQLite's queries for them.

Group commit (:func:`admit_many`): a server under load stores many senders'
messages in one transaction, one commit (one fsync) for all, each in its own
savepoint so a refused one changes nothing; :class:`PendingCounts` keeps the
counts of the transaction as it stores, instead of counting again for every
message (which cost the most per message).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence

from ..errors import QueueError
from ..events import Conn
from ..message import Message, Priority, QueueLimits, Status
from . import rules
from .schema import session_filter, to_message
from .store import SenderLimit
from .transitions import expire
from .validate import Checked, check_same
from .writes import Write


def admit(w: Write, checked: Checked, limits: QueueLimits, clock: Callable[[], float],
          counts: PendingCounts | None = None) -> tuple[Message, bool]:
    """:meth:`SQLiteMessageStore.enqueue`'s work inside the open write transaction.
    ``counts``: the pending counts of a group commit, kept as it stores
    (counting every pending row again for each message cost the most)."""
    conn = w.conn
    new = checked.new
    now = clock()  # read under the write lock: created follows commit order
    if counts is None:
        expire(w, now, None)  # a group commit expired once, before its first
    if new.idempotency_key is not None:
        row = conn.execute(
            "SELECT * FROM messages WHERE session = ? AND idempotency_key = ?",
            (new.session, new.idempotency_key),
        ).fetchone()
        if row is not None:
            first = to_message(row)
            check_same(first, checked)
            return first, False
    check_rate(conn, checked, limits, now, counts)
    message_id = str(uuid.uuid4())
    evicted = make_room(w, new.session, message_id, now, limits, counts)
    message = insert(conn, message_id, checked, now)
    if counts is not None:
        counts.stored(new.session, 1 - evicted)
        counts.sent(new.session, checked.source.value, checked.priority)
    w.event(now, new.session, "message.queued", message_id,
            priority=str(checked.priority), source=checked.source.value,
            kind=checked.kind.value)
    return message, True


def admit_many(w: Write, checked: Sequence[Checked], limits: QueueLimits,
               clock: Callable[[], float]) -> list[tuple[Message, bool] | QueueError]:
    """:func:`admit` each in order, in one transaction (group commit): a later
    one sees the earlier ones; one refused is rolled back to its own savepoint
    and its :class:`QueueError` returned in its place."""
    conn = w.conn
    out: list[tuple[Message, bool] | QueueError] = []
    expire(w, clock(), None)  # once: the batch is one instant
    counts = PendingCounts()
    for c in checked:
        conn.execute("SAVEPOINT enqueue_one")
        try:
            out.append(admit(w, c, limits, clock, counts))
        except QueueError as exc:
            conn.execute("ROLLBACK TO enqueue_one")
            out.append(exc)
        conn.execute("RELEASE enqueue_one")
    return out


def insert(conn: Conn, message_id: str, c: Checked, now: float) -> Message:
    """Store the checked message as a new PENDING row; returns the message as
    stored (built from the same values, not read back: a read and its
    conversion were a fifth of a group commit's time per message)."""
    new = c.new
    message = Message(
        id=message_id, session=new.session, content=c.content, source=c.source,
        source_id=new.source_id, priority=c.priority, created=now, expires=now + c.ttl_s,
        metadata=json.loads(c.metadata_json), correlation_id=new.correlation_id,
        depth=new.depth, idempotency_key=new.idempotency_key,
        require_ack=None if new.require_ack is None else bool(new.require_ack),
        status=Status.PENDING, attempts=0, updated=now, finished=None, detail="",
        batch_id=None, phase=None, next_attempt_at=now, kind=c.kind,
    )
    conn.execute(
        "INSERT INTO messages (id, session, content, content_bytes, source, source_id,"
        " priority, created, expires, metadata, correlation_id, depth, idempotency_key,"
        " require_ack, status, attempts, updated, finished, detail, batch_id, phase,"
        " next_attempt_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
        " ?, ?, ?, ?, ?, ?)",
        (
            message.id, message.session, message.content, c.content_bytes,
            message.source.value, message.source_id, int(message.priority), message.created,
            message.expires, c.metadata_json, message.correlation_id, message.depth,
            message.idempotency_key,
            None if message.require_ack is None else int(message.require_ack),
            message.status.value, message.attempts, message.updated, message.finished,
            message.detail, message.batch_id, None, message.next_attempt_at,
            message.kind.value,
        ),
    )
    return message


def check_rate(conn: Conn, checked: Checked, limits: QueueLimits, now: float,
               counts: PendingCounts | None = None) -> None:
    """At most ``rate_per_minute`` accepted messages per (session, source) per 60 s
    (:func:`rules.rate_exempt` says which are not counted).

    A group commit (``counts``) counts each (session, source) once and adds
    what it stores: counting every message's window again cost the most per
    message when the limit is high. Only a count at the limit is counted
    exactly, for the refusal's retry time.
    """
    if rules.rate_exempt(checked):
        return
    rate = limits.rate_per_minute
    if (counts or PendingCounts()).in_window(
            conn, checked.new.session, checked.source.value, now - rules.RATE_WINDOW_S,
            rate) < rate:
        return
    rows = conn.execute(
        "SELECT created FROM messages WHERE session = ? AND source = ? AND created > ?"
        " AND priority != ? ORDER BY created",
        (checked.new.session, checked.source.value, now - rules.RATE_WINDOW_S, Priority.STARTUP),
    ).fetchall()
    rules.check_rate(checked, [r["created"] for r in rows], rate, now)


def check_sender(conn: Conn, checked: Checked, limit: SenderLimit,
                 now: float) -> None:
    """:class:`RateLimited` when the sender stored ``limit.count`` messages (to
    any session) in the last ``limit.window_s``; inside the write transaction,
    so concurrent writers are counted in turn."""
    rows = conn.execute(
        "SELECT created FROM messages WHERE source = ? AND source_id = ? AND created > ?"
        " ORDER BY created DESC LIMIT ?",
        (checked.source.value, checked.new.source_id, now - limit.window_s, limit.count),
    ).fetchall()
    rules.check_sender(limit, [float(r["created"]) for r in rows], now)


def make_room(w: Write, session: str, new_id: str, now: float, limits: QueueLimits,
              counts: PendingCounts | None = None) -> int:
    """Enforce the pending limits, evicting the oldest LOW/NORMAL if the session
    is full (:func:`rules.evictions`); returns how many were evicted."""
    conn = w.conn
    counts = counts if counts is not None else PendingCounts()
    in_session = counts.of(conn, session)
    n_evict = rules.evictions(limits, in_session, counts.of(conn, None))
    if n_evict == 0:
        return 0
    victims = conn.execute(
        "SELECT id FROM messages WHERE session = ? AND status = ? AND priority < ?"
        " ORDER BY created ASC, seq ASC LIMIT ?" + w.LOCK_ROWS,
        (session, Status.PENDING.value, rules.EVICTABLE_BELOW, n_evict),
    ).fetchall()
    rules.check_victims(len(victims), n_evict, session, in_session, limits)
    detail = f"evicted by {new_id}: session queue full"
    for victim in victims:
        conn.execute(
            "UPDATE messages SET status = ?, detail = ?, finished = ?, updated = ? WHERE id = ?",
            (Status.EVICTED.value, detail, now, now, victim["id"]),
        )
        w.event(now, session, "message.ended", victim["id"],
                status=Status.EVICTED.value, detail=detail)
    return n_evict


class PendingCounts:
    """Pending messages per session and in all, and messages in each rate
    window, counted once per write transaction and then kept as messages are
    stored and evicted: inside the transaction no other writer changes them."""

    def __init__(self) -> None:
        self._known: dict[str | None, int] = {}
        self._rated: dict[tuple[str, str], int] = {}  # (session, source) -> in the rate window

    def of(self, conn: Conn, session: str | None) -> int:
        if session not in self._known:
            self._known[session] = count_pending(conn, session)
        return self._known[session]

    def stored(self, session: str, change: int) -> None:
        """A message stored for ``session`` (``change``: 1 less the evicted ones)."""
        for key in (session, None):
            if key in self._known:
                self._known[key] += change

    def in_window(self, conn: Conn, session: str, source: str, since: float,
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
                " AND created > ? AND priority != ? LIMIT ?) AS counted",
                (session, source, since, Priority.STARTUP, rate)).fetchone()[0])
        return self._rated[key]

    def sent(self, session: str, source: str, priority: Priority) -> None:
        """A message stored from ``source``: one more in its window (STARTUP is not counted)."""
        key = (session, source)
        if key in self._rated and priority is not Priority.STARTUP:
            self._rated[key] += 1


def count_pending(conn: Conn, session: str | None) -> int:
    """Pending rows of ``session`` (None: all), expired or not: what the limits count."""
    where, params = session_filter(session)
    row = conn.execute(
        f"SELECT COUNT(*) FROM messages WHERE status = ? AND {where}",
        [Status.PENDING.value, *params],
    ).fetchone()
    return int(row[0])
