"""The supervisor host: one process supervises every tmux session (issue 9).

Real tmux servers (one per session), real stand-in agents, a real host
process; crashes are real ``kill -9``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import AwEnv
from support.delivery_kit import (
    kill9,
    ls_json,
    pid_alive,
    send,
    supervisor_log,
    supervisor_pid,
    wait_terminal,
    write_config,
)

from agentwrap.message import Status
from agentwrap.sessions.host import IDLE_EXIT_ENV, idle_exit_s


def _start(aw: AwEnv, *names: str) -> None:
    for name in names:
        aw.start_standin(name)
    for name in names:
        aw.wait_state(name, "ready")


def test_one_host_supervises_every_session(aw: AwEnv) -> None:
    write_config(aw)
    _start(aw, "a", "b", "c")
    pids = {supervisor_pid(aw, n) for n in ("a", "b", "c")}
    assert len(pids) == 1
    host = pids.pop()
    assert "_host" in Path(f"/proc/{host}/cmdline").read_text()
    ids = {n: send(aw, n, f"hello {n}") for n in ("a", "b", "c")}
    for mid in ids.values():
        assert wait_terminal(aw, mid, 60).status is Status.DELIVERED
    # each session still logs to its own file
    for n in ("a", "b", "c"):
        assert "state ready" in supervisor_log(aw, n)


def test_sessions_started_at_once_share_one_host(aw: AwEnv) -> None:
    write_config(aw)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", n, "--profile",
             "standin", "--cols", "100", "--rows", "30", "--", *aw.standin()],
            env=aw.env, cwd=aw.project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for n in ("p", "q", "r", "s")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert len({supervisor_pid(aw, n) for n in ("p", "q", "r", "s")}) == 1


def test_a_killed_host_is_replaced_and_adopts_every_session(aw: AwEnv) -> None:
    write_config(aw)
    _start(aw, "a", "b")
    host = supervisor_pid(aw, "a")
    kill9(host)
    assert {r["liveness"] for r in ls_json(aw)} == {"stale"}
    # queued while nobody supervises: stored, delivered after the new host adopts
    waiting = send(aw, "b", "queued while the host was down")
    aw.cli("adopt", "a", check=True)
    new = supervisor_pid(aw, "a")
    assert new != host and pid_alive(new)
    aw.wait_for(lambda: supervisor_pid(aw, "b") == new, 20, "b adopted by the new host")
    assert wait_terminal(aw, waiting, 60).status is Status.DELIVERED
    assert sum("queued while the host was down" in t for t in aw.received()) == 1


def test_a_session_of_its_own_process_when_configured(aw: AwEnv) -> None:
    write_config(aw)
    aw.paths.config_file.write_text(
        aw.paths.config_file.read_text() + '\n[run]\nsupervisor = "process"\n'
    )
    _start(aw, "a", "b")
    pa, pb = supervisor_pid(aw, "a"), supervisor_pid(aw, "b")
    assert pa != pb
    assert "_supervise" in Path(f"/proc/{pa}/cmdline").read_text()


def test_stopping_a_session_leaves_the_others_supervised(aw: AwEnv) -> None:
    write_config(aw)
    _start(aw, "a", "b")
    host = supervisor_pid(aw, "a")
    aw.cli("stop", "a", check=True)
    assert pid_alive(host) and supervisor_pid(aw, "b") == host
    mid = send(aw, "b", "still here")
    assert wait_terminal(aw, mid, 60).status is Status.DELIVERED


def test_several_sessions_stop_together(aw: AwEnv) -> None:
    write_config(aw)
    _start(aw, "a", "b", "c")
    res = aw.cli("stop", "a", "b", "--json", check=True)
    stopped = json.loads(res.stdout)
    assert [r["name"] for r in stopped] == ["a", "b"]
    assert all(r["liveness"] == "ended" for r in stopped)
    res = aw.cli("stop", "--all", check=True)
    assert "stopped c" in res.stderr
    assert {r["liveness"] for r in ls_json(aw)} == {"ended"}
    # an unknown name stops nothing
    aw.start_standin("d")
    aw.wait_state("d", "ready")
    bad = aw.cli("stop", "d", "nosuch")
    assert bad.returncode == 3
    assert next(r for r in ls_json(aw) if r["name"] == "d")["liveness"] == "running"


def test_doctor_names_the_supervisor_host_and_its_sessions(aw: AwEnv) -> None:
    write_config(aw)
    _start(aw, "a", "b")
    host = supervisor_pid(aw, "a")
    report = json.loads(aw.cli("doctor", "--json").stdout)
    assert report["supervisors"] == {str(host): ["a", "b"]}


def test_the_idle_exit_knob_takes_only_a_number_above_zero() -> None:
    """The test-only AGENTWRAP_HOST_IDLE_EXIT_S shortens the host's idle 30 s
    (tests/test_store_migrate.py waits for that exit); anything else keeps 30."""
    assert idle_exit_s({}) == 30.0
    assert idle_exit_s({IDLE_EXIT_ENV: "5"}) == 5.0
    assert idle_exit_s({IDLE_EXIT_ENV: "0.5"}) == 0.5
    for bad in ("", "0", "-1", "nan", "inf", "five"):
        assert idle_exit_s({IDLE_EXIT_ENV: bad}) == 30.0, bad
