"""The PostgreSQL plumbing of a process many clients share: a fixed pool of connections.

:class:`~agentwrap.queue.postgres.PgDatabase` keeps one connection per
instance behind a lock: right for a host's supervisor, which makes one call
at a time. The hub answers every host's link on worker threads, and one
connection would make each host wait for every other's statement; one
connection per link would make the hub's connections grow with the hosts
(issue 38: ``max_connections = 100`` fits three hosts of ten sessions that
each connect directly). :class:`PooledPgDatabase` draws a connection from a
``psycopg_pool.ConnectionPool`` for each read, write and statement, so the
hub holds at most ``max_size`` connections (:data:`POOL_SIZE` by default)
however many hosts and sessions link, and a call waits for a free one at
most its connect timeout (then :class:`~agentwrap.errors.StoreDown`).

Each pooled connection is set up as the single one is (autocommit, rows by
name, the idle-in-transaction timeout) and checked before it is lent, so a
connection the server dropped while idle is replaced, not handed out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from .. import events
from .postgres import (
    IDLE_IN_TRANSACTION_MS,
    KEYS_MARK,
    SCHEMA_LOCK,
    PgConn,
    PgDatabase,
    PgRow,
    PgWrite,
    dsn,
    key_rows,
    pg_rows,
)
from .writes import Write

#: The hub's connections to PostgreSQL, whatever the number of hosts (``agentwrap hub --pool``).
POOL_SIZE = 4
#: What the hub's connections call themselves (``pg_stat_activity.application_name``).
HUB_APPLICATION = "agentwrap-hub"


def _configure(raw: psycopg.Connection[Any]) -> None:
    raw.execute(b"SELECT set_config('idle_in_transaction_session_timeout', %s, false)"
                b" WHERE current_setting('idle_in_transaction_session_timeout') = '0'",
                (str(IDLE_IN_TRANSACTION_MS),))


class PooledPgDatabase(PgDatabase):
    """:class:`PgDatabase` over a pool of at most ``max_size`` connections (see the module)."""

    def __init__(self, url: str, *, events_dir: Path | None = None,
                 connect_timeout_s: float = 10.0, max_size: int = POOL_SIZE,
                 application_name: str = HUB_APPLICATION) -> None:
        super().__init__(url, events_dir=events_dir, connect_timeout_s=connect_timeout_s)
        self.max_size = max(1, int(max_size))
        self.pool: ConnectionPool[psycopg.Connection[PgRow]] = ConnectionPool(
            dsn(url), min_size=1, max_size=self.max_size, open=False, name="agentwrap",
            kwargs={"autocommit": True, "row_factory": pg_rows,
                    "connect_timeout": max(1, int(connect_timeout_s)),
                    "application_name": application_name},
            configure=_configure, check=ConnectionPool.check_connection,
            timeout=connect_timeout_s, max_idle=300.0)
        self.pool.open(wait=False)

    @contextmanager
    def lease(self) -> Iterator[PgConn]:
        """One pooled connection for the block (its failures as :class:`StoreError`)."""
        with self.errors(), self.pool.connection() as raw:
            yield PgConn(raw)

    @contextmanager
    def write(self) -> Iterator[Write]:
        with self.lease() as conn, conn.raw.transaction():
            w = PgWrite(conn)
            yield w
            w.flush()
        if w.recorded and self.events_dir is not None:
            events.announce(self.events_dir)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[PgRow]:
        with self.lease() as conn:
            return conn.execute(sql, params).fetchall()

    @contextmanager
    def reading(self) -> Iterator[PgConn]:
        with self.lease() as conn:
            yield conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self.lease() as conn:
            conn.execute(sql, params)

    def create(self, ddl: Sequence[str], names: Collection[str]) -> None:
        names = {*names, KEYS_MARK}
        rows = self.read(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relname = ANY(?)", (list(names),))
        if int(rows[0][0]) == len(names):
            return
        with self.lease() as c, c.raw.transaction():
            c.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
            for statement in ddl:
                c.execute(statement)
            key_rows(c)

    def close(self) -> None:
        self.pool.close()
