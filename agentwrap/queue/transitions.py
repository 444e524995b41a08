"""Moving stored messages through their statuses: the delivery side of the queue.

A PENDING message is claimed in a batch (DELIVERING, phase CLAIMED), its
batch's write-ahead phase is recorded before each step of typing it, its
attempts are recorded, and it ends once: delivered, acknowledged, failed,
escalated, cancelled or expired; or it goes back to the queue for a retry, or
is held in flight (a block still in the agent's input box). Each function
here is one write of :class:`~agentwrap.queue.sqlite.SQLiteMessageStore`,
inside its open transaction (a :class:`~agentwrap.queue.writes.Write`), with
the events the change appends; the store converts the rows it returns after
the commit. Which rows a batch takes is :func:`rules.fit`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from ..errors import InvalidMessage, MessageNotFound
from ..events import Conn, Row
from ..message import Attempt, Kind, Phase, Priority, Source, Status
from . import rules
from .schema import ORDER, selection, session_filter
from .writes import Write

NOT_TERMINAL = (Status.PENDING.value, Status.DELIVERING.value)


def claim_batch(
    w: Write, session: str, batch_id: str, max_bytes: int, t: float,
    *, kinds: Collection[Kind] | None, sources: Collection[Source] | None,
    contains: str | None, limit: int | None, priorities: Collection[Priority] | None,
) -> list[Row]:
    """The rows of the batch claimed at ``t`` (none: nothing was due), taken from
    the due run at the head of the queue (:func:`rules.due_run`)."""
    conn = w.conn
    w.claiming(session)
    expire(w, t, session)
    extra, extra_params = selection(kinds, sources, contains, priorities)
    rows = conn.execute(
        f"SELECT id, content_bytes, kind, next_attempt_at FROM messages"
        f" WHERE session = ? AND status = ? AND +expires > ?{extra} ORDER BY {ORDER}"
        + (" LIMIT ?" if limit is not None else "") + w.LOCK_ROWS,
        (session, Status.PENDING.value, t, *extra_params,
         *((limit,) if limit is not None else ())),
    ).fetchall()
    head = rules.due_run(rows, t, lambda r: float(r["next_attempt_at"]))
    ids = rules.fit(((str(r["id"]), int(r["content_bytes"]), r["kind"] == Kind.COMMAND.value)
                     for r in head), max_bytes)
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    conn.execute(
        f"UPDATE messages SET status = ?, phase = ?, batch_id = ?, updated = ?"
        f" WHERE id IN ({marks})",
        (Status.DELIVERING.value, Phase.CLAIMED.value, batch_id, t, *ids),
    )
    for message_id in ids:
        w.event(t, session, "message.phase", message_id,
                phase=Phase.CLAIMED.value, batch=batch_id)
    return batch(w.conn, batch_id)


def batch(conn: Conn, batch_id: str) -> list[Row]:
    """The rows of a batch still in flight, in delivery order."""
    return conn.execute(
        f"SELECT * FROM messages WHERE batch_id = ? AND status = ? ORDER BY {ORDER}",
        (batch_id, Status.DELIVERING.value),
    ).fetchall()


def set_phase(w: Write, batch_id: str, phase: Phase, now: float) -> list[Row]:
    """Record the batch's phase; the rows of the batch still in flight."""
    changed = w.conn.execute(
        "UPDATE messages SET phase = ?, updated = ? WHERE batch_id = ? AND status = ?"
        " RETURNING id, session",
        (Phase(phase).value, now, batch_id, Status.DELIVERING.value),
    ).fetchall()
    for r in changed:
        w.event(now, r["session"], "message.phase", r["id"],
                phase=Phase(phase).value, batch=batch_id)
    return batch(w.conn, batch_id)


def record_attempt(conn: Conn, attempt: Attempt) -> bool:
    """Store (or update) the attempt; False if its message is not stored."""
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
                str(attempt.outcome),  # the stored word (an AttemptOutcome is one)
                attempt.evidence,
            ),
        )
        return True
    return False


def retry_later(w: Write, batch_id: str, next_attempt_at: float, detail: str,
                now: float) -> int:
    """The batch back to PENDING (its expired rows EXPIRED); how many went back."""
    conn = w.conn
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
    w.ended(now, expired, Status.EXPIRED, expired_detail)
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
    return _retried(w, back, now, next_attempt_at, detail, held=False)


def hold(w: Write, batch_id: str, next_attempt_at: float, detail: str, now: float) -> int:
    """Count a failed attempt of the batch, keeping it in flight; how many rows."""
    held = w.conn.execute(
        "UPDATE messages SET attempts = attempts + 1, next_attempt_at = ?,"
        " updated = ?, detail = ? WHERE batch_id = ? AND status = ?"
        " RETURNING id, session, attempts",
        (next_attempt_at, now, detail, batch_id, Status.DELIVERING.value),
    ).fetchall()
    return _retried(w, held, now, next_attempt_at, detail, held=True)


def _retried(w: Write, rows: Sequence[Any], now: float, next_attempt_at: float, detail: str, *,
             held: bool) -> int:
    """A ``message.retry`` event for each row (``held``: still in flight); how many."""
    for r in rows:
        w.event(now, r["session"], "message.retry", r["id"],
                next_attempt_at=next_attempt_at, detail=detail,
                attempts=r["attempts"], held=held)
    return len(rows)


