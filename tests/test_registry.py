"""The session registry: unique names, liveness from pid + start time,
stale entries after a crashed supervisor, and re-adoption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from conftest import AwEnv
from support.records import record

from agentwrap.errors import SessionNameTaken, SessionNotFound
from agentwrap.terminal.proctree import alive, start_time


def live(proc: subprocess.Popen[bytes]) -> dict[str, object]:
    """Record ``proc`` as the supervisor. (Never this process: the ``aw``
    fixture SIGKILLs live supervisors on teardown.)"""
    return {"supervisor_pid": proc.pid, "supervisor_start": start_time(proc.pid)}


# --- the Registry itself ----------------------------------------------------------------


def test_live_name_is_refused(aw: AwEnv, sleeper: subprocess.Popen[bytes]) -> None:
    reg = aw.registry()
    reg.register(record("a", **live(sleeper)))
    assert reg.get("a").liveness == "running"
    with pytest.raises(SessionNameTaken) as info:
        reg.register(record("a", **live(sleeper)))
    assert info.value.hint


def test_ended_name_can_be_taken_over(aw: AwEnv, sleeper: subprocess.Popen[bytes]) -> None:
    reg = aw.registry()
    reg.register(record("a", **live(sleeper), command=["old"]))
    reg.mark_ended("a", 0)
    assert reg.get("a").liveness == "ended"
    reg.register(record("a", **live(sleeper), command=["new"]))
    assert reg.get("a").command == ["new"] and reg.get("a").ended is None


def test_stale_name_can_be_taken_over(aw: AwEnv, sleeper: subprocess.Popen[bytes]) -> None:
    reg = aw.registry()
    pid = sleeper.pid
    reg.register(record("a", supervisor_pid=pid, supervisor_start=start_time(pid)))
    assert reg.get("a").liveness == "running"
    sleeper.kill()
    sleeper.wait()
    assert reg.get("a").liveness == "stale"
    reg.register(record("a", command=["new"]))
    assert reg.get("a").command == ["new"]


def test_reused_pid_is_not_the_supervisor(aw: AwEnv, sleeper: subprocess.Popen[bytes]) -> None:
    # a live process has the recorded pid, but it started at another time
    reg = aw.registry()
    real = start_time(sleeper.pid)
    assert real is not None
    reg.register(record("a", supervisor_pid=sleeper.pid, supervisor_start=str(int(real) - 1)))
    rec = reg.get("a")
    assert alive(sleeper.pid)
    assert not rec.supervisor_alive and rec.liveness == "stale"
    reg.register(record("a", command=["new"]))  # and the name is free
    assert reg.get("a").command == ["new"]


def test_no_pid_is_stale_and_unknown_name_raises(aw: AwEnv) -> None:
    reg = aw.registry()
    reg.register(record("a"))
    assert reg.get("a").liveness == "stale"
    with pytest.raises(SessionNotFound):
        reg.get("nope")
    assert reg.find("nope") is None


def test_liveness_is_shared_between_processes(
    aw: AwEnv, sleeper: subprocess.Popen[bytes]
) -> None:
    # a record written here is judged the same by `agentwrap ls` elsewhere
    reg = aw.registry()
    reg.register(record("here", **live(sleeper)))
    data = json.loads(aw.cli("ls", "--json", check=True).stdout)
    assert [(d["name"], d["liveness"]) for d in data] == [("here", "running")]


def test_reused_pid_in_ls_json(aw: AwEnv, sleeper: subprocess.Popen[bytes]) -> None:
    reg = aw.registry()
    reg.register(record("r", supervisor_pid=sleeper.pid, supervisor_start="1"))
    data = json.loads(aw.cli("ls", "--json", check=True).stdout)
    assert [(d["name"], d["liveness"]) for d in data] == [("r", "stale")]


# --- with real supervisors ------------------------------------------------------------------


def supervisor_pid(aw: AwEnv, name: str) -> int:
    rec = aw.registry().get(name)
    assert rec.supervisor_pid and rec.supervisor_alive
    return int(rec.supervisor_pid)


def kill9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while alive(pid):
        assert time.monotonic() < deadline, "supervisor survived SIGKILL"
        time.sleep(0.02)


def test_name_of_running_session_is_taken(aw: AwEnv) -> None:
    aw.start_standin("sa")
    res = aw.cli("run", "--detach", "--name", "sa", "--profile", "standin", "--",
                 *aw.standin())
    assert res.returncode == 1
    assert "error: a session named 'sa' is already running" in res.stderr
    assert "hint:" in res.stderr and "Traceback" not in res.stderr


def test_kill9_supervisor_shows_stale_never_running(aw: AwEnv) -> None:
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    kill9(supervisor_pid(aw, "sa"))
    data = json.loads(aw.cli("ls", "--json", check=True).stdout)
    assert [(d["name"], d["liveness"]) for d in data] == [("sa", "stale")]
    assert "stale" in aw.cli("state", "sa", "--explain", check=True).stdout
    # its agent still runs in tmux: the name is not free, and the failed
    # attempt must not mark the live agent ended
    res = aw.cli("run", "--detach", "--name", "sa", "--profile", "standin", "--",
                 *aw.standin())
    assert res.returncode == 1
    lines = res.stderr.splitlines()
    assert lines[0].startswith("error: a session named 'sa' is still running in tmux")
    assert lines[1].startswith("hint: `agentwrap adopt sa`") and len(lines) == 2
    assert aw.registry().get("sa").liveness == "stale"
    aw.cli("adopt", "sa", check=True)
    assert aw.registry().get("sa").liveness == "running"


def test_adopt_restarts_supervision(aw: AwEnv) -> None:
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    old = supervisor_pid(aw, "sa")
    kill9(old)
    assert aw.registry().get("sa").liveness == "stale"
    queued = aw.cli("send", "sa", "while nobody watched", check=True)
    assert "adopt" in queued.stderr
    res = aw.cli("adopt", "sa", check=True)
    new = supervisor_pid(aw, "sa")
    assert new != old and f"supervisor pid {new}" in res.stderr
    data = json.loads(aw.cli("ls", "--json", check=True).stdout)
    assert [(d["name"], d["liveness"]) for d in data] == [("sa", "running")]
    aw.wait_for(lambda: len(aw.received()) == 1, timeout=30, what="delivery after adopt")
    assert "while nobody watched" in aw.received()[0]
    # adopting a supervised session is a no-op that names the same supervisor
    again = aw.cli("adopt", "sa", check=True)
    assert f"supervisor pid {new}" in again.stderr


def test_adopt_of_a_gone_agent_fails_cleanly(aw: AwEnv) -> None:
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    kill9(supervisor_pid(aw, "sa"))
    subprocess.run(["tmux", "-S", str(aw.paths.tmux_socket_for("sa")), "kill-server"], check=False,
                   capture_output=True)
    res = aw.cli("adopt", "sa")
    assert res.returncode == 3
    assert res.stderr.startswith("error: the agent of 'sa' is no longer running")
    assert aw.registry().get("sa").liveness == "ended"


@pytest.mark.parametrize("how", ["adopt", "stop"])
def test_an_orphaned_codex_app_server_goes_with_its_session(aw: AwEnv, how: str) -> None:
    """Codex's private app-server runs in a process group of its own, so a
    SIGKILLed supervisor leaves it behind (two inotify instances and a node
    process each); the `adopt` that finds the agent gone, or the `stop` that
    records the end, ends it too. A real process stands in for it: its
    command line names the session's socket, as the server's does."""
    from agentwrap.app_server.launch import socket_path

    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    sock = socket_path(aw.paths, "sa")
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                               f"unix://{sock}"], start_new_session=True)
    try:
        reg = aw.registry()
        rec = reg.get("sa")
        reg.update("sa", options=replace(rec.options, app_server=f"unix://{sock}",
                                         app_server_pid=server.pid))
        reg.close()
        kill9(supervisor_pid(aw, "sa"))
        subprocess.run(["tmux", "-S", str(aw.paths.tmux_socket_for("sa")), "kill-server"],
                       check=False, capture_output=True)
        aw.cli(how, "sa")
        assert server.wait(timeout=30) is not None
        assert aw.registry().get("sa").liveness == "ended"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_a_registry_from_before_questions_gains_the_column(aw: AwEnv) -> None:
    # An agentwrap upgraded while sessions ran: the old table has no `question`.
    import sqlite3

    aw.paths.ensure()
    conn = sqlite3.connect(aw.paths.db_path)
    conn.execute("CREATE TABLE sessions (name TEXT PRIMARY KEY, profile TEXT NOT NULL,"
                 " backend TEXT NOT NULL, command TEXT NOT NULL, cwd TEXT NOT NULL,"
                 " tmux_socket TEXT, agent_pid INTEGER, supervisor_pid INTEGER,"
                 " supervisor_start TEXT, started REAL NOT NULL, state TEXT NOT NULL,"
                 " state_signal TEXT NOT NULL DEFAULT '', state_rule TEXT NOT NULL DEFAULT '',"
                 " state_reason TEXT NOT NULL DEFAULT '', state_evidence TEXT NOT NULL DEFAULT '',"
                 " state_since REAL NOT NULL, quiet_ms INTEGER NOT NULL DEFAULT 0,"
                 " draft INTEGER NOT NULL DEFAULT 0, heartbeat REAL NOT NULL, exit_code INTEGER,"
                 " ended REAL, options TEXT NOT NULL DEFAULT '{}')")
    conn.execute("INSERT INTO sessions (name, profile, backend, command, cwd, started, state,"
                 " state_since, heartbeat) VALUES ('old', 'claude', 'tmux', '[\"claude\"]', '/',"
                 " 1, 'ready', 1, 1)")
    conn.commit()
    conn.close()
    reg = aw.registry()
    try:
        assert reg.get("old").question is None
        reg.update("old", question={"id": "q", "kind": "confirm"})
        assert reg.get("old").question == {"id": "q", "kind": "confirm"}
    finally:
        reg.close()
    again = aw.registry()  # a second opening finds the column there
    again.close()
