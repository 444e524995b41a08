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

Each beat also looks for messages past their TTL, whichever host they are
for: a message for an unreachable host waits for it, but no longer than its
TTL (its own host expires it on its next claim, and nobody else would). One
sweep per period does for the whole store, whoever makes it: every process
of every host beats, but only the one that claims the period's sweep
(:func:`claim_sweep`, a row of ``sweeps`` dated by the server's clock) ends
them, and only when one read found some. An idle host's beat is two
statements (``scripts/bench_store.py``'s idle CPU: it was five, and as many
per supervisor process and ``serve`` of the store).

A host is named by ``[host] name`` (user config), ``AGENTWRAP_HOST_NAME``
(wins) or else its hostname, and the name is checked like a session's: it
becomes part of an address (``HOST/NAME``).
"""

from __future__ import annotations

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

DEADLINE_PERIODS = 3  # a host is unreachable after this many of its periods without a beat

SCHEMA = """
-- one row per host of a shared store: its last beat (heartbeat) and how often it beats
CREATE TABLE IF NOT EXISTS hosts (
    name TEXT PRIMARY KEY,
    heartbeat REAL NOT NULL,
    period_s REAL NOT NULL
);
-- one row per chore done for the whole store: when it was last claimed (server's clock)
CREATE TABLE IF NOT EXISTS sweeps (
    what TEXT PRIMARY KEY,
    at REAL NOT NULL
)
"""
NAMES = ("hosts", "sweeps")
EXPIRY = "expiry"  # the sweep of messages past their TTL


@dataclass(frozen=True)
class HostSeen:
    """Another host as this one sees it: its last beat and whether it is past
    its deadline (checked when read, never stored)."""

    name: str
    heartbeat: float
    period_s: float
    reachable: bool

    @classmethod
    def judged(cls, name: str, heartbeat: float, period_s: float, now: float) -> HostSeen:
        """Host ``name`` with its last beat and period, as it stands at ``now``:
        unreachable once silent for :data:`DEADLINE_PERIODS` of its periods."""
        return cls(name, heartbeat, period_s, now - heartbeat <= DEADLINE_PERIODS * period_s)

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


def claim_sweep(db: Database, what: str, every_s: float) -> bool:
    """Claim chore ``what`` for the whole store: True for one caller per
    ``every_s`` among every process of every host. Dated by the server's
    clock (PostgreSQL's: hosts beat only on a shared store), so a host whose
    clock runs ahead cannot claim the next periods away from the others."""
    with db.write() as w:
        return bool(w.conn.execute(
            "INSERT INTO sweeps (what, at) VALUES (?, extract(epoch FROM clock_timestamp()))"
            " ON CONFLICT (what) DO UPDATE SET at = excluded.at"
            " WHERE sweeps.at <= excluded.at - ? RETURNING at", (what, float(every_s))).fetchall())


def seen(db: Database, now: float | None = None) -> dict[str, HostSeen]:
    """Every host that ever beat, judged at ``now``."""
    at = time.time() if now is None else now
    out: dict[str, HostSeen] = {}
    for r in db.read("SELECT name, heartbeat, period_s FROM hosts"):
        out[r["name"]] = HostSeen.judged(r["name"], float(r["heartbeat"]),
                                         float(r["period_s"]), at)
    return out


class HostBeat:
    """The heartbeat of this host, from a daemon thread with its own connection:
    one per process, store and host name, shared by whoever keeps the host
    alive there (every supervisor and ``serve`` of a process starts it; a
    second start counts one more user). It ends once its last user has
    released it (:meth:`release`: a registry that is closed), or with the
    process, which is the point: a host whose processes are gone falls
    silent. After each beat it sweeps the messages past their TTL when it is
    its turn (see the module)."""

    _running: ClassVar[dict[tuple[str, str], HostBeat]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, db: Database, name: str, period_s: float, url: str = "") -> None:
        self.db = db
        self.url = url  # the queue's (messages past their TTL); "": none
        self._queue: MessageStore | None = None
        self.name = name
        self.period_s = period_s
        self.users = 0
        self.sweeps = 0  # the sweeps this beat made (ended what was overdue)
        self.beaten = threading.Event()  # set after the first beat that reached the store
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="agentwrap-host-beat", daemon=True)

    @classmethod
    def start(cls, url: str, name: str, period_s: float) -> HostBeat:
        """The running beat of host ``name`` in the shared store at ``url``
        (started, on a connection of its own, if there is none yet), with one
        more user: each start is matched by a :meth:`release`."""
        key = (url, name)
        with cls._guard:
            running = cls._running.get(key)
            if running is None:
                db = open_database(Path(os.devnull), url)  # a URL: the file is never opened
                running = cls._running[key] = cls(db, name, period_s, url)
                running.thread.start()
            running.users += 1
        return running

    @classmethod
    def running(cls, url: str, name: str) -> HostBeat | None:
        """The beat of host ``name`` at ``url`` this process runs, if any."""
        with cls._guard:
            return cls._running.get((url, name))

    def release(self) -> None:
        """One user less; the last one stops the beat (its thread ends and
        closes its connections): nothing beats for a store that was closed."""
        with self._guard:
            self.users -= 1
            if self.users > 0:
                return
            if self._running.get((self.url, self.name)) is self:
                del self._running[(self.url, self.name)]
            self.stopped.set()

    def _run(self) -> None:
        try:
            while not self.stopped.is_set():
                try:
                    beat(self.db, self.name, self.period_s)
                    self.beaten.set()
                    self.sweep()
                except StoreError:
                    pass  # the store is away: the next beat tries again (reconnecting)
                except Exception:  # a bug: said in the log, and the host keeps beating
                    import logging  # here only: a hook opens the registry and must start fast

                    logging.getLogger("agentwrap.hosts").exception("the heartbeat of host %s failed", self.name)
                self.stopped.wait(self.period_s)
        finally:
            if self._queue is not None:
                self._queue.close()
            self.db.close()

    def sweep(self) -> bool:
        """End the messages past their TTL, every host's, if there are any and
        this period's sweep of the store is this process's (:func:`claim_sweep`):
        one read when there is nothing to do. True if it swept."""
        if not self.url or self.stopped.is_set():
            return False
        if self._queue is None:
            self._queue = open_store(Path(os.devnull), url=self.url)
        if not self._queue.overdue() or not claim_sweep(self.db, EXPIRY, self.period_s):
            return False
        self._queue.expire_overdue()
        self.sweeps += 1
        return True


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
    return HostSeen.judged(name, float(row["heartbeat"]), float(row["period_s"]), now)


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
