"""Reading the queue: messages by id, a session's queue, history, counts.

Reads are single statements and need no transaction: each goes through the
store's ``read`` (:data:`Read`: under its lock, with SQLite's errors turned
into :class:`~agentwrap.errors.StoreError`), so looking at the queue works
while another process holds the write lock. An empty answer from an indexed
query is checked against the table itself (:func:`checked`): a damaged
index must not read as "no messages".
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidMessage, MessageNotFound, StoreCorrupt
from ..events import Row
from ..message import Attempt, Kind, Message, Priority, Source, Status
from . import rules
from .schema import ORDER, selection, session_filter, to_attempt, to_message

#: The store's one statement read: ``read(sql, params)`` -> its rows.
Read = Callable[[str, Sequence[Any]], Sequence[Row]]

MIN_PREFIX = 4  # shortest id prefix a person may type


def get(read: Read, message_id: str) -> Message:
    rows = read("SELECT * FROM messages WHERE id = ?", (message_id,))
    if not rows:
        raise MessageNotFound(f"no message with id {message_id!r}")
    return to_message(rows[0])


def get_by_prefix(read: Read, prefix: str) -> Message:
    """Resolve a short id typed by a person (at least 4 characters, unique)."""
    p = prefix.strip().lower()
    if len(p) < MIN_PREFIX:
        raise InvalidMessage(
            f"message id prefix {prefix!r} is too short",
            hint=f"type at least {MIN_PREFIX} characters of the id",
        )
    # Ids are lowercase hex and '-', all below '~': a range scan on the UNIQUE index.
    rows = read(
        "SELECT * FROM messages WHERE id >= ? AND id < ? ORDER BY id LIMIT 2", (p, p + "~")
    )
    if not rows:
        raise MessageNotFound(f"no message id starts with {prefix!r}")
    if len(rows) > 1:
        raise InvalidMessage(
            f"message id prefix {prefix!r} is ambiguous",
            hint="type more characters of the id",
        )
    return to_message(rows[0])


def peek(
    read: Read, path: Path, session: str, t: float, *, kinds: Collection[Kind] | None,
    sources: Collection[Source] | None, contains: str | None, due: bool, limit: int | None,
    priorities: Collection[Priority] | None, check: bool = True,
) -> list[Message]:
    """Pending messages of ``session`` unexpired at ``t``, in delivery order
    (``check``: an empty answer is checked against the table, :func:`checked`).
    ``due``: the run at the head that may be tried now, as a claim takes it
    (:func:`.rules.due_run`)."""
    where = "session = ? AND status = ? AND +expires > ?"
    params: list[Any] = [session, Status.PENDING.value, t]
    extra, extra_params = selection(kinds, sources, contains, priorities)
    where += extra
    params += extra_params
    rows = checked(
        read, path, f"SELECT * FROM messages WHERE {where} ORDER BY {ORDER}"
        + (" LIMIT ?" if limit is not None else ""),
        [*params, limit] if limit is not None else params, where, params, check and limit != 0,
    )
    found = [to_message(r) for r in rows]
    return list(rules.due_run(found, t, lambda m: m.next_attempt_at)) if due else found


def in_flight(read: Read, session: str) -> list[Message]:
    rows = read(
        f"SELECT * FROM messages WHERE session = ? AND status = ? ORDER BY {ORDER}",
        (session, Status.DELIVERING.value),
    )
    return [to_message(r) for r in rows]


def attempts(read: Read, message_id: str) -> list[Attempt]:
    rows = read(
        "SELECT * FROM attempts WHERE message_id = ? ORDER BY number", (message_id,)
    )
    return [to_attempt(r) for r in rows]


def history(
    read: Read, path: Path, session: str | None, limit: int, statuses: Iterable[Status] | None,
    check: bool = True,
) -> list[Message]:
    """Newest first; ``session=None`` covers all sessions (``check``: as :func:`peek`'s)."""
    where, params = session_filter(session)
    if statuses is not None:
        values = [Status(s).value for s in statuses]
        if not values:
            return []
        where += f" AND status IN ({','.join('?' * len(values))})"
        params.extend(values)
    rows = checked(
        read, path, f"SELECT * FROM messages WHERE {where} ORDER BY created DESC, seq DESC LIMIT ?",
        [*params, limit], where, params, check and limit > 0,
    )
    return [to_message(r) for r in rows]


def checked(read: Read, path: Path, sql: str, args: Sequence[Any], where: str,
            params: Sequence[Any], check: bool) -> Sequence[Row]:
    """``read(sql, args)``; when it finds no rows (and ``check``), make sure
    the table agrees.

    A damaged index page can read as a valid, empty one (SQLite's
    quick_check does not compare indexes with their table), and then
    ``history`` would say "no messages yet" about a full table. Checking
    the table itself, without indexes, costs a scan only when the answer
    is empty. The two reads are two statements: a row stored between them
    is found by the table's read, so the query is asked again, and only an
    index that still misses the rows the table holds is damage.
    """
    rows = read(sql, args)
    if rows or not check:
        return rows
    if not read(f"SELECT 1 FROM messages NOT INDEXED WHERE {where} LIMIT 1", params):
        return rows
    rows = read(sql, args)  # stored meanwhile: not damage
    if not rows:
        raise StoreCorrupt(
            f"the database {path} is damaged: an index of the messages table has"
            " lost rows that the table still holds",
            hint=f"rebuild the indexes (sqlite3 {path} REINDEX), or move the file"
            " aside to start empty; `agentwrap doctor` checks the store",
        )
    return rows


def pending_count(read: Read, session: str | None, now: float) -> int:
    """Pending messages that have not expired at ``now`` (swept or not)."""
    where, params = session_filter(session)
    rows = read(
        f"SELECT COUNT(*) FROM messages WHERE {where} AND status = ? AND expires > ?",
        [*params, Status.PENDING.value, now],
    )
    return int(rows[0][0])


def flow_started(read: Read, correlation_id: str) -> float | None:
    """When the flow ``correlation_id`` began: the oldest message carrying
    it, or the message whose id it is (a flow rooted in a message that had
    none); None if no message is left of it."""
    rows = read(
        "SELECT MIN(created) FROM (SELECT created FROM messages WHERE correlation_id = ?"
        " UNION ALL SELECT created FROM messages WHERE id = ?) AS flow",
        (correlation_id, correlation_id),
    )
    return None if rows[0][0] is None else float(rows[0][0])
