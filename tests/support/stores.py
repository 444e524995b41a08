"""The store of a test, on either backend: the contract tests run each test
of the message store, the session registry and the answers against SQLite (a
file) and PostgreSQL (a schema of the suite's own server, tests/support/pg.py)
through one :class:`StoreTarget`."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentwrap.answers.store import AnswerStore
from agentwrap.message import QueueLimits
from agentwrap.queue.sqlstore import DEFAULT_LIMITS, SQLMessageStore
from agentwrap.sessions.registry import Registry

BACKENDS = ("sqlite", "postgres")


@dataclass(frozen=True)
class StoreTarget:
    """Where a test's store is: ``backend`` and its file path or URL."""

    backend: str
    where: str

    def open(self, limits: QueueLimits = DEFAULT_LIMITS,
             clock: Callable[[], float] = time.time, *, host: str | None = None,
             **kw: Any) -> SQLMessageStore:
        """The message store; ``host``: the host it is opened as (a shared
        store's only: SQLite is one machine's, whatever it is called)."""
        if self.backend == "postgres":
            from agentwrap.queue.postgres import PostgresMessageStore

            return PostgresMessageStore(self.where, limits, clock, host=host, **kw)
        from agentwrap.queue.sqlite import SQLiteMessageStore

        return SQLiteMessageStore(Path(self.where), limits, clock, **kw)

    def registry(self, **kw: Any) -> Registry:
        """The session registry on this backend (its rows beside the queue's)."""
        return Registry(self._path(), url=self._url(), **kw)

    def answers(self, **kw: Any) -> AnswerStore:
        """The answers table on this backend."""
        return AnswerStore(self._path(), url=self._url(), **kw)

    def _path(self) -> Path:  # PostgreSQL: a file path that is never opened
        return Path(self.where) if self.backend == "sqlite" else Path("/nonexistent/unused.db")

    def _url(self) -> str:
        return self.where if self.backend == "postgres" else ""

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run SQL (``?`` placeholders) on the backend itself, behind the store's back."""
        if self.backend == "postgres":
            import psycopg

            with psycopg.connect(self.where, autocommit=True) as conn:
                cur = conn.execute(sql.replace("?", "%s").encode(), params or None)
                return [] if cur.description is None else [tuple(r) for r in cur.fetchall()]
        raw = sqlite3.connect(self.where)
        try:
            with raw:
                return [tuple(r) for r in raw.execute(sql, params).fetchall()]
        finally:
            raw.close()

    def tables(self) -> set[str]:
        if self.backend == "postgres":
            rows = self.execute("SELECT tablename FROM pg_tables"
                                " WHERE schemaname = current_schema()")
        else:
            rows = self.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(r[0]) for r in rows}