def finish_target(
    status: Status, message_ids: Sequence[str] | None, batch_id: str | None,
) -> tuple[str, list[Any]] | None:
    """SQL and parameters selecting what :func:`finish` ends: the ids or the
    batch (exactly one of them); None for no ids (nothing to do)."""
    if not status.terminal:
        raise ValueError(f"finish() needs a terminal status, not {status}")
    if (message_ids is None) == (batch_id is None):
        raise ValueError("finish() needs exactly one of message_ids and batch_id")
    if message_ids is not None:
        ids = list(message_ids)
        if not ids:
            return None
        return f"id IN ({','.join('?' * len(ids))})", ids
    return "batch_id = ?", [batch_id]


def finish(w: Write, status: Status, detail: str, target: str, target_params: Sequence[Any],
           consumed_through: str | None, now: float) -> int:
    """End the rows ``target`` (SQL) selects that have not ended; how many."""
    rows = w.conn.execute(
        "UPDATE messages SET status = ?, detail = ?, finished = ?, updated = ?,"
        " attempts = attempts + CASE WHEN status = ? THEN 1 ELSE 0 END"
        f" WHERE {target} AND status IN (?, ?) RETURNING id, session, source",
        (
            status.value,
            detail,
            now,
            now,
            Status.DELIVERING.value,
            *target_params,
            *NOT_TERMINAL,
        ),
    ).fetchall()
    w.ended(now, rows, status, detail)
    if consumed_through is not None:
        w.consumed(now, rows, consumed_through)
    return len(rows)


def cancel(w: Write, message_id: str, clock: Callable[[], float]) -> Row:
    """CANCELLED, if still PENDING; the row as it is now."""
    conn = w.conn
    row = conn.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
    if row is None:
        raise MessageNotFound(f"no message with id {message_id!r}")
    if row["status"] != Status.PENDING.value:
        raise InvalidMessage(
            f"message {message_id} is {row['status']}; only pending messages can be"
            " cancelled",
            hint="`agentwrap history NAME` shows what happened to it",
        )
    now = clock()
    conn.execute(
        "UPDATE messages SET status = ?, detail = ?, finished = ?, updated = ?"
        " WHERE id = ?",
        (Status.CANCELLED.value, "cancelled", now, now, message_id),
    )
    w.event(now, row["session"], "message.ended", message_id,
            status=Status.CANCELLED.value, detail="cancelled")
    changed: Row = conn.execute(
        "SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
    return changed


def acknowledge(w: Write, message_id: str, detail: str, now: float) -> bool:
    """ACKNOWLEDGED, if delivered or submitted and awaiting its ACK."""
    rows = w.conn.execute(
        "UPDATE messages SET status = ?, detail = ?, finished = COALESCE(finished, ?),"
        " updated = ?, attempts = attempts + CASE WHEN status = ? THEN 1 ELSE 0 END"
        " WHERE id = ? AND (status = ? OR (status = ? AND phase = ?)) RETURNING id, session",
        (Status.ACKNOWLEDGED.value, detail, now, now, Status.DELIVERING.value, message_id,
         Status.DELIVERED.value, Status.DELIVERING.value, Phase.SUBMITTED.value),
    ).fetchall()
    w.ended(now, rows, Status.ACKNOWLEDGED, detail)
    return bool(rows)


#: The rows :func:`expire` ends once their TTL has passed (and :func:`overdue` looks for).
EXPIRING = (
    ("status = ?", [Status.PENDING.value]),
    ("status = ? AND phase = ?", [Status.DELIVERING.value, Phase.CLAIMED.value]),
)


def overdue(read: Callable[[str, Sequence[Any]], Sequence[Any]], now: float) -> bool:
    """Whether :func:`expire` would end anything at ``now``, in one read (on the
    status + expires index): a sweep that finds nothing writes nothing."""
    branches = " UNION ALL ".join(
        f"SELECT 1 FROM messages WHERE {extra} AND expires <= ?" for extra, _ in EXPIRING)
    return bool(read(f"SELECT 1 FROM ({branches}) AS overdue LIMIT 1",
                     [v for _, extra_params in EXPIRING for v in (*extra_params, now)]))


def expire(w: Write, now: float, session: str | None) -> int:
    """Expire overdue PENDING rows and DELIVERING rows not yet typed (phase CLAIMED).

    Rows past PASTING may already be in the agent's input box: those are left
    to their supervisor, which must finish them with evidence.
    """
    where, params = session_filter(session)
    detail = "expired: TTL passed before delivery"
    changed = 0
    for extra, extra_params in EXPIRING:
        rows = w.conn.execute(
            f"UPDATE messages SET status = ?, detail = ?, finished = ?, updated = ?"
            f" WHERE {extra} AND expires <= ? AND {where} RETURNING id, session",
            [Status.EXPIRED.value, detail, now, now, *extra_params, now, *params],
        ).fetchall()
        w.ended(now, rows, Status.EXPIRED, detail)
        changed += len(rows)
    return changed
