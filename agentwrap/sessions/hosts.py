"""Hosts: which machine a session runs on, and whether that machine is still there.

In a store several hosts share (PostgreSQL), a session's supervisor pid means
nothing on another machine, so another host's sessions are judged by their
host's heartbeat instead: each running supervisor and ``serve`` refreshes its
host's row in the ``hosts`` table every ``[host] heartbeat_s`` (one daemon
thread per process, :class:`HostBeat`), and a host silent for
:data:`DEADLINE_PERIODS` of its own periods is ``unreachable since`` its
last beat: its sessions show state ``unknown`` (nobody can say), the others
as they are. On SQLite every session is this machine's: no heartbeat is
written and liveness comes from the pids as always.

Each beat also ends the messages past their TTL, whichever host they are
for: a message for an unreachable host waits for it, but no longer than its
TTL (its own host expires it on its next claim, and nobody else would).

A host is named by ``[host] name`` (user config), ``AGENTWRAP_HOST_NAME``
(wins) or else its hostname, and the name is checked like a session's: it
becomes part of an address (``HOST/NAME``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..errors import StoreError
from ..queue.backend import open_database, open_store
from ..queue.database import Database
from ..queue.keys import HOST_ENV as ENV  # noqa: F401  (tests and the CLI read it here)
from ..queue.keys import host_name as host_name
from ..queue.store import MessageStore
from ..queue.writes import Write

log = logging.getLogger("agentwrap.hosts")
DEADLINE_PERIODS = 3  # a host is unreachable after this many of its periods without a beat

SCHEMA = """
-- one row per host of a shared store: its last beat (heartbeat) and how often it beats
CREATE TABLE IF NOT EXISTS hosts (
    name TEXT PRIMARY KEY,
    heartbeat REAL NOT NULL,
    period_s REAL NOT NULL
)
"""
NAMES = ("hosts",)


@dataclass(frozen=True)
class HostSeen:
    """Another host as this one sees it: its last beat and whether it is past
    its deadline (checked when read, never stored)."""

    name: str
    heartbeat: float
    period_s: float
    reachable: bool

    @property
    def liveness(self) -> str:
        return "up" if self.reachable else "unreachable"

    @property
    def unreachable_since(self) -> float | None:
        return None if self.reachable else self.heartbeat


def beat(db: Database, name: str, period_s: float, now: float | None = None) -> None:
    """Record that host ``name`` is up (one statement, no event)."""
    db.execute(
        "INSERT INTO hosts (name, heartbeat, period_s) VALUES (?, ?, ?) ON CONFLICT (name)"
        " DO UPDATE SET heartbeat = excluded.heartbeat, period_s = excluded.period_s",
        (name, time.time() if now is None else now, float(period_s)))


def seen(db: Database, now: float | None = None) -> dict[str, HostSeen]:
    """Every host that ever beat, judged at ``now``."""
    at = time.time() if now is None else now
    out: dict[str, HostSeen] = {}
    for r in db.read("SELECT name, heartbeat, period_s FROM hosts"):
        hb, period = float(r["heartbeat"]), float(r["period_s"])
        out[r["name"]] = HostSeen(r["name"], hb, period,
                                  at - hb <= DEADLINE_PERIODS * period)
    return out


class HostBeat:
    """The heartbeat of this host, from a daemon thread with its own connection:
    one per process, store and host name (every supervisor and ``serve`` of a
    process starts it; the second start is a no-op). It ends with the process,
    which is the point: a host whose processes are gone falls silent. After
    each beat it expires what is overdue in the whole queue (see the module)."""

    _running: ClassVar[dict[tuple[str, str], HostBeat]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, db: Database, name: str, period_s: float, url: str = "") -> None:
        self.db = db
        self.url = url  # the queue's (messages past their TTL); "": none
        self._queue: MessageStore | None = None
        self.name = name
        self.period_s = period_s
        self.beaten = threading.Event()  # set after the first beat that reached the store
        self.thread = threading.Thread(target=self._run, name="agentwrap-host-beat", daemon=True)

    @classmethod
    def start(cls, url: str, name: str, period_s: float) -> HostBeat:
        """The running beat of host ``name`` in the shared store at ``url``
        (started, on a connection of its own, if there is none yet)."""
        key = (url, name)
        with cls._guard:
            running = cls._running.get(key)
            if running is None:
                db = open_database(Path(os.devnull), url)  # a URL: the file is never opened
                running = cls._running[key] = cls(db, name, period_s, url)
                running.thread.start()
        return running

    def _run(self) -> None:
        while True:
            try:
                beat(self.db, self.name, self.period_s)
                self.beaten.set()
                self._expire()
            except StoreError:
                pass  # the store is away: the next beat tries again (reconnecting)
            except Exception:  # a bug: said in the log, and the host keeps beating
                log.exception("the heartbeat of host %s failed", self.name)
            time.sleep(self.period_s)

    def _expire(self) -> None:
        """End the messages past their TTL, every host's (one statement each
        for pending and claimed-not-typed ones, on an index)."""
        if not self.url:
            return
        if self._queue is None:
            self._queue = open_store(Path(os.devnull), url=self.url)
        self._queue.expire_overdue()


def remove(w: Write, name: str, now: float) -> HostSeen | None:
    """Delete host ``name``'s row inside the caller's write transaction ``w``
    and say what it was, judged at ``now`` (None: no row). Deleting first and
    judging what was deleted makes the check and the removal one step: a
    beat racing it either lands before (and the caller sees the host up and
    rolls back) or after (and the host is simply back)."""
    row = w.conn.execute("DELETE FROM hosts WHERE name = ? RETURNING heartbeat, period_s",
                         (name,)).fetchone()
    if row is None:
        return None
    hb, period = float(row["heartbeat"]), float(row["period_s"])
    return HostSeen(name, hb, period, now - hb <= DEADLINE_PERIODS * period)


@dataclass(frozen=True)
class Forgotten:
    """What forgetting a host did (:meth:`Registry.forget_host
    <agentwrap.sessions.registry.Registry.forget_host>`): the sessions it
    ended (keys ``HOST/NAME``) and how many messages for them ended failed."""

    host: str
    sessions: list[str]
    failed: int

    def to_json(self) -> dict[str, object]:
        return {"host": self.host, "sessions": self.sessions, "failed": self.failed}
