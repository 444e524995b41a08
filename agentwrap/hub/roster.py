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
its keys, or in the hub's PostgreSQL (:mod:`.tables`: every hub on it sees
every host's report): a restarted hub knows the sessions before the hosts
report again.
A revoked host's rows are dropped with its revocation.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .tables import Conn, SQLiteTables, Tables

#: The most sessions one report may carry (a bound on what a host can make the hub store).
MAX_SESSIONS = 1000
#: The most bytes of one session's record as stored (its question and command included).
MAX_RECORD_BYTES = 64 * 1024


class Roster:
    """Each host's last reported sessions (see the module)."""

    def __init__(self, where: Path | Tables) -> None:
        self.tables = SQLiteTables(where) if isinstance(where, Path) else where
        self.reports = self.tables.prefix + "reports"
        self.sessions = self.tables.prefix + "sessions"
        with self._db() as db:
            db.execute(f"CREATE TABLE IF NOT EXISTS {self.reports} (host TEXT PRIMARY KEY,"
                       " reported DOUBLE PRECISION NOT NULL, period_s DOUBLE PRECISION NOT NULL)")
            db.execute(f"CREATE TABLE IF NOT EXISTS {self.sessions} (host TEXT NOT NULL,"
                       " name TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (host, name))")

    def _db(self) -> contextlib.AbstractContextManager[Conn]:
        return self.tables.transaction()

    def register(self, host: str, records: Sequence[Mapping[str, Any]], period_s: float,
                 now: float | None = None) -> int:
        """Replace ``host``'s sessions by ``records`` (already scoped to it:
        :meth:`~.scope.HostCalls._register`); how many are kept."""
        now = time.time() if now is None else now
        rows = {str(r["name"]): json.dumps(dict(r)) for r in records}  # a name once: the last
        with self._db() as db:
            db.execute(f"DELETE FROM {self.sessions} WHERE host = ?", (host,))
            for name, record in rows.items():
                db.execute(f"INSERT INTO {self.sessions} VALUES (?, ?, ?)", (host, name, record))
            db.execute(f"DELETE FROM {self.reports} WHERE host = ?", (host,))
            db.execute(f"INSERT INTO {self.reports} VALUES (?, ?, ?)",
                       (host, now, float(period_s)))
        return len(rows)

    def states(self, host: str) -> dict[str, str]:
        """Each of ``host``'s reported sessions' state word, as last reported."""
        with self._db() as db:
            rows = db.execute(f"SELECT name, record FROM {self.sessions} WHERE host = ?", (host,)
                              ).fetchall()
        return {name: str(json.loads(record).get("state", "")) for name, record in rows}

    def forget(self, host: str) -> None:
        """Drop ``host``'s rows (it was revoked)."""
        with self._db() as db:
            db.execute(f"DELETE FROM {self.sessions} WHERE host = ?", (host,))
            db.execute(f"DELETE FROM {self.reports} WHERE host = ?", (host,))

    def listed(self, now: float | None = None) -> dict[str, Any]:
        """Every host's report: ``{"now", "hosts": [{"host", "reported",
        "periodS", "sessions": [record, ...]}]}``, hosts by name."""
        now = time.time() if now is None else now
        with self._db() as db:
            reports = db.execute(f"SELECT host, reported, period_s FROM {self.reports}"
                                 " ORDER BY host").fetchall()
            rows = db.execute(f"SELECT host, record FROM {self.sessions} ORDER BY host, name"
                              ).fetchall()
        by_host: dict[str, list[Any]] = {}
        for host, record in rows:
            by_host.setdefault(host, []).append(json.loads(record))
        return {"now": now, "hosts": [
            {"host": h, "reported": reported, "periodS": period, "sessions": by_host.get(h, [])}
            for h, reported, period in reports]}
