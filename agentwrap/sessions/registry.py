"""The session registry: which agents agentwrap supervises, and their state.

It lives in the same store as the message queue (one store, many writers):
this machine's SQLite file, or the PostgreSQL server every host shares when
the store URL says so (:func:`open_registry`; the statements are written once,
:mod:`agentwrap.queue.database`). A supervisor that crashed cannot clean up after itself, so liveness
is never *stored*: it is checked each time from the supervisor's pid and its
kernel start time (a reused pid does not count), and an entry whose
supervisor is gone shows as ``stale`` (or ``orphaned`` when its tmux session
still runs an agent that can be re-adopted).

A state *change* (not a heartbeat) appends a ``session.state`` event and the
end of a session ``session.ended`` (:mod:`agentwrap.events`), in the same
transaction as the change, announced to the readers in ``events_dir`` once
committed.
"""

from __future__ import annotations

import builtins
import json
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .. import events
from ..config import Config, HostConfig, load_config
from ..detect.states import State
from ..errors import (
    HostNotFound,
    HostStillUp,
    InvalidMessage,
    SessionAmbiguous,
    SessionNameTaken,
    SessionNotEnded,
    SessionNotFound,
)
from ..message import Status
from ..paths import Paths, check_session_name
from ..queue import db
from ..queue.backend import open_database, store_url
from ..queue.keys import SessionKeys
from ..queue.transitions import finish
from ..queue.writes import Write
from ..session_options import SessionOptions
from ..terminal.proctree import alive, start_time
from . import hosts
from .hosts import Forgotten, HostSeen, host_name

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    name TEXT PRIMARY KEY,
    profile TEXT NOT NULL,
    backend TEXT NOT NULL,
    command TEXT NOT NULL,          -- JSON list (argv)
    cwd TEXT NOT NULL,
    tmux_socket TEXT,
    agent_pid INTEGER,
    supervisor_pid INTEGER,
    supervisor_start TEXT,          -- /proc start time: pid + this identify the process
    started REAL NOT NULL,
    state TEXT NOT NULL,
    state_signal TEXT NOT NULL DEFAULT '',
    state_rule TEXT NOT NULL DEFAULT '',
    state_reason TEXT NOT NULL DEFAULT '',
    state_evidence TEXT NOT NULL DEFAULT '',
    state_since REAL NOT NULL,
    quiet_ms INTEGER NOT NULL DEFAULT 0,
    draft INTEGER NOT NULL DEFAULT 0,
    heartbeat REAL NOT NULL,
    exit_code INTEGER,
    ended REAL,
    options TEXT NOT NULL DEFAULT '{}', -- JSON: run options (trust_folder, require_ack, ...)
    question TEXT                   -- JSON: what a waiting_input agent asks (detect.question)
);
-- Every state change, so `state --watch` shows transitions shorter than its
-- poll interval too. Bounded per session (see _KEEP_TRANSITIONS).
CREATE TABLE IF NOT EXISTS state_transitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session TEXT NOT NULL,
    at REAL NOT NULL,
    state TEXT NOT NULL,
    signal TEXT NOT NULL,
    rule TEXT NOT NULL,
    reason TEXT NOT NULL,
    evidence TEXT NOT NULL,
    quiet_ms INTEGER NOT NULL,
    draft INTEGER NOT NULL
);
-- serves: transitions of one session after a given id (watch), and pruning
CREATE INDEX IF NOT EXISTS state_transitions_session ON state_transitions (session, id);
"""

_KEEP_TRANSITIONS = 1000


@dataclass(frozen=True)
class Transition:
    id: int
    session: str
    at: float
    state: str
    signal: str
    rule: str
    reason: str
    evidence: str
    quiet_ms: int
    draft: bool


@dataclass(frozen=True)
class SessionRecord:
    name: str
    profile: str
    backend: str
    command: list[str]
    cwd: str
    started: float
    state: State = State.STARTING  # stored, and in JSON, as its value
    state_since: float = 0.0
    heartbeat: float = 0.0
    tmux_socket: str | None = None
    agent_pid: int | None = None
    supervisor_pid: int | None = None
    supervisor_start: str | None = None
    state_signal: str = ""
    state_rule: str = ""
    state_reason: str = ""
    state_evidence: str = ""
    quiet_ms: int = 0
    draft: bool = False
    exit_code: int | None = None
    ended: float | None = None
    options: SessionOptions = field(default_factory=SessionOptions)  # stored as its JSON
    question: dict[str, Any] | None = None  # waiting_input: the parsed question (Question.to_json)
    host: str = ""  # the machine it runs on ("": recorded before hosts were)
    # another host's session in a shared store: that host as seen when read (never stored)
    seen: HostSeen | None = field(default=None, compare=False)

    @property
    def supervisor_alive(self) -> bool:
        pid = self.supervisor_pid
        return bool(pid) and alive(pid) and start_time(pid) == self.supervisor_start  # type: ignore[arg-type]

    @property
    def liveness(self) -> str:
        """running | ended | stale (supervisor died without recording an end) |
        unreachable (another host's session, its host silent past its deadline).

        Another host's session is judged by its host's heartbeat: a pid of
        another machine says nothing here."""
        if self.ended is not None:
            return "ended"
        if self.seen is not None:
            return "running" if self.seen.reachable else "unreachable"
        return "running" if self.supervisor_alive else "stale"

    @property
    def host_liveness(self) -> str:
        """up (this host, or another that beat within its deadline) | unreachable."""
        return "up" if self.seen is None else self.seen.liveness

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "seen"}
        out["state"] = self.state.value
        out["options"] = self.options.to_json()
        out["liveness"] = self.liveness
        out["host_liveness"] = self.host_liveness
        out["unreachable_since"] = None if self.seen is None else self.seen.unreachable_since
        return out


_COLUMNS = [f.name for f in fields(SessionRecord) if f.name != "seen"]
_TRANSITION_COLUMNS = [f.name for f in fields(Transition)]


def _unreachable(rec: SessionRecord, host: hosts.HostSeen) -> SessionRecord:
    """``rec`` as its silent host leaves it: state ``unknown``, and nothing of
    the verdict its supervisor stored last (a reason "session file says idle",
    the question, the evidence) is shown as if it held now."""
    since = (f"since {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(host.heartbeat))}"
             if host.heartbeat else "(never seen)")
    return replace(rec, seen=host, state=State.UNKNOWN, state_signal="host",
                   state_rule="host-unreachable", state_evidence="", question=None, draft=False,
                   state_since=host.heartbeat or rec.state_since,
                   state_reason=f"host {rec.host!r} is unreachable {since}: what this session"
                   " does now is not known")


def _row_to_record(row: events.Row) -> SessionRecord:
    data = {k: row[k] for k in _COLUMNS}
    data["name"] = SessionKeys.split(data["name"])[1]  # a shared store's key is HOST/NAME
    data["command"] = json.loads(data["command"])
    data["options"] = SessionOptions.from_json(json.loads(data["options"] or "{}"))
    data["question"] = json.loads(data["question"]) if data.get("question") else None
    data["draft"] = bool(data["draft"])
    data["state"] = State(data["state"])
    return SessionRecord(**data)


class Registry:
    """The sessions table, on the store's :class:`~agentwrap.queue.Database`
    (the SQLite file, or the PostgreSQL server of ``url``): every statement
    runs through it, where store failures become
    :class:`~agentwrap.errors.StoreError`."""

    def __init__(
        self, path: Path, *, busy_timeout_ms: int = db.BUSY_TIMEOUT_MS,
        events_dir: Path | None = None, url: str = "", host: str | None = None,
        heartbeat_s: float = HostConfig.heartbeat_s, host_id: str | None = None,
    ) -> None:
        self.path = path
        self._host_id = host_id  # this machine's identity (hosts.host_id), made when first needed
        self._holds: tuple[float, bool] | None = None  # when the name was last found ours, and if
        self.events_dir = events_dir
        self.url = url  # "" for the SQLite file; never shown (it may hold a password)
        self.host = host_name() if host is None else host  # this machine (hosts.host_name)
        self.heartbeat_s = heartbeat_s
        self._beat: hosts.HostBeat | None = None  # this host's beat, kept alive by this registry
        self.db = open_database(path, url, events_dir=events_dir,
                                busy_timeout_ms=busy_timeout_ms)
        try:
            self.db.ensure(_SCHEMA + ";" + hosts.SCHEMA,
                           ("sessions", "state_transitions", "state_transitions_session",
                            *hosts.NAMES))
            self._add_missing_columns()
        except BaseException:
            self.db.close()
            raise
        # a shared store keys its rows HOST/NAME: two hosts may each run a `dev`
        self.keys = SessionKeys(self.host, self.db.shared)

    def _add_missing_columns(self) -> None:
        """A registry made by an older agentwrap gains the columns added since
        (sessions that ran across the upgrade keep their rows)."""
        added = (("sessions", "question", "TEXT"), ("sessions", "host", "TEXT NOT NULL DEFAULT ''"),
                 *hosts.ADDED)
        have = {table: self.db.columns(table) for table in {t for t, _, _ in added}}
        for table, column, kind in added:
            if column in have[table]:
                continue
            try:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            except Exception as exc:  # another process added it first
                if "duplicate column" not in str(exc) and "already exists" not in str(exc):
                    raise

    def close(self) -> None:
        beat, self._beat = self._beat, None
        if beat is not None:  # the last registry of the process that kept the host alive stops it
            beat.release()
        self.db.close()

    # --- plumbing -----------------------------------------------------------------

    def _read(self, sql: str, params: Sequence[Any] = ()) -> builtins.list[events.Row]:
        return list(self.db.read(sql, params))

    # --- hosts ----------------------------------------------------------------------

    def keep_host_alive(self) -> None:
        """Beat this host's heartbeat from now until this registry is closed or
        the process ends (a shared store only: on SQLite every session is this
        machine's)."""
        if self.db.shared and self._beat is None:
            self._beat = hosts.HostBeat.start(self.url, self.host, self.heartbeat_s,
                                              self.host_id or None)

    @property
    def host_id(self) -> str:
        """This machine's identity beside its name (:func:`hosts.host_id`, kept in
        the state dir the store's file is in); "" when there is none (a store
        opened by URL alone, with no state dir: it claims no name, as before ids)."""
        if self._host_id is None:
            folder = self.path.parent
            self._host_id = (hosts.host_id(folder) if self.db.shared and str(self.path)
                             != os.devnull and folder.is_dir() else "")
        return self._host_id

    def hosts(self) -> dict[str, hosts.HostSeen]:
        """Every host of the store as seen now (empty on SQLite)."""
        return hosts.seen(self.db) if self.db.shared else {}

    def holds_name(self) -> bool:
        """This machine holds its host name in the shared store: no host is up
        under it with another identity (always on SQLite). Asked of the store
        at most once a second."""
        if not self.db.shared or not self.host_id:
            return True
        now = time.monotonic()
        if self._holds is None or now - self._holds[0] >= 1.0:
            held = hosts.holder(self.db, self.host)
            self._holds = (now, held is None or held[0] in ("", self.host_id)
                           or not held[1].reachable)
        return self._holds[1]

    def check_name(self) -> None:
        """Raise :class:`HostNameTaken` when another machine that is up holds
        this host's name (``doctor`` says so before any ``run`` is refused)."""
        if not self.holds_name():
            raise hosts.taken(self.db, self.host, self.host_id, time.time())

    def _mine(self, rec: SessionRecord) -> bool:
        """``rec`` is recorded under this host's name (or before hosts were)."""
        return rec.host in ("", self.host)

    def here(self, rec: SessionRecord) -> bool:
        """``rec`` runs on this machine: always on SQLite (one machine, whatever
        its host was called when the session started), on a shared store when
        it is this host's (or was recorded before hosts were). A session under
        this host's name that another machine, up under the same name, holds
        is neither here nor another host's: :class:`HostNameTaken`."""
        if not self.db.shared:
            return True
        if not self._mine(rec):
            return False
        self.check_name()
        return True

    def _judged(self, recs: builtins.list[SessionRecord]) -> builtins.list[SessionRecord]:
        """Another host's sessions with that host's liveness (:mod:`.hosts`);
        a host past its deadline makes their state ``unknown`` (an ended
        session's stays: its end was recorded)."""
        if not self.db.shared or (all(self._mine(r) for r in recs) and self.holds_name()):
            return recs
        seen = hosts.seen(self.db)
        out = []
        for r in recs:
            if self._mine(r) and self.holds_name():  # else another machine's of this name
                out.append(r)
                continue
            h = seen.get(r.host) or hosts.HostSeen(r.host, 0.0, 0.0, False)  # never beat
            out.append(replace(r, seen=h) if h.reachable or r.ended is not None
                       else _unreachable(r, h))
        return out

    # --- sessions -----------------------------------------------------------------

    def register(self, rec: SessionRecord) -> SessionRecord:
        """Claim ``rec.name``. A name held by a live session is refused; one
        left by an ended or crashed session is taken over."""
        check_session_name(rec.name)
        now = time.time()
        rec = replace(rec, state_since=rec.state_since or now, heartbeat=now,
                      host=rec.host or self.host)
        if self.db.shared:  # registering: this host is up (its supervisor beats from now on)
            hosts.beat(self.db, self.host, self.heartbeat_s, now, host_id=self.host_id or None)
            self._holds = (time.monotonic(), True)
        key = self.keys.key(rec.name)
        with self.db.write() as w:
            w.take_turns(f"session:{key}")  # processes registering one name on one host
            conn = w.conn
            row = conn.execute("SELECT * FROM sessions WHERE name=?", (key,)).fetchone()
            if row is not None:
                (old,) = self._judged([_row_to_record(row)])
                if old.liveness in ("running", "unreachable"):
                    where = "" if old.host in ("", self.host) else f" on host {old.host!r}"
                    raise SessionNameTaken(f"a session named {rec.name!r} is already running{where}")
                conn.execute("DELETE FROM sessions WHERE name=?", (key,))
                conn.execute("DELETE FROM state_transitions WHERE session=?", (key,))
            values = [getattr(rec, c) for c in _COLUMNS]
            values[_COLUMNS.index("name")] = key
            values[_COLUMNS.index("state")] = rec.state.value
            values[_COLUMNS.index("command")] = json.dumps(rec.command)
            values[_COLUMNS.index("options")] = json.dumps(rec.options.to_json())
            values[_COLUMNS.index("draft")] = int(rec.draft)
            values[_COLUMNS.index("question")] = (
                json.dumps(rec.question) if rec.question is not None else None)
            marks = ",".join("?" * len(_COLUMNS))
            conn.execute(f"INSERT INTO sessions ({','.join(_COLUMNS)}) VALUES ({marks})", values)
            conn.execute(
                "INSERT INTO state_transitions (session, at, state, signal, rule, reason,"
                " evidence, quiet_ms, draft) VALUES (?,?,?,?,?,?,?,?,?)",
                (key, now, rec.state.value, "process", "launch", "just launched", "", 0, 0),
            )
            w.event(now, key, "session.state", "", state=rec.state.value,
                    reason="just launched", signal="process", rule="launch")
        return rec

    def get(self, name: str) -> SessionRecord:
        """The session ``name`` (this host's) or ``HOST/NAME`` (a shared store's)."""
        rows = self._read("SELECT * FROM sessions WHERE name=?", (self.keys.key(name),))
        if not rows:
            raise SessionNotFound(f"no session named {name!r}")
        return self._judged([_row_to_record(rows[0])])[0]

    def resolve(self, address: str) -> str:
        """The session ``address`` names, as every store call takes it: on a
        shared store its key ``HOST/NAME`` (:mod:`agentwrap.queue.keys`), on
        SQLite its name. Resolving the result again gives it back.

        ``HOST/NAME``: the session must be on HOST (the host part is checked,
        never guessed; on SQLite, one machine, every session is this one's).
        A bare ``NAME`` is this host's session of that name when it has one
        (what the stores' keys, a hook and a supervisor mean by it too), else
        the one session of that name whatever its host; several other hosts'
        sessions of that name are :class:`SessionAmbiguous`, listing them.
        Ended ones count only when no running one has the name: this host's
        ended ``api`` gives way to another host's running one.
        Anything else is returned as it is, so an unknown name is reported as before."""
        host, sep, name = address.rpartition("/")
        if sep and not (_valid_name(host) and _valid_name(name)):
            return address
        if not self.db.shared:
            if not sep:
                return address
            rec = self.get(name)
            runs_on = rec.host or self.host
            if runs_on != host:
                raise SessionNotFound(f"no session {name!r} on host {host!r}",
                                      hint=f"{name!r} runs on host {runs_on!r}: {runs_on}/{name}")
            return name
        if sep:
            if self.find(address) is None:
                others = sorted(f"{r.host}/{r.name}" for r in self._named(name) if r.host)
                raise SessionNotFound(
                    f"no session {name!r} on host {host!r}",
                    hint=None if not others else f"{name!r} runs on {', '.join(others)}"
                    if len(others) > 1 else
                    f"{name!r} runs on host {others[0].split('/')[0]!r}: {others[0]}")
            return address
        found = self._named(name)
        live = [r for r in found if r.ended is None]
        found = live or found
        found = [r for r in found if r.host == self.host] or found
        if len(found) > 1:
            where = sorted(f"{r.host}/{r.name}" for r in found)
            raise SessionAmbiguous(
                f"several hosts have a session named {name!r}: {', '.join(where)}", where,
                hint=f"name one of them HOST/NAME: {where[0]}")
        return f"{found[0].host}/{name}" if found and found[0].host else name

    def _named(self, name: str) -> builtins.list[SessionRecord]:
        """Every host's session named ``name`` (a shared store: keys end in /NAME)."""
        rows = self._read("SELECT name, host, ended FROM sessions")
        return [SessionRecord(name=name, profile="", backend="", command=[], cwd="",
                              started=0.0, host=r["host"] or SessionKeys.split(r["name"])[0],
                              ended=r["ended"])
                for r in rows if SessionKeys.split(r["name"])[1] == name]

    def address(self, rec: SessionRecord) -> str:
        """What the stores call ``rec``'s session: ``HOST/NAME`` on a shared
        store (its key), its name on SQLite."""
        return f"{rec.host}/{rec.name}" if self.db.shared and rec.host else rec.name

    def local(self, address: str) -> str | None:
        """The name of ``address``'s session if it is this host's, else None
        (:meth:`SessionKeys.local`): what its files and sockets here are named."""
        return self.keys.local(address)

    def find(self, name: str) -> SessionRecord | None:
        try:
            return self.get(name)
        except SessionNotFound:
            return None

    def list(self, include_ended: bool = False) -> list[SessionRecord]:
        rows = self._read("SELECT * FROM sessions ORDER BY started")
        recs = self._judged([_row_to_record(r) for r in rows])
        return recs if include_ended else [r for r in recs if r.ended is None]

    def update(self, name: str, **changes: Any) -> None:
        if not changes:
            return
        sql, params = self._update_sql(self.keys.key(name), changes)
        self.db.execute(sql, params)

    @staticmethod
    def _update_sql(name: str, changes: dict[str, Any]) -> tuple[str, builtins.list[Any]]:
        bad = set(changes) - set(_COLUMNS)
        if bad:
            raise ValueError(f"unknown session fields: {sorted(bad)}")
        if "command" in changes:
            changes["command"] = json.dumps(changes["command"])
        if "options" in changes:  # a SessionOptions
            changes["options"] = json.dumps(changes["options"].to_json())
        if isinstance(changes.get("state"), State):
            changes["state"] = changes["state"].value
        if changes.get("question") is not None:
            changes["question"] = json.dumps(changes["question"])
        if "draft" in changes:
            changes["draft"] = int(changes["draft"])
        sets = ", ".join(f"{k}=?" for k in changes)
        return f"UPDATE sessions SET {sets} WHERE name=?", [*changes.values(), name]

    def claim_supervisor(self, name: str) -> None:
        """Record this process as the session's supervisor."""
        pid = os.getpid()
        self.update(name, supervisor_pid=pid, supervisor_start=start_time(pid), heartbeat=time.time())

    def set_state(
        self,
        name: str,
        state: State,
        *,
        signal: str,
        rule: str,
        reason: str,
        evidence: str,
        quiet_ms: int,
        draft: bool,
        changed: bool,
        question: dict[str, Any] | None = None,
    ) -> None:
        """Record the supervisor's verdict. ``changed``: a new state, or a new
        question while waiting (a transition and an event); else a heartbeat."""
        now = time.time()
        changes: dict[str, Any] = dict(
            state=state.value, state_signal=signal, state_rule=rule, state_reason=reason,
            state_evidence=evidence, quiet_ms=quiet_ms, draft=draft, heartbeat=now,
            question=question,
        )
        if not changed:  # a heartbeat: one statement, no event
            self.update(name, **changes)
            return
        changes["state_since"] = now
        key = self.keys.key(name)
        with self.db.write() as w:
            w.conn.execute(*self._update_sql(key, changes))
            self._transition(w, key, now, state.value, signal, rule, reason, evidence, quiet_ms,
                             draft, question)

    @staticmethod
    def _transition(
        w: Write, name: str, at: float, state: str, signal: str, rule: str, reason: str,
        evidence: str, quiet_ms: int, draft: bool, question: dict[str, Any] | None = None,
    ) -> None:
        """Log a state change and its event; inside the caller's write transaction."""
        w.conn.execute(
            "INSERT INTO state_transitions (session, at, state, signal, rule, reason,"
            " evidence, quiet_ms, draft) VALUES (?,?,?,?,?,?,?,?,?)",
            (name, at, state, signal, rule, reason, evidence, quiet_ms, int(draft)),
        )
        w.conn.execute(
            "DELETE FROM state_transitions WHERE session = ? AND id <= (SELECT MAX(id)"
            " FROM state_transitions WHERE session = ?) - ?",
            (name, name, _KEEP_TRANSITIONS),
        )
        extra = {"question": question} if question is not None else {}
        w.event(at, name, "session.state", "", state=state, reason=reason, signal=signal,
                rule=rule, **extra)

    def transitions(self, name: str, after_id: int = 0) -> builtins.list[Transition]:
        rows = self._read(
            "SELECT * FROM state_transitions WHERE session = ? AND id > ? ORDER BY id",
            (self.keys.key(name), after_id),
        )
        return [Transition(**{**{k: r[k] for k in _TRANSITION_COLUMNS}, "draft": bool(r["draft"])})
                for r in rows]

    def mark_ended(self, name: str, exit_code: int | None, reason: str | None = None) -> None:
        """Record the end (once: a second call changes the record, adds no event).
        ``reason``: why it ended, as a person reads it in ``ls --all`` and the
        page's Ended list (default: what the exit code says, :func:`exit_reason`)."""
        now = time.time()
        reason = reason or exit_reason(exit_code)
        name = self.keys.key(name)  # the row's key from here on
        with self.db.write() as w:
            w.take_turns(f"session:{name}")  # one end, one event
            self._end(w, name, now, exit_code, "process", reason)

    def note_end(self, name: str, reason: str) -> None:
        """Say why an ended session ended, when a caller knows better than its
        exit code (``stop`` sent the signal): its record, not its end time, and a
        ``session.state`` event with the new reason, so a view that read the end
        before this (the page's Ended list) reads it again instead of showing the
        exit code's words until its next refresh."""
        key = self.keys.key(name)
        with self.db.write() as w:
            w.take_turns(f"session:{key}")
            row = w.conn.execute("SELECT ended FROM sessions WHERE name=?", (key,)).fetchone()
            if row is None or row["ended"] is None:
                return
            w.conn.execute(*self._update_sql(key, dict(state_reason=reason)))
            w.event(time.time(), key, "session.state", "", state=State.EXITED.value,
                    reason=reason, signal="process", rule="stop")

    def dismiss(self, name: str) -> SessionRecord:
        """Forget an ended session of this host: its record and its state log
        (its messages stay in the history). A running one is refused: stop it first."""
        rec = self.get(name)
        if rec.ended is None:
            raise SessionNotEnded(f"session {name!r} has not ended",
                                  hint=f"stop it first: `agentwrap stop {name}`")
        self._delete([self.keys.key(rec.name)])
        return rec

    def prune_ended(self, before: float) -> builtins.list[str]:
        """Forget every session of this host that ended before ``before`` (the
        ``[sessions] keep_ended_s`` retention); the names forgotten."""
        rows = self._read("SELECT name, host FROM sessions WHERE ended IS NOT NULL AND ended < ?",
                          (before,))
        keys = [r["name"] for r in rows if r["host"] in ("", self.host)]
        self._delete(keys)
        return [self.keys.split(k)[1] for k in keys]

    def _delete(self, keys: builtins.list[str]) -> None:
        if not keys:
            return
        with self.db.write() as w:
            for key in keys:
                w.take_turns(f"session:{key}")
                w.conn.execute("DELETE FROM state_transitions WHERE session = ?", (key,))
                w.conn.execute("DELETE FROM sessions WHERE name = ? AND ended IS NOT NULL", (key,))

    def _end(self, w: Write, key: str, now: float, exit_code: int | None, rule: str,
             reason: str) -> bool:
        """Record the end of session ``key`` inside ``w`` (its transition and
        ``session.ended`` event only the first time); whether it was the first."""
        row = w.conn.execute("SELECT ended FROM sessions WHERE name=?", (key,)).fetchone()
        w.conn.execute(*self._update_sql(key, dict(
            state=State.EXITED.value, state_since=now, exit_code=exit_code, ended=now,
            state_signal="process", state_rule=rule, state_reason=reason, heartbeat=now,
        )))
        if row is None or row["ended"] is not None:
            return False
        self._transition(w, key, now, State.EXITED.value, "process", rule, reason, "", 0, False)
        w.event(now, key, "session.ended", "", exit_code=exit_code)
        return True

    def forget_host(self, name: str) -> Forgotten:
        """Forget host ``name`` of a shared store, a machine gone for good: in
        one transaction its sessions end, every message still waiting for them
        ends failed (naming the host) and its row goes, so it leaves ``ls``
        and nothing waits for it until its TTL. Refused (nothing changed) for
        this host and a host still up (:class:`HostStillUp`: its supervisors
        would go on typing into sessions marked ended) and for a host the
        store does not know (:class:`HostNotFound`)."""
        try:
            check_session_name(name)  # host names are checked as session names are
        except InvalidMessage as exc:
            raise InvalidMessage(f"invalid host name {name!r}", hint=exc.hint) from None
        if name == self.host:
            raise HostStillUp(f"host {name!r} is this host: it cannot forget itself",
                              hint="run `agentwrap hosts forget` on another host of the store")
        if not self.db.shared:
            raise HostNotFound(f"no host named {name!r}: this store is this machine's SQLite"
                               f" file, its only host is {self.host!r}")
        now = time.time()
        reason = f"host {name!r} was forgotten"
        with self.db.write() as w:
            w.take_turns(f"host:{name}")
            was = hosts.remove(w, name, now)
            if was is not None and was.reachable:
                raise HostStillUp(f"host {name!r} is up (its last beat was"
                                  f" {now - was.heartbeat:.0f} s ago): it cannot be forgotten")
            keys = [r["name"] for r in w.conn.execute(  # ended ones keep their end as it was
                "SELECT name FROM sessions WHERE host = ? AND ended IS NULL ORDER BY name",
                (name,)).fetchall()]
            ended = [k for k in keys if self._end(w, k, now, None, "host-forgotten", reason)]
            failed = finish(w, Status.FAILED, f"failed: {reason}",
                            "session IN (SELECT name FROM sessions WHERE host = ?)", [name],
                            None, now)
            if was is None and not ended and not failed:  # nothing of it left: unknown
                raise HostNotFound(f"no host named {name!r} in the store")
        return Forgotten(name, ended, failed)



def exit_reason(exit_code: int | None) -> str:
    """Why an agent ended, from its exit code: a signal is named (a negative
    code, or 128 + N as a shell reports it), an unknown code said so."""
    if exit_code is None:
        return "agent ended (exit code not known)"
    number = -exit_code if exit_code < 0 else exit_code - 128 if 128 < exit_code < 160 else 0
    if number:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"agent exited with code {exit_code} (killed by {name})"
    return f"agent exited with code {exit_code}"


def _valid_name(name: str) -> bool:
    try:
        check_session_name(name)
    except InvalidMessage:
        return False
    return True


def open_registry(paths: Paths, cfg: Config | None = None, *,
                  busy_timeout_ms: int = db.BUSY_TIMEOUT_MS) -> Registry:
    """The registry in the store this host's queue is in, as ``cfg`` (by
    default the user's config) and the environment say: the store URL
    (``[store] url``, ``AGENTWRAP_STORE_URL``) and this host ([host])."""
    cfg = load_config(paths) if cfg is None else cfg
    return Registry(paths.db_path, events_dir=paths.events_dir, busy_timeout_ms=busy_timeout_ms,
                    url=store_url(cfg.store.url), host=host_name(cfg.host.name),
                    heartbeat_s=cfg.host.heartbeat_s)
