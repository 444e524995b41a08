"""Where the hub keeps its keys and roster: SQLite beside ``hub.db``, or the hub's PostgreSQL.

Two hub processes on one PostgreSQL (behind a load balancer, or two URLs a
host tries in turn) must each know every joined host's credential and every
host's reported sessions: a host that joined through one links to the
other, and a browser on either sees every host. So when the hub's store is
PostgreSQL, the keys (:mod:`.keys`) and the roster (:mod:`.roster`) are
tables there too (``hub_``-prefixed: the store's schema has a ``sessions``
table of its own), drawn from the store's own connection pool (no
connection more); with SQLite they stay in their files in the state
directory, as before.

A :class:`Tables` hands its owner one transaction at a time in which the
owner's writers take turns (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: an
advisory lock per owner held to the commit), so a read and the write that
depends on it (a join code used once) are one step across every hub.
Statements are written once, in the SQL both engines share (``?``
placeholders, no ``INSERT OR REPLACE``); ``BLOB`` columns are named by
:attr:`Tables.blob`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..queue.pgpool import PooledPgDatabase


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Conn(Protocol):
    def execute(self, sql: str, parameters: Any = (), /) -> Cursor: ...


class Tables(Protocol):
    """One owner's tables (see the module)."""

    blob: str  # the column type of bytes
    prefix: str  # before each table's name

    def transaction(self) -> contextlib.AbstractContextManager[Conn]: ...


class SQLiteTables:
    """The owner's own SQLite file (``hub-keys.db``, ``hub-sessions.db``), on
    one connection kept open, the owner's threads taking turns on it: a
    connection per transaction cost the hub more than the reports it wrote
    (py-spy, 100 hosts x 10 idle sessions: the open, the pragmas and the
    close, whose last connection checkpoints a WAL file each time, were most
    of the roster's time). Other processes (``hub invite``) still take turns
    with it through the file's own lock (``BEGIN IMMEDIATE``)."""

    blob = "BLOB"
    prefix = ""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self.durable = durable  # False: a commit is not synced to disk (a cache of reports)
        self._turn = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        """The open connection (under ``_turn``), opened on first use."""
        if self._db is None:
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None,
                                 check_same_thread=False)  # the turns are _turn's
            if not self.durable:  # WAL, synced at checkpoints: a crash of the hub loses
                db.execute("PRAGMA journal_mode=WAL")  # nothing, one of the machine
                db.execute("PRAGMA synchronous=NORMAL")  # the last reports
            self._db = db
        return self._db

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Conn]:
        with self._turn:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db  # type: ignore[misc]  # sqlite3's cursor has the Cursor's methods
            except BaseException:
                db.execute("ROLLBACK")
                raise
            try:
                db.execute("COMMIT")
            except sqlite3.Error:
                if db.in_transaction:  # e.g. busy past the timeout: the connection stays usable
                    db.execute("ROLLBACK")
                raise


class PgTables:
    """Tables in the hub's PostgreSQL, on its store's pool; ``owner`` names the
    advisory lock its writers take turns on."""

    blob = "BYTEA"
    prefix = "hub_"

    def __init__(self, db: PooledPgDatabase, owner: str) -> None:
        self.db = db
        self.owner = owner

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Conn]:
        from ..queue.postgres import TURN_LOCKS

        with self.db.lease() as conn, conn.raw.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))",
                         (TURN_LOCKS, f"hub.{self.owner}"))
            yield conn  # type: ignore[misc]  # psycopg's cursor has the Cursor's methods
