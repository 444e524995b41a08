"""Moving a store: every row from SQLite to PostgreSQL, or back (issue 23).

``agentwrap store migrate --to URL`` copies what the store keeps (messages
with their status, phase and batch, their attempts, the event log with its
ids, the sessions registry and its state transitions, the answers, the hosts)
into another store, so a team can go from one machine to a shared server
without losing a pending message or its history, and back.

The rules that keep it lossless and honest:

* **Nobody is writing.** A supervisor of the source store that still runs
  would go on claiming and finishing messages in the old store after the
  copy: the move is refused while any runs, naming them (``agentwrap stop``).
  The source is then read in one transaction that holds writers off (SQLite's
  write lock; on PostgreSQL a ``SHARE`` lock of its tables) until the target
  has committed, so a ``send`` racing the move waits and lands in the old
  store after it, never half in each.
* **The target is empty.** Merging two stores' rows (two message ``seq``
  orders, two event logs with overlapping ids) has no honest answer, so a
  target holding any row is refused, naming what it holds.
* **All or nothing.** The rows go in one transaction on the target, ids
  kept (event ids in their order: a reader resumes "after id N" in the new
  store as in the old), the id counters moved past them, and before it
  commits every table is read back and compared with the source, row for
  row: a difference rolls everything back.
* **Sessions keep their host.** A shared store names each session by its
  key ``HOST/NAME`` (:mod:`agentwrap.queue.keys`), one machine's by its name:
  moving to PostgreSQL prefixes each name with the host the registry ran it
  on (this host's name for a row that has none), and moving back drops the
  host; two hosts' sessions of one name cannot share one machine's store, so
  that move is refused, naming them.
* **The source is left as it was**, and no config file is edited: the user
  points the hosts at the new store (:attr:`MoveReport.next_step`) when they
  choose. Only :func:`agentwrap.queue.describe` names a store: never a password.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..answers.store import AnswerStore
from ..config import Config, load_config
from ..errors import StoreInUse, StoreNotEmpty, StoreUnavailable
from ..paths import Paths
from ..queue.backend import SCHEMES, describe, open_database, open_store, store_url
from ..queue.database import Database
from ..queue.keys import KEYED, SessionKeys, host_name
from ..queue.writes import Write
from ..sessions.registry import Registry

#: Every table a store keeps, with the key that orders its rows (parents first:
#: an attempt refers to its message).
TABLES: tuple[tuple[str, str], ...] = (
    ("messages", "seq"),
    ("attempts", "message_id, number"),
    ("events", "id"),
    ("sessions", "name"),
    ("state_transitions", "id"),
    ("answers", "id"),
    ("hosts", "name"),
)
# PostgreSQL's id counters to move past the copied ids: (table, column) or a sequence
_PG_COUNTERS = (
    ("pg_get_serial_sequence('messages', 'seq')", "messages", "seq"),
    ("pg_get_serial_sequence('state_transitions', 'id')", "state_transitions", "id"),
    ("'events_id'", "events", "id"),
)
SQLITE = "sqlite"


@dataclass(frozen=True)
class Place:
    """One store: a PostgreSQL ``url``, or else the SQLite file ``path``."""

    path: Path
    url: str = ""

    @property
    def shown(self) -> str:
        return describe(self.path, self.url)  # never the password


@dataclass(frozen=True)
class MoveReport:
    """What was moved: the rows of each table, from where to where, and what to do next."""

    source: str
    target: str
    rows: dict[str, int]
    next_step: str

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "rows": self.rows,
                "sourceUntouched": True, "nextStep": self.next_step}


def place(spec: str, paths: Paths, cfg: Config) -> Place:
    """Where ``spec`` points: "" the store this host uses now (config and
    environment), ``sqlite`` this machine's SQLite file, a ``postgresql://``
    URL, or else the path of a SQLite file."""
    spec = spec.strip()
    if not spec:
        return Place(paths.db_path, store_url(cfg.store.url))
    if spec.startswith(SCHEMES):
        return Place(Path(os.devnull), spec)
    if spec == SQLITE:
        return Place(paths.db_path)
    return Place(Path(spec).expanduser().absolute())


def _same(a: Place, b: Place) -> bool:
    if a.url or b.url:
        return a.url == b.url
    return os.path.realpath(a.path) == os.path.realpath(b.path)


@contextmanager
def _opened(where: Place) -> Iterator[Database]:
    """The store at ``where`` with every table there (each owner creates its
    own, as any agentwrap command would), and its plumbing for the copy."""
    with ExitStack() as stack:
        stack.callback(open_store(where.path, url=where.url).close)
        stack.callback(Registry(where.path, url=where.url).close)
        stack.callback(AnswerStore(where.path, url=where.url).close)
        db = open_database(where.path, where.url)
        stack.callback(db.close)
        yield db


def _running(where: Place) -> list[str]:
    """The sessions of the store at ``where`` whose supervisor runs (another
    host's: whose host still beats)."""
    reg = Registry(where.path, url=where.url)
    try:
        return [f"{r.host}/{r.name}" if r.host and reg.db.shared else r.name
                for r in reg.list() if r.liveness == "running"]
    finally:
        reg.close()


def _rekey(got: list[tuple[Any, ...]], table: str, columns: Sequence[str], shared: bool,
           hosts: dict[str, str], here: str) -> list[tuple[Any, ...]]:
    """``got`` with each session named as the target names it (see the module)."""
    column = dict(KEYED).get(table)
    if column is None or column not in columns:
        return got
    at = columns.index(column)
    host_at = columns.index("host") if table == "sessions" and "host" in columns else None

    def one(row: tuple[Any, ...]) -> tuple[Any, ...]:
        out = list(row)
        value = str(row[at])
        if shared:
            host = hosts.get(value) or here
            out[at] = value if "/" in value else f"{host}/{value}"
            if host_at is not None and not out[host_at]:
                out[host_at] = host
        else:
            out[at] = SessionKeys.split(value)[1]
        return tuple(out)

    return [one(r) for r in got]


def _one_machine(sw: Write) -> None:
    """Refuse moving two hosts' sessions of one name into one machine's store."""
    names: dict[str, list[str]] = {}
    for (key,) in sw.conn.execute("SELECT name FROM sessions").fetchall():
        names.setdefault(SessionKeys.split(str(key))[1], []).append(str(key))
    twice = sorted(", ".join(sorted(v)) for v in names.values() if len(v) > 1)
    if twice:
        raise StoreNotEmpty(
            f"sessions of several hosts have one name ({'; '.join(twice)}): one machine's"
            " store keeps one session of each name; nothing was copied",
            hint="move into another PostgreSQL store, or end and remove one of them first")


def _hold_still(w: Write, shared: bool, mode: str) -> None:
    """On PostgreSQL, lock every table for the rest of the transaction
    (SQLite's write transaction already holds every writer off). The move's
    pauses between statements are its own work on the other store, not a
    vanished host's: the server's idle-in-transaction timeout is off for it."""
    if shared:
        w.conn.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
        w.conn.execute(f"LOCK TABLE {', '.join(t for t, _ in TABLES)} IN {mode} MODE")


def _rows(w: Write, table: str, columns: Sequence[str], key: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in w.conn.execute(
        f"SELECT {', '.join(columns)} FROM {table} ORDER BY {key}").fetchall()]


def _columns(source: Database, target: Database, table: str) -> list[str]:
    have, can = source.columns(table), target.columns(table)
    if not have <= can:  # the target's agentwrap is older than the source's
        raise StoreUnavailable(
            f"the target store has no column {', '.join(sorted(have - can))} in {table}",
            hint="run the same agentwrap version on both sides; nothing was copied")
    return sorted(have)


def _next_step(target: Place, paths: Paths | None) -> str:
    if target.url:
        return ("point every host at it: [store] url = \"<the URL you gave>\" in"
                " ~/.config/agentwrap/config.toml (or AGENTWRAP_STORE_URL), then start the"
                " sessions again; the old store was not changed (keep it until you are sure)")
    if paths is not None and _same(target, Place(paths.db_path)):
        return ("point this host at it: remove [store] url from"
                " ~/.config/agentwrap/config.toml and unset AGENTWRAP_STORE_URL, then start"
                " the sessions again; the old store was not changed")
    return ("a SQLite file agentwrap uses only as this machine's store"
            f" ({paths.db_path if paths else 'agentwrap.db in the state dir'}): keep it as a"
            " copy, or move it there (with [store] url removed) to use it; the old store was"
            " not changed")


def migrate(source: Place, target: Place, paths: Paths | None = None) -> MoveReport:
    """Copy every row of ``source`` into the empty store ``target``, in one
    transaction checked before it commits; ``source`` is left as it was.

    Refused, with nothing changed: the two are one store; the source is a
    SQLite file that is not there; a supervisor of the source runs
    (:class:`StoreInUse`), or this machine's supervisor host (of ``paths``)
    runs, even idle: it keeps the store it was started with and would take the
    next session there; the target holds rows (:class:`StoreNotEmpty`)."""
    if _same(source, target):
        raise StoreNotEmpty(f"the source and the target are the same store ({source.shown})",
                            hint="give --to another store (a postgresql:// URL, sqlite, a path)")
    if not source.url and not source.path.exists():
        raise StoreUnavailable(f"nothing to move: there is no store at {source.path}",
                               hint="--from names the store to move (default: this host's)")
    running = _running(source)
    if running:
        raise StoreInUse(
            f"supervisors of {source.shown} are running: {', '.join(running)}"
            " (they would go on writing to it); nothing was copied",
            hint="stop them first (`agentwrap stop NAME` for each) or wait until they end,"
            " then run the move again")
    from ..sessions.host import host_running  # the supervisor host's tmux: not for a hook's start

    if paths is not None and host_running(paths):
        raise StoreInUse(
            "this machine's supervisor host is running (it would go on using the store it"
            " was started with); nothing was copied",
            hint="stop the sessions (`agentwrap ls`, `agentwrap stop NAME`): the host exits"
            " by itself 30 s after its last session ended; then run the move again")
    rows: dict[str, int] = {}
    with _opened(source) as src, _opened(target) as dst, src.write() as sw, dst.write() as dw:
        _hold_still(sw, src.shared, "SHARE")  # writers of the source wait for the end
        _hold_still(dw, dst.shared, "EXCLUSIVE")
        held = {t: int(dw.conn.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0])
                for t, _ in TABLES}
        if any(held.values()):
            raise StoreNotEmpty(
                f"the target store {target.shown} already holds "
                + ", ".join(f"{n} {t} rows" for t, n in held.items() if n)
                + "; nothing was copied",
                hint="move into an empty store (a new database or schema, or a SQLite path"
                " that does not exist yet); move an old SQLite file aside first (mv FILE"
                " FILE.old)")
        hosts: dict[str, str] = {}
        if dst.shared != src.shared:
            if src.shared:
                _one_machine(sw)
            else:
                hosts = {str(n): str(h) for n, h in sw.conn.execute(
                    "SELECT name, host FROM sessions").fetchall() if h}
        here = host_name(load_config(paths).host.name if paths is not None else "")
        for table, key in TABLES:
            columns = _columns(src, dst, table)
            got = _rows(sw, table, columns, key)
            if dst.shared != src.shared:
                got = _rekey(got, table, columns, dst.shared, hosts, here)
            marks = ", ".join("?" * len(columns))
            insert = (f"INSERT INTO {table} ({', '.join(columns)})"
                      f"{' OVERRIDING SYSTEM VALUE' if dst.shared else ''} VALUES ({marks})")
            for row in got:
                dw.conn.execute(insert, row)
            back = _rows(dw, table, columns, key)
            if Counter(back) != Counter(got):  # read back before the commit: all or nothing
                raise StoreUnavailable(
                    f"the copy of {table} into {target.shown} differs from the source"
                    " (rolled back: nothing was copied)",
                    hint="report this as a bug, with both agentwrap versions")
            rows[table] = len(got)
        if dst.shared:  # new ids continue after the copied ones
            for sequence, table, column in _PG_COUNTERS:
                dw.conn.execute(f"SELECT setval({sequence}, max({column}))"
                                f" FROM {table} HAVING count(*) > 0")
    return MoveReport(source.shown, target.shown, rows, _next_step(target, paths))
