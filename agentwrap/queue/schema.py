"""The message store's tables: their SQL, their migration, and their rows as dataclasses.

One place says what the ``messages`` and ``attempts`` tables hold, which
index serves which query (each index's comment names its query), how a
database made by an older agentwrap is brought up to date, and how a row
becomes a :class:`~agentwrap.message.Message` or an
:class:`~agentwrap.message.Attempt`; with the pieces of SQL that lean on those
indexes and that the reads and the delivery side share (the delivery order,
the session filter, a reader's selection). The modules that admit, move and
read messages (:mod:`.admission`, :mod:`.transitions`, :mod:`.reads`,
:mod:`.metrics`) write their statements against it; :mod:`.sqlite` creates it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from .. import events
from ..message import Attempt, Kind, Message, Phase, Priority, Source, Status

ORDER = "priority DESC, created ASC, seq ASC"  # delivery order; seq breaks ties of equal clocks
# In a session's queue queries "+expires" (unary plus) keeps the planner off
# messages_status_expires, so it walks messages_session_queue, which is
# already in delivery order (no sort, and no rows of other sessions).

_INDEX_NAME = re.compile(r"CREATE (?:UNIQUE )?INDEX IF NOT EXISTS (\w+)")
SCHEMA = (
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
    # admission.check_sender(): what one sender (an agent's session) sent to every session.
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

INDEXES = [m.group(1) for m in map(_INDEX_NAME.search, SCHEMA) if m]
#: Every table and index of this version (the event log's included).
NAMES = frozenset({"messages", "attempts", "events", "events_by_session", *INDEXES})
NEWEST_COLUMN = "kind"  # the last column :func:`migrate` adds: if it is there, all are


def create(conn: events.Conn) -> None:
    """Create (or bring up to date) every table and index, inside the open
    write transaction ``conn``; the event log's too (:mod:`agentwrap.events`)."""
    conn.execute(SCHEMA[0])
    migrate(conn)
    for statement in SCHEMA[1:]:
        conn.execute(statement)
    events.create(conn)


def migrate(conn: events.Conn) -> None:
    """Bring a database made by an older agentwrap up to this schema."""
    columns = {row["name"] for row in conn.execute("PRAGMA table_info(messages)")}
    if "kind" not in columns:  # before internal kinds; every old row is content
        conn.execute("ALTER TABLE messages ADD COLUMN kind TEXT NOT NULL DEFAULT 'content'")


def session_filter(session: str | None) -> tuple[str, list[Any]]:
    """SQL and parameters for one session's rows, or every row (``None``)."""
    if session is None:
        return "1 = 1", []  # PostgreSQL's WHERE wants a boolean, not 1
    return "session = ?", [session]


def selection(
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


def to_message(row: events.Row) -> Message:
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


def to_attempt(row: events.Row) -> Attempt:
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
