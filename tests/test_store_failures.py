"""Every way the store can fail gives a one-line error with a hint, never a
traceback or a wrong answer: a lock held past the busy timeout, a full
database, a corrupt file, a read-only or foreign file, a disk I/O error.

Failures are real: a second connection holding ``BEGIN IMMEDIATE``, SQLite's
own size limit (``max_page_count``), pages of a real file overwritten, a file
made read-only for a real unprivileged user, a file-size rlimit on the CLI.
"""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import AwEnv
from test_cli import assert_clean_error, fake_session

from agentwrap.errors import StoreCorrupt, StoreFull, StoreLocked, StoreUnavailable
from agentwrap.message import NewMessage
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.sessions.registry import Registry, SessionRecord


def msg(content: str = "hello", session: str = "s1") -> NewMessage:
    return NewMessage(session=session, content=content)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agentwrap.db"


def fill(path: Path, n: int = 10) -> None:
    """A real database with ``n`` messages in five sessions, checkpointed
    into the main file (so overwriting its pages damages what readers see)."""
    store = SQLiteMessageStore(path)
    for i in range(n):
        store.enqueue(NewMessage(session=f"s{i % 5}", content=f"message {i}"))
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def root_page(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    assert page_size == 4096
    return int(row[0])


def overwrite_page(path: Path, page: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek((page - 1) * 4096)
        f.write(data.ljust(4096, b"\0"))


# an index b-tree leaf page with no cells: valid to SQLite, and empty
EMPTY_INDEX_LEAF = bytes([0x0A]) + struct.pack(">HHHB", 0, 0, 4096, 0)


# --- locked -----------------------------------------------------------------------------------


@pytest.fixture
def held_lock(db_path: Path) -> Iterator[sqlite3.Connection]:
    SQLiteMessageStore(db_path).close()
    Registry(db_path).close()
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process mid-write, for longer than we wait
    yield other
    other.execute("ROLLBACK")
    other.close()


def test_a_lock_held_past_the_busy_timeout_is_store_locked(
    db_path: Path, held_lock: sqlite3.Connection
) -> None:
    store = SQLiteMessageStore(db_path, busy_timeout_ms=50)
    with pytest.raises(StoreLocked) as info:
        store.enqueue(msg())
    assert str(db_path) in info.value.message and "0.05 s busy timeout" in info.value.message
    assert info.value.exit_code == 75 and info.value.hint
    assert store.history(None) == []  # WAL: readers are not blocked
    held_lock.execute("ROLLBACK")
    held_lock.execute("BEGIN IMMEDIATE")
    held_lock.execute("ROLLBACK")
    store.enqueue(msg())  # the store is usable once the lock is gone
    held_lock.execute("BEGIN IMMEDIATE")
    reg = Registry(db_path, busy_timeout_ms=50)
    with pytest.raises(StoreLocked):
        reg.register(SessionRecord(name="a", profile="p", backend="tmux", command=["x"],
                                   cwd="/", started=time.time()))
    store.close()
    reg.close()


# --- full -------------------------------------------------------------------------------------


def test_a_full_database_is_store_full_and_writes_nothing(db_path: Path) -> None:
    store = SQLiteMessageStore(db_path)
    store.enqueue(msg("fits"))
    # SQLite's own size limit: the database cannot grow by another page
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreFull) as info:
        store.enqueue(msg("x" * 9000))
    assert str(db_path) in info.value.message and "nothing was written" in info.value.message
    assert "free some disk space" in info.value.hint
    assert [m.content for m in store.history(None)] == ["fits"]
    store._conn.execute(f"PRAGMA max_page_count = {pages * 100}")
    store.enqueue(msg("after"))  # no transaction left open by the failure
    store.close()


def test_cli_disk_write_error_is_one_line(aw: AwEnv) -> None:
    """A write the file system refuses (here: the file-size rlimit, EFBIG)."""
    fake_session(aw)
    limit = 40_000  # room for the -shm file, not for a 9 KB message in the WAL

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    res = subprocess.run(
        [sys.executable, "-m", "agentwrap", "send", "fake", "-"], input="y" * 9000,
        env={**aw.env, "PYTHONDONTWRITEBYTECODE": "1"}, cwd=aw.project, capture_output=True,
        text=True, preexec_fn=limited, timeout=60,
    )
    line = assert_clean_error(res, 77)
    assert str(aw.paths.db_path) in line and "nothing was stored" in line
    assert "free space" in res.stderr


# --- corrupt ----------------------------------------------------------------------------------


def test_a_damaged_table_page_is_store_corrupt(db_path: Path) -> None:
    fill(db_path)
    overwrite_page(db_path, root_page(db_path, "messages"), b"\xff" * 64)
    store = SQLiteMessageStore(db_path)
    with pytest.raises(StoreCorrupt) as info:
        store.history(None)
    assert str(db_path) in info.value.message
    assert f"mv {db_path} {db_path}.broken" in info.value.hint
    with pytest.raises(StoreCorrupt):
        store.check_integrity()
    store.close()


def test_an_index_page_that_reads_as_empty_is_not_an_empty_history(db_path: Path) -> None:
    """quick_check passes this one; the answer is still not "no messages"."""
    fill(db_path)
    overwrite_page(db_path, root_page(db_path, "messages_session_created"), EMPTY_INDEX_LEAF)
    overwrite_page(db_path, root_page(db_path, "messages_session_queue"), EMPTY_INDEX_LEAF)
    store = SQLiteMessageStore(db_path)
    for query in (lambda: store.history("s1"), lambda: store.peek("s1")):
        with pytest.raises(StoreCorrupt, match="index of the messages table"):
            query()
    assert store.history("nobody") == []  # a truly empty answer stays empty
    store.close()


def test_a_message_stored_between_the_two_reads_is_not_damage(db_path: Path) -> None:
    """The indexed read finds nothing, a message is stored, the table's read
    finds it: that is a race (the supervisor's `pending` and `history` ran
    into it under load in CI), not a damaged index; the answer is the row."""
    from agentwrap.queue import reads

    store = SQLiteMessageStore(db_path)
    other = SQLiteMessageStore(db_path)
    calls: list[str] = []

    def read(sql: str, args: object) -> object:
        calls.append(sql)
        if "NOT INDEXED" in sql:  # the message arrives just before the table is read
            other.enqueue(msg("just now"))
        return store._read(sql, args)  # type: ignore[arg-type]

    rows = reads.checked(read, db_path, "SELECT * FROM messages WHERE session = ?", ["s1"],
                         "session = ?", ["s1"], True)
    assert [r["content"] for r in rows] == ["just now"] and len(calls) == 3
    store.close()
    other.close()


def test_a_file_that_is_not_a_database_is_store_corrupt(db_path: Path) -> None:
    db_path.write_bytes(b"this is not SQLite at all" * 200)
    with pytest.raises(StoreCorrupt, match="is damaged: file is not a database"):
        SQLiteMessageStore(db_path)
    with pytest.raises(StoreCorrupt):
        Registry(db_path)


def test_cli_history_on_a_corrupt_database(aw: AwEnv) -> None:
    fill(aw.paths.db_path)
    fake_session(aw, "s1")
    db = aw.paths.db_path
    overwrite_page(db, root_page(db, "messages_created"), EMPTY_INDEX_LEAF)
    res = aw.cli("history")
    assert "no messages yet" not in res.stderr + res.stdout
    line = assert_clean_error(res, 74)
    assert str(db) in line
    overwrite_page(db, root_page(db, "messages"), b"\xff" * 64)
    res = aw.cli("history", "s1")
    assert str(db) in assert_clean_error(res, 74)
    assert f"mv {db} {db}.broken" in res.stderr


# --- read-only ------------------------------------------------------------------------------


@pytest.fixture
def read_only_db(aw: AwEnv) -> Iterator[Path]:
    """The store's file made read-only for real: mode 0400 for a user, the
    immutable attribute for root (whom file modes do not stop)."""
    fake_session(aw)
    db = aw.paths.db_path
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    if os.getuid() == 0:
        done = subprocess.run(["chattr", "+i", str(db)], capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"chattr +i not possible here: {done.stderr.decode().strip()}")
    else:
        db.chmod(0o400)
    try:
        yield db
    finally:
        if os.getuid() == 0:
            subprocess.run(["chattr", "-i", str(db)], check=True)


def test_cli_read_only_database_is_one_line(aw: AwEnv, read_only_db: Path) -> None:
    res = aw.cli("send", "fake", "hello")
    line = assert_clean_error(res, 77)
    assert str(read_only_db) in line
    with pytest.raises(StoreUnavailable):
        store = SQLiteMessageStore(read_only_db)
        store.enqueue(msg(session="fake"))


def test_first_opens_of_a_fresh_store_at_once_all_succeed(tmp_path: Path) -> None:
    """Turning a new file's journal to WAL takes an exclusive lock, and SQLite says
    "database is locked" at once (no busy handler) to a second connection doing
    the same: two first opens of a fresh store at once (the chat bridge's two
    loops, ``serve`` and ``run``) ended in StoreLocked. Eight threads and another
    process open each of 30 fresh stores at the same moment: none fails."""
    import threading

    for round_ in range(30):
        path = tmp_path / f"s{round_}" / "agentwrap.db"
        path.parent.mkdir()
        start = threading.Barrier(8)
        failed: list[BaseException] = []

        def open_it(start: threading.Barrier = start, path: Path = path,
                    failed: list[BaseException] = failed) -> None:
            start.wait()
            try:  # as Service.open does: the registry, then the messages, on one file
                Registry(path).close()
                SQLiteMessageStore(path).close()
            except BaseException as exc:
                failed.append(exc)

        other = subprocess.Popen(
            [sys.executable, "-c", "import sys, pathlib\nfrom agentwrap.sessions.registry import Registry\n"
             "Registry(pathlib.Path(sys.argv[1])).close()", str(path)])
        threads = [threading.Thread(target=open_it) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert other.wait(timeout=30) == 0
        assert not failed, failed
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            conn.close()
