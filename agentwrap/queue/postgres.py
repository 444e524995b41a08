"""The message store on PostgreSQL: one durable queue shared by every host (issue 23).

The operations are :class:`~agentwrap.queue.sqlstore.SQLMessageStore`'s, the
same code and statements as SQLite's; this module is the plumbing, and the
few places where a server shared by many processes on many machines needs
more than SQLite's one write lock:

* **Claims skip what another transaction holds.** A write's ``SELECT`` of the
  rows it is going to change ends with ``FOR UPDATE SKIP LOCKED``
  (:attr:`PgWrite.LOCK_ROWS`): a row that another transaction is changing
  (cancelling, evicting, expiring) is never taken twice nor waited for.
  Claims of one session take turns on a lock of that session
  (:meth:`PgWrite.claiming`): the batch is the head of its queue, in
  delivery order, and hosts claiming other sessions never wait.
* **Limits hold across hosts.** Admitting a message reads counts (pending,
  rate window, the sender's own, an idempotency key) and then writes: under
  READ COMMITTED two hosts could both read "one place left". Every enqueue
  transaction first takes one advisory lock (:data:`ADMISSION_LOCK`), so
  admissions take turns as SQLite's do, while claims and finishes go on.
* **Event ids in commit order.** A sequence hands out ids when a row is
  inserted, not when it commits: a reader that saw id 11 committed and
  resumes "after 11" would never see 10 committing later. So a write keeps its
  events until it is about to commit (:meth:`PgWrite.flush`), then takes
  :data:`EVENTS_LOCK` (held to the end of the transaction), draws the ids and
  inserts them: whoever draws later commits later, and ``events(after=id)``
  misses nothing.
* **A frozen host holds nobody up.** A host that stops in the middle of a
  transaction (its process stopped or swapped out, its connection still
  open: no network timeout notices) would keep the transaction's locks, the
  admission lock among them, and every host's enqueues would wait for it.
  Each connection asks the server to end a transaction idle for
  :data:`IDLE_IN_TRANSACTION_MS` (agentwrap's transactions wait on nothing
  but the network between their statements), unless the URL's ``options``,
  ``PGOPTIONS`` or the role's settings chose that timeout already.
* **Wake-ups** are ``NOTIFY`` on :data:`CHANNEL`, delivered at commit to
  every host's ``LISTEN`` (:class:`PgSubscription`), besides the local
  datagram announcement of SQLite's store. The payload names the sessions
  that got work for their supervisor (:data:`WAKE_KINDS`: a new message, an
  answer), so the owning host's supervisor is woken as a local ``send``
  wakes it, instead of finding the message at its idle poll (every 10 s:
  ``scripts/bench_store.py`` measured ~20 s from another host's send to the
  first byte before this, ~50 ms with it).

Secrets follow libpq's conventions (a password file, ``PGPASSWORD``,
``sslmode`` in the URL): the URL is handed to libpq as it is, and only
:func:`display` (no password) is ever printed, logged or put in an error.
The statements use ``?`` placeholders; :func:`to_pg` turns them into
psycopg's, once per statement.
"""

from __future__ import annotations

import functools
import json
import re
import select
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .. import events
from ..errors import ConfigError, StoreDown, StoreError, StoreFull, StoreLocked, StoreUnavailable
from ..message import QueueLimits
from . import schema
from .database import statements
from .keys import KEYED, SessionKeys, host_name
from .sqlstore import DEFAULT_LIMITS, SQLMessageStore
from .writes import Write

CHANNEL = "agentwrap_events"
# advisory lock keys (one 64-bit space per database): "aw" and a number
EVENTS_LOCK = 0x6177_0001
ADMISSION_LOCK = 0x6177_0002
SCHEMA_LOCK = 0x6177_0003
CLAIM_LOCKS = 0x6177  # with the session's hash: one lock per session's claims
TURN_LOCKS = 0x6178  # with a hash of what: Write.take_turns
T = TypeVar("T")
IDLE_IN_TRANSACTION_MS = 15_000  # a transaction idle this long: its host is gone
PRUNE_EVERY = 500  # event ids: now and then the log is cut to events.KEEP rows
# events that give a session's supervisor something to do: their sessions are named in the NOTIFY
WAKE_KINDS = frozenset({"message.queued", "session.answered"})
NOTIFY_BYTES = 7900  # a NOTIFY payload must stay under 8000 bytes: longer lists are split

