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

A name is not an identity: cloned machines share a hostname, and two hosts of
one name merged silently (each judged the other's sessions by its own pids:
stale, and ``stop`` there ended them). So each host also has an id
(:func:`host_id`: random, made once, kept 0600 in the state dir, made anew
when the file was copied to another machine), and its row in ``hosts``
records it: a beat claims the name only for the id that holds it, a row of
no id (older agentwrap) or a holder that is silent past its deadline
(:func:`claim`). A second host that is up under a name is refused
(:class:`~agentwrap.errors.HostNameTaken`) when it registers a session, and
sees the holder's sessions as another host's: it never stops, adopts or
attaches them.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..errors import ConfigError, HostNameTaken, StoreError
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
    period_s REAL NOT NULL,
    id TEXT NOT NULL DEFAULT ''  -- the host_id() that holds the name ('': before ids)
);
-- one row per chore done for the whole store: when it was last claimed (server's clock)
CREATE TABLE IF NOT EXISTS sweeps (
    what TEXT PRIMARY KEY,
    at REAL NOT NULL
)
"""
NAMES = ("hosts", "sweeps")
#: Columns added since a table was first made: (table, column, its definition).
ADDED = (("hosts", "id", "TEXT NOT NULL DEFAULT ''"),)
EXPIRY = "expiry"  # the sweep of messages past their TTL
ID_FILE = "host-id"  # in the state dir
MACHINE_ID = Path("/etc/machine-id")
_ID = re.compile(r"[0-9a-f]{32}")


def host_id(state_dir: Path, machine_file: Path = MACHINE_ID) -> str:
    """This host's id: made once (128 random bits), kept 0600 in the state dir
    with a digest of the machine's id (``/etc/machine-id``), and made anew when
    that differs: a state dir copied with a cloned machine (or a home shared
    by two machines) does not give the clone the original's identity.
    Two processes making it at once agree (the first link wins)."""
    path = state_dir / ID_FILE
    machine = _machine(machine_file)
    try:
        words = path.read_text(encoding="ascii").split()
    except FileNotFoundError:
        words = []
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read this host's identity file {path}: {exc}",
                          hint="remove it: a new identity is made") from None
    if words:
        if len(words) != 2 or not _ID.fullmatch(words[0]):
            raise ConfigError(f"this host's identity file {path} is damaged",
                              hint="remove it: a new identity is made")
        if words[1] == machine or "-" in (words[1], machine):
            return words[0]
    made = secrets.token_hex(16)
    tmp = state_dir / f".{ID_FILE}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, f"{made} {machine}\n".encode("ascii"))
    finally:
        os.close(fd)
    try:
        if words:  # another machine's: replaced
            os.replace(tmp, path)
            return made
        try:
            os.link(tmp, path)
        except FileExistsError:  # another process made it first: its id
            return host_id(state_dir, machine_file)
        return made
    finally:
        tmp.unlink(missing_ok=True)


def _machine(machine_file: Path) -> str:
    """A digest of the machine's id, "-" when there is none to read."""
    try:
        raw = machine_file.read_bytes().strip()
    except OSError:
        return "-"
    return hashlib.sha256(raw).hexdigest()[:16] if raw else "-"


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


def beat(db: Database, name: str, period_s: float, now: float | None = None,
         host_id: str | None = None) -> None:
    """Record that host ``name`` is up (one statement, no event): as the host
    of ``host_id``, which must hold the name (:func:`claim`), or with no id, a
    beat that claims nothing (a test's host of the past, beaten by hand)."""
    at = time.time() if now is None else now
    if host_id is not None:
        claim(db, name, host_id, period_s, at)
        return
    db.execute(
        "INSERT INTO hosts (name, heartbeat, period_s) VALUES (?, ?, ?) ON CONFLICT (name)"
        " DO UPDATE SET heartbeat = excluded.heartbeat, period_s = excluded.period_s",
        (name, at, float(period_s)))


def claim(db: Database, name: str, host_id: str, period_s: float, now: float) -> None:
    """Beat as host ``name`` of id ``host_id``: the name is this id's if its row
    holds this id, no id (made before ids) or a holder silent past its
    deadline (then it changes hands), in the one statement that beats.
    Else another machine that is up holds it: :class:`HostNameTaken`."""
    got = db.read(
        "INSERT INTO hosts (name, heartbeat, period_s, id) VALUES (?, ?, ?, ?) ON CONFLICT (name)"
        " DO UPDATE SET heartbeat = excluded.heartbeat, period_s = excluded.period_s,"
        " id = excluded.id WHERE hosts.id = '' OR hosts.id = excluded.id"
        " OR hosts.heartbeat < excluded.heartbeat - ? * hosts.period_s RETURNING name",
        (name, now, float(period_s), host_id, float(DEADLINE_PERIODS)))
    if not got:
        raise taken(db, name, host_id, now)


def taken(db: Database, name: str, host_id: str, now: float) -> HostNameTaken:
    """The error of host ``name`` held by another machine that is up."""
    held = holder(db, name, now)
    other, ago = (held[0], now - held[1].heartbeat) if held is not None else ("?", 0.0)
    return HostNameTaken(
        f"host name {name!r} is another machine's: it is up in this store (its last beat"
        f" {max(0.0, ago):.0f} s ago, identity {other[:8]}; this machine's is"
        f" {host_id[:8]}), and one name cannot be two hosts")


def holder(db: Database, name: str, now: float | None = None) -> tuple[str, HostSeen] | None:
    """The id holding host name ``name`` and its host as seen at ``now``; None
    when no host beat under it."""
    rows = db.read("SELECT heartbeat, period_s, id FROM hosts WHERE name = ?", (name,))
    if not rows:
        return None
    r = rows[0]
    return str(r["id"]), HostSeen.judged(name, float(r["heartbeat"]), float(r["period_s"]),
                                         time.time() if now is None else now)


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
    # told of each other host that falls silent (issue 40: ``[notify]``'s
    # "unreachable" event), once per silence, from the beat's thread
    listeners: ClassVar[list[Callable[[HostSeen], None]]] = []

    def __init__(self, db: Database, name: str, period_s: float, url: str = "",
                 host_id: str | None = None) -> None:
        self.db = db
        self.host_id = host_id  # the identity it beats as (None: claims nothing)
        self.url = url  # the queue's (messages past their TTL); "": none
        self._queue: MessageStore | None = None
        self.name = name
        self.period_s = period_s
        self.users = 0
        self.sweeps = 0  # the sweeps this beat made (ended what was overdue)
        self.beaten = threading.Event()  # set after the first beat that reached the store
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="agentwrap-host-beat", daemon=True)
        self._up: set[str] | None = None  # the other hosts up at the last watch (None: none yet)

    @classmethod
    def start(cls, url: str, name: str, period_s: float, host_id: str | None = None) -> HostBeat:
        """The running beat of host ``name`` in the shared store at ``url``
        (started, on a connection of its own, if there is none yet), with one
        more user: each start is matched by a :meth:`release`."""
        key = (url, name)
        with cls._guard:
            running = cls._running.get(key)
            if running is None:
                db = open_database(Path(os.devnull), url)  # a URL: the file is never opened
                running = cls._running[key] = cls(db, name, period_s, url, host_id)
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
                    beat(self.db, self.name, self.period_s, host_id=self.host_id)
                    self.beaten.set()
                    self.sweep()
                    self.watch()
                except HostNameTaken as exc:  # another machine took the name while this was silent
                    import logging

                    logging.getLogger("agentwrap.hosts").error("%s", exc)
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

    def watch(self, now: float | None = None) -> list[HostSeen]:
        """The other hosts that fell silent since the last watch (up then,
        unreachable now), told to :attr:`listeners`; the first watch only
        learns who is up (a host silent before this process began is old news)."""
        if not self.listeners:
            return []
        hosts_now = seen(self.db, now)
        up = {n for n, h in hosts_now.items() if h.reachable and n != self.name}
        fell = [] if self._up is None else [hosts_now[n] for n in sorted(self._up - up)
                                             if n in hosts_now]
        self._up = up
        for host in fell:
            for listener in list(self.listeners):
                try:
                    listener(host)
                except Exception:
                    import logging

                    logging.getLogger("agentwrap.hosts").exception("telling of host %s", host.name)
        return fell

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
