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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tables import Conn, SQLiteTables, Tables

#: The most sessions one report may carry (a bound on what a host can make the hub store).
MAX_SESSIONS = 1000
#: The most bytes of one session's record as stored (its question and command included).
MAX_RECORD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Reported:
    """What one report did: how many sessions it keeps, each one's state word
    as the host's report before it had it (a new name is absent), and whether
    any row changed (the hub's page is told only then)."""

    count: int
    before: Mapping[str, str]
    changed: bool


def _state(record: str) -> str:
    return str(json.loads(record).get("state", ""))


class Roster:
    """Each host's last reported sessions (see the module)."""

    def __init__(self, where: Path | Tables) -> None:
        # a host reports again every few seconds: the file need not be synced at each
        self.tables = SQLiteTables(where, durable=False) if isinstance(where, Path) else where
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
                 now: float | None = None) -> Reported:
        """Replace ``host``'s sessions by ``records`` (already scoped to it:
        :meth:`~.scope.HostCalls._register`), in one transaction that rewrites
        only the rows that changed: a host reports every few seconds, and an
        idle host's report is the last one again (a thousand idle sessions
        then cost the hub one small write per report, not a rewrite of all)."""
        now = time.time() if now is None else now
        rows = {str(r["name"]): json.dumps(dict(r), sort_keys=True)
                for r in records}  # a name once: the last
        with self._db() as db:
            had = dict(db.execute(f"SELECT name, record FROM {self.sessions} WHERE host = ?",
                                  (host,)).fetchall())
            for name in had.keys() - rows.keys():
                db.execute(f"DELETE FROM {self.sessions} WHERE host = ? AND name = ?",
                           (host, name))
            for name, record in rows.items():
                if name not in had:
                    db.execute(f"INSERT INTO {self.sessions} VALUES (?, ?, ?)",
                               (host, name, record))
                elif had[name] != record:
                    db.execute(f"UPDATE {self.sessions} SET record = ? WHERE host = ? AND name = ?",
                               (record, host, name))
            first = not db.execute(f"UPDATE {self.reports} SET reported = ?, period_s = ?"
                                   " WHERE host = ?", (now, float(period_s), host)).rowcount
            if first:
                db.execute(f"INSERT INTO {self.reports} VALUES (?, ?, ?)",
                           (host, now, float(period_s)))
        before = {name: _state(record) for name, record in had.items()}
        return Reported(count=len(rows), before=before, changed=first or had != rows)

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
