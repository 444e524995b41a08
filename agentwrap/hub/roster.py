"""The sessions the hub knows: what each host last reported, and when.

A host's link reports the whole set of its running sessions (their records:
name, agent, state, since, cwd...) every ``[host] heartbeat_s``
(``register``); the report replaces that host's rows, so a session that
ended or was forgotten there drops out with the next one. ``sessions``
answers every host's rows with the time each host last reported, its period
and the hub's clock, so the reader judges liveness as a shared store's
heartbeat is judged (:class:`~agentwrap.sessions.hosts.HostSeen`): a host
silent past :data:`~agentwrap.sessions.hosts.DEADLINE_PERIODS` of its
periods is ``unreachable since`` its last report, its sessions shown, not
hidden. Only the hub's clock is used (the reports' times and ``now``), so a
host's skewed clock does not make another host look silent.

Kept in SQLite in the hub's state directory (``hub-sessions.db``), beside
its keys: a restarted hub knows the sessions before the hosts report again.
A revoked host's rows are dropped with its revocation.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

#: The most sessions one report may carry (a bound on what a host can make the hub store).
MAX_SESSIONS = 1000
#: The most bytes of one session's record as stored (its question and command included).
MAX_RECORD_BYTES = 64 * 1024


class Roster:
    """Each host's last reported sessions (see the module)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS reports (host TEXT PRIMARY KEY,"
                       " reported REAL NOT NULL, period_s REAL NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS sessions (host TEXT NOT NULL,"
                       " name TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (host, name))")

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    def register(self, host: str, records: Sequence[Mapping[str, Any]], period_s: float,
                 now: float | None = None) -> int:
        """Replace ``host``'s sessions by ``records`` (already scoped to it:
        :meth:`~.scope.HostCalls._register`); how many are kept."""
        now = time.time() if now is None else now
        rows = [(host, str(r["name"]), json.dumps(dict(r))) for r in records]
        with self._db() as db:
            db.execute("DELETE FROM sessions WHERE host = ?", (host,))
            db.executemany("INSERT OR REPLACE INTO sessions VALUES (?, ?, ?)", rows)
            db.execute("INSERT OR REPLACE INTO reports VALUES (?, ?, ?)",
                       (host, now, float(period_s)))
        return len(rows)

    def states(self, host: str) -> dict[str, str]:
        """Each of ``host``'s reported sessions' state word, as last reported."""
        with self._db() as db:
            rows = db.execute("SELECT name, record FROM sessions WHERE host = ?", (host,)
                              ).fetchall()
        return {name: str(json.loads(record).get("state", "")) for name, record in rows}

    def forget(self, host: str) -> None:
        """Drop ``host``'s rows (it was revoked)."""
        with self._db() as db:
            db.execute("DELETE FROM sessions WHERE host = ?", (host,))
            db.execute("DELETE FROM reports WHERE host = ?", (host,))

    def listed(self, now: float | None = None) -> dict[str, Any]:
        """Every host's report: ``{"now", "hosts": [{"host", "reported",
        "periodS", "sessions": [record, ...]}]}``, hosts by name."""
        now = time.time() if now is None else now
        with self._db() as db:
            reports = db.execute("SELECT host, reported, period_s FROM reports ORDER BY host"
                                 ).fetchall()
            rows = db.execute("SELECT host, record FROM sessions ORDER BY host, name").fetchall()
        by_host: dict[str, list[Any]] = {}
        for host, record in rows:
            by_host.setdefault(host, []).append(json.loads(record))
        return {"now": now, "hosts": [
            {"host": h, "reported": reported, "periodS": period, "sessions": by_host.get(h, [])}
            for h, reported, period in reports]}
