"""Opening the one SQLite store that every agentwrap process shares.

The CLI, supervisors, hook commands and servers all write concurrently, so
every connection gets WAL mode, a busy timeout and ``synchronous=FULL``: a
message is on disk before ``send`` returns. Modules own their tables and create
them with ``CREATE TABLE IF NOT EXISTS`` through :func:`connect`.

The database file is created 0600 before SQLite opens it (SQLite gives its
``-wal`` and ``-shm`` files the mode of the database), so no other user can
read a message at any moment. Every SQLite failure passes through
:func:`store_errors`, the one place that turns ``sqlite3`` errors into the
:class:`~agentwrap.errors.StoreError` tree: a locked, full, corrupt or
unreadable store is a one-line error with a hint, never a traceback.

Write transactions of one process take turns on a lock of its own per
database file (:func:`transaction`) before asking SQLite for the write lock:
threads of one process (the HTTP server's workers, the supervisor host's
sessions) queue on it and are handed the turn at once, instead of retrying
``BEGIN IMMEDIATE`` in SQLite's busy handler, which sleeps longer and longer
(up to 100 ms a try) while the others commit. Other processes are still
ordered by SQLite's lock and the busy timeout.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreCorrupt, StoreError, StoreFull, StoreLocked, StoreUnavailable
from ..paths import create_private, private_dirs

BUSY_TIMEOUT_MS = 10_000

# primary result codes (https://sqlite.org/rescode.html)
_PERM, _BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT = 3, 5, 6, 8, 10, 11
_FULL, _CANTOPEN, _PROTOCOL, _NOLFS, _AUTH, _NOTADB = 13, 14, 15, 22, 23, 26
_UNAVAILABLE = frozenset({_PERM, _READONLY, _IOERR, _CANTOPEN, _PROTOCOL, _NOLFS, _AUTH})
# Python 3.10 has no sqlite_errorcode: the same decision from SQLite's message
_BY_MESSAGE = (
    ("database is locked", _BUSY),
    ("database table is locked", _LOCKED),
    ("database or disk is full", _FULL),
    ("malformed", _CORRUPT),
    ("file is not a database", _NOTADB),
    ("readonly database", _READONLY),
    ("unable to open database", _CANTOPEN),
    ("disk i/o error", _IOERR),
)


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF
    text = str(exc).lower()
    return next((c for needle, c in _BY_MESSAGE if needle in text), None)


def translate(
    exc: BaseException, path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS
) -> StoreError | None:
    """The :class:`StoreError` for a failure of the store at ``path``, or None
    for a bug (bad SQL, a constraint): those keep their traceback."""
    if isinstance(exc, OSError):  # creating the file or its dir
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return StoreFull(f"cannot create the database {path}: {exc.strerror}")
        return StoreUnavailable(
            f"cannot create the database {path}: {exc.strerror}",
            hint=f"check that you own {path.parent} and that it is writable",
        )
    if not isinstance(exc, (sqlite3.OperationalError, sqlite3.DatabaseError)) or isinstance(
        exc, (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError)
    ):
        return None
    code = _primary_code(exc)
    if code in (_BUSY, _LOCKED):
        return StoreLocked(
            f"the database {path} stayed locked for more than the"
            f" {busy_timeout_ms / 1000:g} s busy timeout"
        )
    if code == _FULL:
        return StoreFull(f"the database {path} cannot grow: {exc} (nothing was written)")
    if code in (_CORRUPT, _NOTADB):
        return StoreCorrupt(
            f"the database {path} is damaged: {exc}",
            hint=f"move it aside (mv {path} {path}.broken, and its -wal/-shm files), then"
            " agentwrap starts a new, empty one; `agentwrap doctor` checks the store",
        )
    if code in _UNAVAILABLE:
        if code == _IOERR:
            return StoreUnavailable(
                f"cannot use the database {path}: {exc} (nothing was stored)",
                hint=f"check the free space (df {path.parent}) and the disk's health, then retry",
            )
        why = {
            _READONLY: "it is read-only",
            _CANTOPEN: "it cannot be opened",
            _PERM: "permission denied",
        }.get(code, str(exc))
        return StoreUnavailable(
            f"cannot use the database {path}: {why} ({exc})",
            hint=f"check that you own {path} and its dir and that they are writable;"
            " `agentwrap doctor` checks them",
        )
    return None


@contextmanager
def store_errors(path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> Iterator[None]:
    """Run a block of store work; its SQLite/OS failures leave as StoreError."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        mapped = translate(exc, path, busy_timeout_ms)
        if mapped is None:
            raise
        raise mapped from exc


class Connection(sqlite3.Connection):
    """A connection that knows its process's write lock for its file."""

    write_lock: threading.RLock
    busy_timeout_s: float


_write_locks: dict[str, threading.RLock] = {}
_write_locks_guard = threading.Lock()


def _write_lock(path: Path) -> threading.RLock:
    """This process's lock for write transactions on the database at ``path``
    (re-entrant: a thread nesting two connections' transactions meets SQLite's
    busy timeout, as it would without it, not a deadlock)."""
    key = os.path.realpath(path)
    with _write_locks_guard:
        return _write_locks.setdefault(key, threading.RLock())


def connect(path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """A connection to the store at ``path``, creating the file 0600 if needed.

    ``busy_timeout_ms``: how long a write waits for another process's lock
    before :class:`StoreLocked`.
    """
    with store_errors(path, busy_timeout_ms):
        private_dirs(path.parent)
        create_private(path)
        conn = sqlite3.connect(
            str(path), timeout=busy_timeout_ms / 1000, isolation_level=None,
            check_same_thread=False, factory=Connection,
        )
        conn.write_lock = _write_lock(path)
        conn.busy_timeout_s = busy_timeout_ms / 1000
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            _wal(conn, busy_timeout_ms / 1000)
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
        return conn


def _wal(conn: Connection, timeout_s: float) -> None:
    """Put the file in WAL mode (a no-op once it is). Turning a new file's
    journal to WAL takes an exclusive lock, and SQLite answers "database is
    locked" at once, without its busy handler, when another connection (a
    thread of this process, or another process) is doing the same or holds the
    file: two first opens of a fresh store at once (``serve`` and ``run``, the
    chat bridge's two loops) failed with StoreLocked. So this process's opens
    take turns on the file's write lock, and a busy answer is retried within
    the busy timeout, as any other write would wait."""
    deadline = time.monotonic() + timeout_s
    with conn.write_lock:
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(0.005)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE: take the write lock up front so read-then-write is atomic.

    On a failure SQLite may already have rolled back (disk full does): the
    ROLLBACK is then skipped, so the original error is the one reported.
    A connection made by :func:`connect` first waits its turn among this
    process's writers (see the module's doc), for at most the busy timeout.
    """
    lock = getattr(conn, "write_lock", None)
    if lock is not None and not lock.acquire(timeout=getattr(conn, "busy_timeout_s", -1)):
        raise sqlite3.OperationalError("database is locked")  # StoreLocked, as SQLite's would be
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # the error being raised says more than this one
            raise
        try:
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # a failed COMMIT may leave it open: never reuse that
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            raise
    finally:
        if lock is not None:
            lock.release()
