"""A host is its identity, not only its name (issue 35, item 4).

Cloned machines share a hostname, the default host name: two hosts of one
name on one shared store merged silently (each judged the other's sessions
by its own pids, found them stale, and ``stop`` there ended them). Each host
has an id (random, made once, 0600 in its state dir), a beat claims the name
for that id only, and a second host that is up under a name is refused with
a clear error; it sees the holder's sessions as another host's. Real
PostgreSQL (tests/support/pg.py), two simulated hosts of one name: an
environment each (their own state dirs, so their own ids), real supervisors.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import psycopg
import pytest
from conftest import make_aw
from support import hosts_kit
from support.records import record

from agentwrap.errors import ConfigError, HostNameTaken
from agentwrap.sessions import hosts
from agentwrap.sessions.registry import Registry
from agentwrap.terminal.proctree import start_time


def test_the_id_is_made_once_private_and_agreed_on(tmp_path: Path) -> None:
    machine = tmp_path / "machine-id"
    machine.write_text("0123456789abcdef0123456789abcdef\n")
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(hosts.host_id(tmp_path, machine)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and len(got[0]) == 32  # racing makers agree
    path = tmp_path / hosts.ID_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert hosts.host_id(tmp_path, machine) == got[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [hosts.ID_FILE, "machine-id"]
    # the state dir copied with a cloned machine: the clone (another machine id) is another host
    machine.write_text("fedcba9876543210fedcba9876543210\n")
    clone = hosts.host_id(tmp_path, machine)
    assert clone != got[0] and hosts.host_id(tmp_path, machine) == clone
    # no machine id to read: the id stays what it is
    assert hosts.host_id(tmp_path, tmp_path / "none") == clone
    path.write_text("not an id\n")
    with pytest.raises(ConfigError, match="damaged") as info:
        hosts.host_id(tmp_path, machine)
    assert info.value.exit_code == 78 and "remove it" in info.value.hint


def _registry(root: Path, url: str, name: str = "alpha") -> Registry:
    root.mkdir(parents=True, exist_ok=True)
    return Registry(root / "agentwrap.db", url=url, host=name, heartbeat_s=1.0)


def test_a_second_machine_up_under_a_name_is_refused_and_sees_the_firsts_sessions(
    tmp_path: Path, pg_url: str, sleeper: subprocess.Popen[bytes],
) -> None:
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    first, second = _registry(tmp_path / "one", pg_url), _registry(tmp_path / "two", pg_url)
    try:
        assert first.host_id != second.host_id  # their own state dirs: two machines
        first.register(record("a1", **live))
        with pytest.raises(HostNameTaken, match="'alpha' is another machine's") as info:
            second.register(record("x1"))
        assert info.value.exit_code == 78 and "[host] name" in info.value.hint
        assert first.host_id[:8] in info.value.message
        # the first's session, seen from the second: its host's (up), not stale by a pid
        # of this machine; neither stopped, adopted nor attached to from here
        seen = second.get("a1")
        assert (seen.liveness, seen.host_liveness) == ("running", "up")
        with pytest.raises(HostNameTaken):
            second.here(seen)
        assert first.here(first.get("a1")) and first.get("a1").liveness == "running"
        assert [r.name for r in second.list()] == ["a1"]
        # the first falls silent past its deadline: the name changes hands
        hosts.beat(first.db, "alpha", 1.0, now=time.time() - 100)
        second.register(record("x1", **live))
        assert second.here(second.get("x1"))
        with pytest.raises(HostNameTaken):  # the first, back, is now the second one
            hosts.beat(first.db, "alpha", 1.0, host_id=first.host_id)
    finally:
        first.close()
        second.close()


def test_a_store_made_before_ids_gains_them_and_its_rows_are_claimed(
    tmp_path: Path, pg_url: str,
) -> None:
    """Migration: an older store's hosts table has no id column; opening it adds
    the column, the rows stay, and a row without an id is claimed by the first
    host that beats under its name."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE hosts (name TEXT PRIMARY KEY, heartbeat DOUBLE PRECISION"
                     " NOT NULL, period_s DOUBLE PRECISION NOT NULL)")
        conn.execute("INSERT INTO hosts VALUES ('alpha', %s, 1.0)", (time.time(),))
    reg = _registry(tmp_path / "one", pg_url)
    other = _registry(tmp_path / "two", pg_url)
    try:
        assert "id" in reg.db.columns("hosts")
        assert reg.holds_name()  # a row of no id holds nothing
        reg.register(record("a1"))
        held = hosts.holder(reg.db, "alpha")
        assert held is not None and held[0] == reg.host_id
        with pytest.raises(HostNameTaken):
            other.register(record("b1"))
    finally:
        reg.close()
        other.close()


def test_stop_from_a_second_machine_of_the_name_is_refused_and_ends_nothing(
    pg_url: str,
) -> None:
    """Real supervisors: a session of the first ``alpha``, the second ``alpha``'s
    CLI. Its ``run`` is refused (exit 78), its ``ls`` shows the session running
    (its host up), and its ``stop`` is refused: the session runs on."""
    with make_aw() as one, make_aw() as two:
        hosts_kit.as_host(one, "alpha", pg_url)
        hosts_kit.as_host(two, "alpha", pg_url)
        one.start_standin("a1")
        one.wait_state("a1", "ready", timeout=60)
        run = two.cli("run", "--detach", "--name", "b1", "--profile", "standin", "--",
                      *two.standin())
        assert run.returncode == 78 and "is another machine's" in run.stderr, run.stderr
        assert "Traceback" not in run.stderr
        doctor = json.loads(two.cli("doctor", "--json").stdout)  # says so before any run
        assert any("is another machine's" in p["problem"] for p in doctor["problems"]), doctor
        assert not any("is another machine's" in p["problem"]
                       for p in json.loads(one.cli("doctor", "--json").stdout)["problems"])
        listed = {d["name"]: d for d in json.loads(two.cli("ls", "--json", check=True).stdout)}
        assert listed["a1"]["liveness"] == "running", listed
        stop = two.cli("stop", "a1")
        assert stop.returncode == 78 and "is another machine's" in stop.stderr, stop.stderr
        rec = one.registry().get("a1")
        assert rec.ended is None and rec.supervisor_alive
        assert one.cli("send", "a1", "still here", "--wait", "--timeout", "60").returncode == 0
        assert "still here" in "".join(one.received())
        assert one.cli("stop", "a1").returncode == 0  # its own host stops it
        assert os.path.exists(one.paths.state_dir / hosts.ID_FILE)
