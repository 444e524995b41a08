"""The event bus: what happened to messages and sessions, in order, for any process.

Every surface needs the same few facts as they happen: a message was queued,
moved to a phase, reached its end state; a session changed state or ended.
The HTTP server streams them (SSE), ``state --watch`` and ``send --wait``
follow them, a dashboard replays them after a reconnect. So they are not
callbacks inside one process but rows of an ``events`` table in the one store,
appended *in the same transaction* as the change they describe (an event is
never lost or reported for a change that rolled back), with ids that only
grow: a reader asks for everything after the last id it saw.

Readers do not poll. Each one binds a datagram socket in the runtime dir's
``events/`` folder (:class:`Subscription`); a writer, after its commit, sends
one byte to every socket there (:func:`announce`) and the readers then read
the table. A lost datagram costs nothing but latency (readers also look when
their wait times out), and the socket of a process that died is removed by the
next writer that finds nobody listening.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .datagram import Inbox

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,   -- only grows: "everything after id N"
    at REAL NOT NULL,
    session TEXT NOT NULL,
    kind TEXT NOT NULL,                     -- see KINDS
    subject TEXT NOT NULL DEFAULT '',       -- a message id, or ''
    data TEXT NOT NULL DEFAULT '{}'         -- JSON object
);
CREATE INDEX IF NOT EXISTS events_by_session ON events(session, id);
"""

#: What the store (message.*, subject: the message id) and the registry
#: (session.*, written by the supervisors) report.
KINDS = (
    "message.queued",  # a new row (not a repeated idempotency key); data: priority, source, kind
    "message.phase",  # data: phase (claimed, pasting, submitting, submitted), batch
    "message.retry",  # an attempt failed; data: next_attempt_at, detail, attempts, held
    "message.ended",  # any terminal status; data: status, detail
    "session.state",  # a state change, not a heartbeat; data: state, reason, signal, rule
    "session.ended",  # data: exit_code
    "session.consumed",  # a reader took messages itself; data: count, sources, channel, ids
    "session.answered",  # an answer to the open question (subject: its id); data: status
    # (pending, applied, stale, failed), detail, questionId, answer, source
    "host.silent",  # the hub: a host's last serving link closed or its reports passed their
    # deadline (session '', data: host, reason, since; agentwrap.hub.liveness)
    "host.linked",  # the hub: a host's first serving link came back (session '', data: host)
)

#: Rows kept; older ones are pruned by writers now and then.
KEEP = 20_000
_PRUNE_EVERY = 500  # ids


class Row(Protocol):
    """One row, read by column name or by index."""

    def __getitem__(self, key: int | str, /) -> Any: ...


class Cursor(Protocol):
    """What a statement gives back: rows by name and by index (``sqlite3.Row``,
    or the PostgreSQL store's rows), one, all, or one at a time."""

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """A connection the store's SQL runs on: ``sqlite3.Connection``, or the
    PostgreSQL store's (which takes the same ``?`` placeholders). The queue's
    statements and :func:`since` are written once, in the SQL both engines share."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...


@dataclass(frozen=True)
class Event:
    id: int
    at: float
    session: str
    kind: str
    subject: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "at": self.at, "session": self.session, "kind": self.kind,
                "subject": self.subject, "data": dict(self.data)}


def create(conn: Conn) -> None:
    """Create the table if needed; safe inside the caller's transaction
    (statement by statement: ``executescript`` would commit it)."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


def record(
    conn: Conn, at: float, session: str, kind: str, subject: str = "", /,
    **data: Any,
) -> int:
    """Append one event inside the caller's write transaction; returns its id."""
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    new_id = int(conn.execute(
        "INSERT INTO events (at, session, kind, subject, data) VALUES (?, ?, ?, ?, ?)"
        " RETURNING id",
        (at, session, kind, subject, json.dumps(data, separators=(",", ":"))),
    ).fetchall()[0][0])  # all: the statement is done before the commit
    if new_id % _PRUNE_EVERY == 0:
        conn.execute("DELETE FROM events WHERE id <= ?", (new_id - KEEP,))
    return new_id


def since(
    conn: Conn,
    after: int,
    *,
    session: str | None = None,
    kinds: Iterable[str] | None = None,
    subject: str | None = None,
    limit: int = 1000,
) -> list[Event]:
    """Events with ids above ``after``, oldest first, optionally filtered."""
    where: list[str] = ["id > ?"]
    params: list[object] = [after]
    if session is not None:
        where.append("session = ?")
        params.append(session)
    if subject is not None:
        where.append("subject = ?")
        params.append(subject)
    wanted = list(kinds or ())
    if wanted:
        where.append(f"kind IN ({','.join('?' * len(wanted))})")
        params += wanted
    rows = conn.execute(
        f"SELECT * FROM events WHERE {' AND '.join(where)} ORDER BY id LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [
        Event(int(r["id"]), float(r["at"]), r["session"], r["kind"], r["subject"],
              json.loads(r["data"]))
        for r in rows
    ]


def last_id(conn: Conn) -> int:
    row = conn.execute("SELECT COALESCE(MAX(id), 0) AS n FROM events").fetchone()
    return int(row["n"] if isinstance(row, sqlite3.Row) else row[0])


# --- wake-ups across processes -----------------------------------------------------------


def announce(events_dir: Path) -> int:
    """Tell every subscriber that new events were committed; returns how many
    were told. Sockets nobody listens on any more are removed."""
    try:
        names = os.listdir(events_dir)
    except FileNotFoundError:
        return 0
    told = 0
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setblocking(False)
    try:
        for name in names:
            if not name.endswith(".sock"):
                continue
            path = events_dir / name
            try:
                s.sendto(b"e", str(path))
                told += 1
            except BlockingIOError:
                told += 1  # its queue is full: it has wake-ups enough
            except (ConnectionRefusedError, FileNotFoundError):
                try:  # its process is gone
                    path.unlink()
                except FileNotFoundError:
                    pass
            except OSError:
                pass
    finally:
        s.close()
    return told


class Subscription(Inbox):
    """A reader's end: :meth:`wait` until a writer announces new events."""

    def __init__(self, events_dir: Path) -> None:
        super().__init__(events_dir / f"{os.getpid()}-{secrets.token_hex(4)}.sock")

    def __enter__(self) -> Subscription:
        return self