# the event log, which every table owner appends to (the registry, the answers too)
EVENTS_DDL = (
    """
    CREATE TABLE IF NOT EXISTS events (
        id BIGINT PRIMARY KEY,  -- drawn from events_id under EVENTS_LOCK: commit order
        at DOUBLE PRECISION NOT NULL,
        session TEXT NOT NULL,
        kind TEXT NOT NULL,
        subject TEXT NOT NULL DEFAULT '',
        data TEXT NOT NULL DEFAULT '{}'
    )
    """,
    "CREATE SEQUENCE IF NOT EXISTS events_id",
    "CREATE INDEX IF NOT EXISTS events_by_session ON events (session, id)",
)
EVENT_NAMES = ("events", "events_id", "events_by_session")
DDL = (
    """
    CREATE TABLE IF NOT EXISTS messages (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id TEXT COLLATE "C" NOT NULL UNIQUE,  -- C: prefix look-ups range over bytes
        session TEXT NOT NULL,
        content TEXT NOT NULL,
        content_bytes INTEGER NOT NULL,
        source TEXT NOT NULL,
        source_id TEXT NOT NULL,
        priority INTEGER NOT NULL,
        created DOUBLE PRECISION NOT NULL,
        expires DOUBLE PRECISION NOT NULL,
        metadata TEXT NOT NULL,
        correlation_id TEXT,
        depth INTEGER NOT NULL,
        idempotency_key TEXT,
        require_ack INTEGER,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        updated DOUBLE PRECISION NOT NULL,
        finished DOUBLE PRECISION,
        detail TEXT NOT NULL DEFAULT '',
        batch_id TEXT,
        phase TEXT,
        next_attempt_at DOUBLE PRECISION NOT NULL,
        kind TEXT NOT NULL DEFAULT 'content'
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS attempts (
        message_id TEXT COLLATE "C" NOT NULL REFERENCES messages (id),
        number INTEGER NOT NULL,
        batch_id TEXT NOT NULL,
        started DOUBLE PRECISION NOT NULL,
        finished DOUBLE PRECISION,
        channel TEXT NOT NULL,
        outcome TEXT NOT NULL,
        evidence TEXT NOT NULL,
        PRIMARY KEY (message_id, number)
    )
    """,
    *EVENTS_DDL,
    # SQLite's instr(), which the shared selection (schema.selection) uses
    "CREATE OR REPLACE FUNCTION instr(text, text) RETURNS integer"
    " LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT strpos($1, $2)'",
    # the indexes are SQLite's, statement for statement (their comments name their queries)
    *(s for s in schema.SCHEMA if "CREATE TABLE" not in s),
)
TABLES = ("messages", "attempts", *EVENT_NAMES, *schema.INDEXES)
#: There once the rows are keyed ``HOST/NAME`` (:mod:`.keys`): made by :func:`key_rows`.
KEYS_MARK = "session_keys"


