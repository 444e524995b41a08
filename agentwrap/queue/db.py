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
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreCorrupt, StoreError, StoreFull, StoreLocked, StoreUnavailable
from ..paths import PRIVATE_DIR_MODE, create_private

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


def connect(path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """A connection to the store at ``path``, creating the file 0600 if needed.

    ``busy_timeout_ms``: how long a write waits for another process's lock
    before :class:`StoreLocked`.
    """
    with store_errors(path, busy_timeout_ms):
        path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        create_private(path)
        conn = sqlite3.connect(
            str(path), timeout=busy_timeout_ms / 1000, isolation_level=None,
            check_same_thread=False,
        )
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
        return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE: take the write lock up front so read-then-write is atomic.

    On a failure SQLite may already have rolled back (disk full does): the
    ROLLBACK is then skipped, so the original error is the one reported.
    """
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
