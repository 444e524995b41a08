"""The storage port of the tables beside the queue: the session registry, the
answers, the hosts.

Their owners (:mod:`agentwrap.sessions.registry`, :mod:`agentwrap.answers.store`)
write their statements once, in the SQL both engines share (``?``
placeholders, :class:`agentwrap.events.Conn`), and their schema once, in
SQLite's words; a :class:`Database` is the plumbing under them on one backend:
SQLite's file (:class:`~agentwrap.queue.sqlite_database.SQLiteDatabase`, the default,
what they always used) or the PostgreSQL server every host shares
(:class:`~agentwrap.queue.postgres.PgDatabase`). It is the same plumbing the
message store runs on, so its guarantees are the queue's: a write is one
transaction whose events are appended in it (ids in commit order on
PostgreSQL) and announced once it committed; a store failure is a
:class:`~agentwrap.errors.StoreError`; the password of a URL is never shown.
:func:`agentwrap.queue.backend.open_database` picks the backend as the
message store's is picked.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from .. import events
from .writes import Write


class Database(Protocol):
    """One connection to the store, safe to share between threads."""

    where: Path  # what error messages name: the file, or the server (no password)
    shared: bool  # True: several hosts use this store (PostgreSQL)

    def write(self) -> AbstractContextManager[Write]:
        """One write transaction; its events (``Write.event``) are announced
        to this host's readers (and, shared, every host's) once it committed."""
        ...

    def read(self, sql: str, params: Sequence[Any] = ()) -> Sequence[events.Row]:
        """One statement's rows (a statement that changes nothing)."""
        ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """One statement that changes rows, committed on its own (a heartbeat:
        no transaction around it, no event)."""
        ...

    def ensure(self, schema: str, names: Collection[str]) -> None:
        """Create ``schema`` (statements in SQLite's words, ``;``-separated,
        no ``;`` in comments) and the event log unless every one of ``names``
        (tables, indexes) is there already."""
        ...

    def columns(self, table: str) -> set[str]:
        """The columns ``table`` has now (for tables older versions made)."""
        ...

    def close(self) -> None: ...


def statements(schema: str) -> list[str]:
    """The statements of a ``;``-separated schema, empty ones dropped."""
    return [s for s in schema.split(";") if s.strip()]