def key_rows(conn: PgConn) -> None:
    """Bring a store made before sessions were keyed by host up to date:
    every row naming a session the registry places on a host is renamed
    ``HOST/NAME`` (names were unique across hosts then, so the registry says
    whose each was); rows of a session the registry does not know stay as
    they are (nobody's: a pending message among them ends EXPIRED at its
    TTL). Once, inside :meth:`PgDatabase.create`'s transaction, under its lock."""
    if _exists(conn, KEYS_MARK):
        return
    if _exists(conn, "sessions") and conn.execute(  # no host column: before hosts, none to key
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = 'sessions' AND column_name = 'host'").fetchall():
        for table, column in KEYED[:-1]:
            if _exists(conn, table):
                conn.execute(
                    f"UPDATE {table} t SET {column} = s.host || '/' || t.{column}"
                    f" FROM sessions s WHERE s.name = t.{column} AND s.host <> ''")
        conn.execute("UPDATE sessions SET name = host || '/' || name"
                      " WHERE host <> '' AND strpos(name, '/') = 0")
    conn.execute(f"CREATE TABLE IF NOT EXISTS {KEYS_MARK} (since DOUBLE PRECISION)")
    conn.execute(f"INSERT INTO {KEYS_MARK} VALUES (?)", (time.time(),))


def _exists(conn: PgConn, name: str) -> bool:
    return bool(conn.execute("SELECT to_regclass(?) IS NOT NULL", (name,)).fetchall()[0][0])


@functools.lru_cache(maxsize=512)
def to_pg(sql: str) -> bytes:
    """A statement of the shared dialect for psycopg: ``?`` -> ``%s`` (no
    statement has a ``?`` or ``%`` in a literal), and SQLite's ``NOT INDEXED``
    hint (:func:`reads.checked`) dropped: PostgreSQL takes no such hint."""
    return sql.replace(" NOT INDEXED", "").replace("?", "%s").encode()


_SQLITE_WORDS = (
    # a row id that only grows: PostgreSQL's identity column
    (re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"),
     "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    # SQLite's REAL is 8 bytes; PostgreSQL's is 4 (a timestamp would lose its seconds)
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
)


def pg_dialect(statement: str) -> str:
    """A ``CREATE`` statement of a table owner's schema, written in SQLite's
    words, in PostgreSQL's: the two types that differ (see :data:`_SQLITE_WORDS`)."""
    for pattern, words in _SQLITE_WORDS:
        statement = pattern.sub(words, statement)
    return statement


#: Where the URL comes from, for the error of one that cannot be read (queue.backend.ENV).
URL_SOURCES = "AGENTWRAP_STORE_URL or [store] url"


def parts(url: str) -> dict[str, str]:
    """The URL's parameters, as libpq reads them; a URL libpq cannot read (a
    missing ``]``, an unknown ``?foo=bar``, a ``%00``) is a :class:`ConfigError`
    that quotes nothing of it: libpq's reason quotes the URL, password and
    all, and psycopg's error passed on was printed whole, as a traceback, by
    every command (``doctor`` included)."""
    try:
        return {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    except psycopg.ProgrammingError as exc:
        raise unreadable(exc) from None


def unreadable(exc: Exception) -> ConfigError:
    """The error of a URL libpq refused, with libpq's reason and every piece of
    the URL it quoted left out (a quoted character, such as ``"]"``, stays)."""
    pieces = (str(exc).strip().splitlines() or ["unreadable"])[0].split('"')
    # the odd pieces are what libpq quoted (the last one too, if its quote is not closed)
    reason = '"'.join(p if i % 2 == 0 or (len(p) == 1 and i < len(pieces) - 1) else "..."
                      for i, p in enumerate(pieces))
    return ConfigError(
        f"the store URL ({URL_SOURCES}) cannot be read: {reason}",
        hint="give a libpq URL such as postgresql://USER@HOST/DB?sslmode=verify-full, its"
        " special characters percent-encoded, the password in ~/.pgpass (PGPASSFILE)")


def display(url: str) -> str:
    """The store's address without its password, for messages and ``doctor``."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql (an unreadable URL)"
    shown = [f"{k}={parts[k]}" for k in ("host", "port", "dbname", "user", "sslmode")
             if parts.get(k)]
    return "postgresql " + " ".join(shown) if shown else "postgresql (libpq defaults)"


def _password(url: str) -> str:
    try:
        return str(conninfo_to_dict(url).get("password") or "")
    except psycopg.ProgrammingError:
        return ""


class PgRow:
    """A row read by column name or by index, as ``sqlite3.Row`` is."""

    __slots__ = ("_index", "_values")

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self._values = values
        self._index = index

    def __getitem__(self, key: int | str, /) -> Any:
        return self._values[self._index[key] if isinstance(key, str) else key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def keys(self) -> list[str]:
        return list(self._index)


def pg_rows(cursor: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], PgRow]:
    index = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: PgRow(values, index)


class PgConn:
    """:class:`agentwrap.events.Conn` over a psycopg connection."""

    def __init__(self, raw: psycopg.Connection[PgRow]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Any = (), /) -> psycopg.Cursor[PgRow]:
        return self.raw.execute(to_pg(sql), parameters or None)


# A peer that vanished without a word (a pulled cable, a dead switch, a laptop
# closed) is noticed in about half a minute on both ends: without these a
# statement in flight waits out the kernel's ~15 minutes of retransmissions,
# a connection waiting for an answer with nothing unacknowledged waits
# forever, and the server keeps a cut host's transaction, and every lock it
# holds (the event log's, a session's claims), for hours: every other host
# would wait behind it. libpq's settings for this end (a URL's own win),
# the server's for the other, through ``options`` (the URL's come after, so win).
CLIENT_TCP = {"keepalives": "1", "keepalives_idle": "15", "keepalives_interval": "5",
              "keepalives_count": "3", "tcp_user_timeout": "20000"}
SERVER_TCP = ("-c tcp_keepalives_idle=15 -c tcp_keepalives_interval=5"
              " -c tcp_keepalives_count=3 -c tcp_user_timeout=20000")


def dsn(url: str) -> str:
    """``url`` with the dead-peer settings (:data:`CLIENT_TCP`, :data:`SERVER_TCP`)
    it does not choose itself; an unreadable URL is a :class:`ConfigError` (:func:`parts`)."""
    given = parts(url)
    extra = {k: v for k, v in CLIENT_TCP.items() if k not in given}
    extra["options"] = f"{SERVER_TCP} {given.get('options') or ''}".strip()
    try:
        return make_conninfo(url, **extra)
    except psycopg.ProgrammingError as exc:
        raise unreadable(exc) from None


#: SQLSTATE classes of a server that cannot serve now but may soon: 08 the
#: connection (lost, refused), 53 its resources (53300 too many connections;
#: a full disk is :class:`StoreFull` first), 57P0x shutting down or starting.
_TEMPORARY = ("08", "53", "57P")


def _temporary(exc: psycopg.OperationalError) -> bool:
    """Whether ``exc`` says the server is away for now (:class:`StoreDown`),
    not that it refuses us (a password, a database, a role: ``28``, ``3D``).
    No SQLSTATE: the server never answered (refused, timed out, cut off)."""
    state = exc.sqlstate
    if state is None:  # psycopg gives none for a connection attempt: read the server's words
        text = str(exc)
        return not any(w in text for w in _REFUSALS)
    return state.startswith(_TEMPORARY)


#: What a server says, in a connection attempt's error (psycopg gives it no
#: SQLSTATE), when it refuses who we are: not a temporary failure.
_REFUSALS = ("password authentication failed", "authentication failed", "does not exist",
             "no pg_hba.conf entry", "permission denied", "no password supplied",
             "certificate")


def connect(url: str, timeout_s: float = 10.0) -> PgConn:
    try:
        raw = psycopg.connect(dsn(url), autocommit=True, row_factory=pg_rows,
                              connect_timeout=max(1, int(timeout_s)),
                              application_name="agentwrap")
    except psycopg.ProgrammingError as exc:  # libpq refused the address: it quotes it
        raise unreadable(exc) from None
    return PgConn(raw)


class PgWrite(Write):
    """A write transaction on PostgreSQL: rows it changes are locked, its
    events wait for :meth:`flush` (see the module: ids in commit order)."""

    __slots__ = ("pending",)
    LOCK_ROWS = " FOR UPDATE SKIP LOCKED"

    def __init__(self, conn: PgConn) -> None:
        super().__init__(conn)
        self.pending: list[tuple[float, str, str, str, str]] = []

    def claiming(self, session: str) -> None:
        """Claims of one session take turns (the batch is the head of its
        queue, in order); hosts claiming other sessions never wait for it."""
        self.conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (CLAIM_LOCKS, session))

    def take_turns(self, what: str) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (TURN_LOCKS, what))

    def event(self, now: float, session: str, kind: str, subject: str, /, **data: Any) -> None:
        if kind not in events.KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        self.pending.append((now, session, kind, subject, json.dumps(data, separators=(",", ":"))))
        self.recorded = True

    def flush(self) -> None:
        """Append the kept events as the last thing before the commit: their ids
        are drawn under :data:`EVENTS_LOCK`, which the transaction holds until
        it has committed, so ids grow in commit order. Then ``NOTIFY``."""
        if not self.pending:
            return
        conn = self.conn
        conn.execute("SELECT pg_advisory_xact_lock(?)", (EVENTS_LOCK,))
        last = 0
        for at, session, kind, subject, data in self.pending:
            last = int(conn.execute(
                "INSERT INTO events (id, at, session, kind, subject, data)"
                " VALUES (nextval('events_id'), ?, ?, ?, ?, ?) RETURNING id",
                (at, session, kind, subject, data)).fetchall()[0][0])
        if last // PRUNE_EVERY != (last - len(self.pending)) // PRUNE_EVERY:
            conn.execute("DELETE FROM events WHERE id <= ?", (last - events.KEEP,))
        for payload in wake_payloads(
                {session for _, session, kind, _, _ in self.pending if kind in WAKE_KINDS}):
            conn.execute("SELECT pg_notify(?, ?)", (CHANNEL, payload))
        self.pending.clear()


def wake_payloads(sessions: Collection[str]) -> list[str]:
    """The NOTIFY payloads of one commit: the sessions to wake, one per line
    (names hold no newline), split to fit; one empty payload if none (readers
    of events are woken by every NOTIFY)."""
    out: list[str] = []
    for name in sorted(sessions):
        if out and len(out[-1]) + 1 + len(name.encode()) <= NOTIFY_BYTES:
            out[-1] += "\n" + name
        else:
            out.append(name)
    return out or [""]


class PgDatabase:
    """:class:`~agentwrap.queue.database.Database` on a PostgreSQL server: the
    plumbing the message store, the registry and the answers run on.

    One connection per instance (autocommit: a read is one statement, a write
    one explicit transaction, :class:`PgWrite`), guarded by a lock so threads
    may share it; a lost connection is opened again on the next call.
    """

    shared = True

    def __init__(self, url: str, *, events_dir: Path | None = None,
                 connect_timeout_s: float = 10.0) -> None:
        parts(url)  # one that cannot be read is refused here, quoting nothing of it
        self.url = url
        self.shown = display(url)
        self.where = Path(self.shown)
        self._secret = _password(url)
        self.events_dir = events_dir
        self._timeout_s = connect_timeout_s
        self._lock = threading.RLock()
        self._pg: PgConn | None = None

    def _conn(self) -> PgConn:
        if self._pg is None or self._pg.raw.closed:
            self._pg = connect(self.url, self._timeout_s)
            self._pg.execute(  # see the module: unless the URL or the role chose one
                "SELECT set_config('idle_in_transaction_session_timeout', ?, false)"
                " WHERE current_setting('idle_in_transaction_session_timeout') = '0'",
                (str(IDLE_IN_TRANSACTION_MS),))
        return self._pg

    def _drop(self) -> None:
        if self._pg is not None:
            self._pg.raw.close()
            self._pg = None

    def _first(self, start: Callable[[PgConn], T]) -> T:
        """``start(connection)``, on a new connection if the one kept broke
        while idle (the server restarted, a proxy closed it): the failure
        came before anything was sent, so trying once more is safe."""
        conn = self._conn()
        try:
            return start(conn)
        except psycopg.OperationalError:
            if not conn.raw.broken:
                raise
            self._drop()
            return start(self._conn())

    @contextmanager
    def errors(self) -> Iterator[None]:
        """psycopg's failures as :class:`StoreError`; bugs (bad SQL, a
        constraint) keep their traceback. A broken connection is dropped, to
        be opened again by the next call."""
        try:
            yield
        except psycopg.Error as exc:
            mapped = self._translate(exc)
            if self._pg is not None and (self._pg.raw.broken or self._pg.raw.closed):
                self._drop()
            if mapped is None:
                raise
            raise mapped from None  # the original may quote the URL

    def _translate(self, exc: psycopg.Error) -> StoreError | None:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if self._secret:
            first = first.replace(self._secret, "***")
        if isinstance(exc, (pg_errors.DeadlockDetected, pg_errors.SerializationFailure,
                            pg_errors.LockNotAvailable)):
            return StoreLocked(f"the store {self.shown} was busy: {first} (nothing was written)")
        if isinstance(exc, (pg_errors.DiskFull, pg_errors.OutOfMemory)):
            return StoreFull(f"the store {self.shown} cannot grow: {first} (nothing was written)")
        if isinstance(exc, psycopg.OperationalError) and _temporary(exc):
            return StoreDown(f"cannot use the store {self.shown}, down for now: {first}")
        if isinstance(exc, psycopg.OperationalError):
            return StoreUnavailable(
                f"cannot use the store {self.shown}: {first}",
                hint="check that the server is up and reachable, and the URL's user,"
                " password file (~/.pgpass) and sslmode; `agentwrap doctor` checks the store",
            )
        return None

    @contextmanager
    def write(self) -> Iterator[Write]:
        """One write transaction; once it committed, its events are announced
        (NOTIFY to every host at the commit, the datagram to this host's readers)."""
        with self._lock:
            with self.errors(), ExitStack() as tx:

                def begin(c: PgConn) -> PgConn:
                    tx.enter_context(c.raw.transaction())  # sends BEGIN
                    return c

                w = PgWrite(self._first(begin))
                yield w
                w.flush()
            if w.recorded and self.events_dir is not None:
                events.announce(self.events_dir)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[PgRow]:
        with self._lock, self.errors():  # one statement: safe to send again
            return self._first(lambda c: c.execute(sql, params).fetchall())

    @contextmanager
    def reading(self) -> Iterator[PgConn]:
        with self._lock, self.errors():
            yield self._conn()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self._lock, self.errors():  # one statement in autocommit: all or nothing
            self._first(lambda c: c.execute(sql, params))

    def create(self, ddl: Sequence[str], names: Collection[str]) -> None:
        """Run ``ddl`` (PostgreSQL's words) unless every one of ``names`` is
        there, and key the rows by host once (:func:`key_rows`); hosts opening a
        new database at once take turns (:data:`SCHEMA_LOCK`)."""
        names = {*names, KEYS_MARK}
        rows = self.read(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relname = ANY(?)", (list(set(names)),))
        if int(rows[0][0]) == len(set(names)):
            return
        with self._lock, self.errors(), self._conn().raw.transaction():
            c = self._conn()
            c.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
            for statement in ddl:
                c.execute(statement)
            key_rows(c)

    def ensure(self, schema: str, names: Collection[str]) -> None:
        """:meth:`create` for a schema in SQLite's words (:func:`pg_dialect`),
        with the event log (:data:`EVENTS_DDL`)."""
        self.create((*EVENTS_DDL, *(pg_dialect(s) for s in statements(schema))),
                    (*names, *EVENT_NAMES))

    def columns(self, table: str) -> set[str]:
        return {str(r[0]) for r in self.read(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ?", (table,))}

    def close(self) -> None:
        with self._lock:
            self._drop()


class PostgresMessageStore(SQLMessageStore):
    """:class:`MessageStore` on a PostgreSQL server shared by several hosts,
    over a :class:`PgDatabase` of its own (``database``: one given, such as the
    hub's pool of connections, :mod:`.pgpool`, for a process serving many clients)."""

    # SQLite's check of an empty answer reads the table NOT INDEXED; PostgreSQL
    # takes no such hint (to_pg drops it), so the check would read the same
    # index again: a second round trip of every idle supervisor's poll, for nothing
    checks_indexes = False

    def __init__(
        self,
        url: str,
        limits: QueueLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.time,
        *,
        events_dir: Path | None = None,
        connect_timeout_s: float = 10.0,
        host: str | None = None,
        database: PgDatabase | None = None,
    ) -> None:
        super().__init__(limits, clock)
        self.keys = SessionKeys(host_name() if host is None else host, shared=True)
        self._db = database or PgDatabase(url, events_dir=events_dir,
                                          connect_timeout_s=connect_timeout_s)
        self.url, self.shown, self.where = url, self._db.shown, self._db.where
        self.events_dir = events_dir
        self._db.create(DDL, TABLES)

    # --- plumbing: the database's ---------------------------------------------------

    @property
    def database(self) -> PgDatabase:
        """The plumbing under the store (the hub keeps its keys on its pool)."""
        return self._db

    def _write(self) -> AbstractContextManager[Write]:
        return self._db.write()

    def _admit(self, w: Write) -> None:
        w.conn.execute("SELECT pg_advisory_xact_lock(?)", (ADMISSION_LOCK,))

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[PgRow]:
        return self._db.read(sql, params)

    def _reading(self) -> AbstractContextManager[PgConn]:
        return self._db.reading()

    def listen(self, wake: Callable[[str], object] | None = None) -> None:
        """Commits of every host wake this host's readers: :class:`NotifyBridge`
        (one per process and events dir, started on first use); ``wake``: called
        with the name of each of this host's sessions another commit gave work
        (a supervisor's wake-up; the NOTIFY names session keys, ``HOST/NAME``)."""
        if self.events_dir is None:
            return
        local = self.keys.local

        def woken(key: str) -> object:
            name = local(key)
            return name is not None and wake is not None and wake(name)

        NotifyBridge.start(self.url, self.events_dir, woken if wake is not None else None)

    def check_integrity(self) -> None:
        """The server answers (PostgreSQL checks its own pages)."""
        self._read("SELECT 1")

    def close(self) -> None:
        self._db.close()


class PgSubscription:
    """A reader's wake-up from every host: ``LISTEN`` on :data:`CHANNEL` over a
    connection of its own. Same use as :class:`agentwrap.events.Subscription`."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(dsn(url), autocommit=True, connect_timeout=10,
                                    application_name="agentwrap-listen")
        self.conn.execute(f"LISTEN {CHANNEL}".encode())

    def fileno(self) -> int:
        return self.conn.fileno()

    def wait(self, timeout: float) -> bool:
        """Block until a commit's NOTIFY or ``timeout``; True (and drained) if one came."""
        return self.receive(timeout) is not None

    def receive(self, timeout: float) -> set[str] | None:
        """Block until a commit's NOTIFY or ``timeout``: None if none came, else
        (drained) the sessions those commits named (:func:`wake_payloads`).

        The wait is one ``select`` on the connection's socket: psycopg's own
        ``notifies(timeout=...)`` wakes every 100 ms to look for signals, ten
        times a second for as long as a host runs (``scripts/bench_store.py``:
        a sixth of an idle supervisor host's CPU). A failure is psycopg's, as
        before: a connection the server closed raises on the drain."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            got = [n.payload for n in self.conn.notifies(timeout=0.0)]
            if got:
                return {name for payload in got for name in payload.split("\n") if name}
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                select.select([self.conn.fileno()], [], [], left)
            except InterruptedError:
                pass

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> PgSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NotifyBridge:
    """Hands the server's NOTIFY (a commit of any host) on to this host's
    readers as the datagram the SQLite store sends (:func:`events.announce`),
    so every waiter (``send --wait``, ``events -f``, SSE, the WebSocket)
    wakes for another host's change as for a local one, and waits as before.

    One daemon thread per process and events dir, with its own ``LISTEN``
    connection; a lost connection is opened again (a wake-up missed meanwhile
    costs latency only: readers look again every few seconds)."""

    _running: ClassVar[dict[tuple[str, str], NotifyBridge]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()
    RETRY_S = 1.0

    def __init__(self, url: str, events_dir: Path,
                 wake: Callable[[str], object] | None = None) -> None:
        self.url = url
        self.events_dir = events_dir
        self.wake = wake  # a session's supervisor wake-up (set by the first caller with one)
        self.listening = threading.Event()  # set while a LISTEN connection is up
        self.thread = threading.Thread(target=self._run, name="agentwrap-notify", daemon=True)

    @classmethod
    def start(cls, url: str, events_dir: Path,
              wake: Callable[[str], object] | None = None) -> NotifyBridge:
        key = (url, str(events_dir))
        with cls._guard:
            bridge = cls._running.get(key)
            if bridge is None:
                bridge = cls._running[key] = cls(url, events_dir, wake)
                bridge.thread.start()
            elif bridge.wake is None:
                bridge.wake = wake
        return bridge

    def _run(self) -> None:
        while True:
            try:
                with PgSubscription(self.url) as sub:
                    events.announce(self.events_dir)  # a commit may have been missed
                    self.listening.set()
                    while True:
                        woken = sub.receive(60.0)
                        if woken is None:
                            continue
                        events.announce(self.events_dir)
                        wake = self.wake
                        if wake is not None:
                            for session in sorted(woken):
                                wake(session)  # not this host's session: nobody listens
            except psycopg.Error:
                self.listening.clear()
                time.sleep(self.RETRY_S)
