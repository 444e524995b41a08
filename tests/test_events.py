"""The event bus: rows appended in the writer's transaction, read by id from
any process, with datagram wake-ups instead of polling."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentwrap import events
from agentwrap.queue.db import connect, transaction


@pytest.fixture
def base() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="awe-", dir="/tmp"))  # short: socket paths
    os.chmod(d, 0o700)
    yield d
    import shutil

    shutil.rmtree(d, ignore_errors=True)


def test_events_are_read_in_order_after_an_id(base: Path) -> None:
    conn = connect(base / "db")
    events.create(conn)
    with transaction(conn):
        a = events.record(conn, 1.0, "s1", "message.queued", "m1", priority="normal")
        events.record(conn, 2.0, "s2", "session.state", state="busy")
        events.record(conn, 3.0, "s1", "message.ended", "m1", status="delivered")
    got = events.since(conn, 0)
    assert [(e.session, e.kind) for e in got] == [
        ("s1", "message.queued"), ("s2", "session.state"), ("s1", "message.ended")]
    assert [e.kind for e in events.since(conn, a)] == ["session.state", "message.ended"]
    assert [e.kind for e in events.since(conn, 0, session="s1", kinds=["message.ended"])] == [
        "message.ended"]
    assert events.since(conn, 0, subject="m1")[-1].data == {"status": "delivered"}
    assert events.last_id(conn) == got[-1].id


def test_an_event_of_a_rolled_back_change_never_exists(base: Path) -> None:
    conn = connect(base / "db")
    events.create(conn)
    with pytest.raises(RuntimeError), transaction(conn):
        events.record(conn, 1.0, "s1", "message.queued", "m1")
        raise RuntimeError("the change failed")
    assert events.since(conn, 0) == []


def test_unknown_kinds_are_refused(base: Path) -> None:
    conn = connect(base / "db")
    events.create(conn)
    with pytest.raises(ValueError):
        events.record(conn, 1.0, "s1", "message.exploded")


def test_old_events_are_pruned(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "KEEP", 10)
    monkeypatch.setattr(events, "_PRUNE_EVERY", 5)
    conn = connect(base / "db")
    events.create(conn)
    with transaction(conn):
        for i in range(30):
            events.record(conn, float(i), "s", "session.state", state="busy")
    ids = [e.id for e in events.since(conn, 0)]
    assert len(ids) <= 15 and ids[-1] == 30


def test_a_subscriber_in_another_process_is_woken(base: Path) -> None:
    evdir = base / "events"
    sub = events.Subscription(evdir)
    assert oct(os.stat(sub.path).st_mode & 0o777) == "0o600"
    assert not sub.wait(0.05)
    script = "import sys; from pathlib import Path; from agentwrap import events;" \
             " print(events.announce(Path(sys.argv[1])))"
    out = subprocess.run([sys.executable, "-c", script, str(evdir)], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "1"
    assert sub.wait(5.0)
    assert not sub.wait(0.0)  # drained
    sub.close()
    assert not sub.path.exists()


def test_the_socket_of_a_dead_reader_is_removed(base: Path) -> None:
    evdir = base / "events"
    script = "import sys; from pathlib import Path; from agentwrap import events;" \
             " s = events.Subscription(Path(sys.argv[1])); print(s.path)"
    left = Path(subprocess.run([sys.executable, "-c", script, str(evdir)], capture_output=True,
                               text=True, check=True).stdout.strip())
    assert left.exists()  # the process died without closing it
    live = events.Subscription(evdir)
    assert events.announce(evdir) == 1  # the live one; nonblocking sends never wait
    assert not left.exists() and live.path.exists()
    live.close()
