"""One tmux server per session: a crashed server takes one agent down, not all.

tmux 3.3a segfaults on a paste into a dying pane (issue 8); on the single
shared server agentwrap used to run, that killed every supervised agent,
including unrelated sessions. Here a session's server is killed outright
(SIGKILL, as a crash would end it) and the other session must live on and
still get its messages.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from conftest import AwEnv


def server_pid(socket: Path) -> int:
    out = subprocess.run(
        ["tmux", "-S", str(socket), "display-message", "-p", "#{pid}"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip()
    return int(out)


def test_a_crashed_tmux_server_takes_down_only_its_own_session(aw: AwEnv) -> None:
    aw.start_standin("one")
    aw.start_standin("two")
    aw.wait_state("one", "ready")
    aw.wait_state("two", "ready")
    reg = aw.registry()
    try:
        sockets = {name: Path(reg.get(name).tmux_socket or "") for name in ("one", "two")}
    finally:
        reg.close()
    assert sockets == {name: aw.paths.tmux_socket_for(name) for name in ("one", "two")}
    assert server_pid(sockets["one"]) != server_pid(sockets["two"])

    os.kill(server_pid(sockets["one"]), signal.SIGKILL)  # as a segfault would end it
    aw.wait_state("one", "exited")
    # the dead server's socket file is not left behind
    aw.wait_for(lambda: not sockets["one"].exists(), what="the crashed server's socket removed")

    res = aw.cli("send", "two", "after the other server crashed", "--wait", "--timeout", "30")
    assert res.returncode == 0, res.stderr
    got = aw.received()
    assert len(got) == 1 and "after the other server crashed" in got[0]
    listed = {r["name"]: r for r in json.loads(aw.cli("ls", "--all", "--json", check=True).stdout)}
    assert listed["one"]["liveness"] == "ended" and listed["one"]["state"] == "exited"
    assert listed["two"]["liveness"] == "running"


def test_attach_adopt_and_stop_find_each_sessions_server(aw: AwEnv) -> None:
    aw.start_standin("one")
    aw.start_standin("two")
    aw.wait_state("two", "ready")
    reg = aw.registry()
    try:
        sup = reg.get("two").supervisor_pid
    finally:
        reg.close()
    assert sup is not None
    os.kill(sup, signal.SIGKILL)
    res = aw.cli("adopt", "two", check=True)
    assert "supervising two" in res.stderr
    res = aw.cli("send", "two", "after adopt", "--wait", "--timeout", "30")
    assert res.returncode == 0, res.stderr
    aw.cli("stop", "two", check=True)
    gone = subprocess.run(
        ["tmux", "-S", str(aw.paths.tmux_socket_for("two")), "has-session", "-t", "=two"],
        capture_output=True, check=False,
    )
    assert gone.returncode != 0
    assert not aw.paths.tmux_socket_for("two").exists()
    # the other session, on its own server, is untouched
    assert aw.wait_state("one", "ready").liveness == "running"


def test_a_long_session_name_still_gets_a_socket_that_fits(aw: AwEnv) -> None:
    name = "n" * 64  # the longest name agentwrap accepts
    socket = aw.paths.tmux_socket_for(name)
    assert len(os.fsencode(socket)) <= 100 and socket.parent == aw.paths.tmux_dir
    aw.start_standin(name)
    aw.wait_state(name, "ready")
    res = aw.cli("send", name, "long name", "--wait", "--timeout", "30")
    assert res.returncode == 0, res.stderr
