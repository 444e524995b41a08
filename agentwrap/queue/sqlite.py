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

:class:`~.sqlite_database.SQLiteDatabase` owns the connection, its lock and its
transactions (the registry and the answers run on it too); :class:`SQLiteMessageStore`'s operations are :class:`~agentwrap.queue.sqlstore.SQLMessageStore`'s,
shared with the PostgreSQL store, and the work of each is done, inside the
transaction the store opens, by the module for its job: the tables (:mod:`.schema`), admitting a new message (:mod:`.admission`,
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
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..errors import StoreCorrupt
from ..message import QueueLimits
from . import db, schema
from .sqlite_database import SQLiteDatabase
from .sqlstore import DEFAULT_LIMITS, SQLMessageStore
from .writes import Write


class SQLiteMessageStore(SQLMessageStore):
    """:class:`MessageStore` over the shared SQLite file.

    One connection per instance, guarded by a lock so a store may be shared by
    threads; processes each open their own store and SQLite's write lock
    (``BEGIN IMMEDIATE`` + busy timeout) orders them. All SQL runs inside
    :meth:`_write` or :meth:`_read` (the :class:`SQLiteDatabase`'s), where
    :func:`db.store_errors` turns a locked, full, corrupt or unreadable file
    into a :class:`StoreError`. The operations themselves are
    :class:`SQLMessageStore`'s.
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
        super().__init__(limits, clock)
        self.path = self.where = path
        self.events_dir = events_dir
        self._db = SQLiteDatabase(path, busy_timeout_ms=busy_timeout_ms, events_dir=events_dir)
        self._conn = self._db.conn
        if not self._schema_is_current():  # a read: opening needs no write lock
            with self._write() as w:
                schema.create(w.conn)

    # --- plumbing: the database's -------------------------------------------------

    def _write(self) -> AbstractContextManager[Write]:
        return self._db.write()

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self._db.read(sql, params)

    def _reading(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._db.reading()

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

    def close(self) -> None:
        self._db.close()

