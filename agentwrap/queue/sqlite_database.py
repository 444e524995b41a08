"""The SQLite file's plumbing: the connection, its lock and its transactions.

:class:`SQLiteDatabase` is :class:`~agentwrap.queue.database.Database` on the
SQLite file. The message store (:mod:`.sqlite`) runs on it, and so do the
registry and the answers. It is a module of its own so that opening the
registry or the answers does not import the message store's code: a Python
hook that keeps a rule's answer (an agent waits for it) loaded the whole
queue for one row of the answers table, ~25 ms of CPU per run.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from .. import events
from . import db
from .database import statements
from .writes import Write


class SQLiteDatabase:
    """:class:`~agentwrap.queue.database.Database` on the SQLite file: the
    connection (:func:`db.connect`), a lock so threads may share it, write
    transactions (:func:`db.transaction`) and SQLite's failures as
    :class:`~agentwrap.errors.StoreError` (:func:`db.store_errors`). The
    message store runs on it, and so do the registry and the answers."""

    shared = False

    def __init__(
        self, path: Path, *, busy_timeout_ms: int = db.BUSY_TIMEOUT_MS,
        events_dir: Path | None = None,
    ) -> None:
        self.path = self.where = path
        self.events_dir = events_dir
        self.busy_timeout_ms = busy_timeout_ms
        self.lock = threading.RLock()
        self.conn = db.connect(path, busy_timeout_ms)

    def errors(self) -> AbstractContextManager[None]:
        return db.store_errors(self.path, self.busy_timeout_ms)

    @contextmanager
    def write(self) -> Iterator[Write]:
        """One write transaction; once it committed, its events are announced."""
        with self.lock:
            with self.errors(), db.transaction(self.conn) as conn:
                w = Write(conn)
                yield w
            if w.recorded and self.events_dir is not None:
                events.announce(self.events_dir)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self.lock, self.errors():
            return self.conn.execute(sql, params).fetchall()

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        with self.lock, self.errors():
            yield self.conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self.lock, self.errors():
            self.conn.execute(sql, params)

    def ensure(self, schema: str, names: Collection[str]) -> None:
        """Checked with a read, so that opening the store to look at it works
        while another process holds the write lock."""
        have = {r[0] for r in self.read("SELECT name FROM sqlite_master")}
        if {*names, "events", "events_by_session"} <= have:
            return
        with self.write() as w:
            for statement in (*statements(schema), *statements(events.SCHEMA)):
                w.conn.execute(statement)

    def columns(self, table: str) -> set[str]:
        return {r["name"] for r in self.read(f"PRAGMA table_info({table})")}

    def close(self) -> None:
        with self.lock:
            self.conn.close()
