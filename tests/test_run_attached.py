"""`agentwrap run` with the person's terminal attached to the tmux session.

Driven through a real pty (pexpect) the way a person uses it: keys reach the
agent, the wrapper exits with the agent's exit code, and detaching (prefix d)
leaves the agent running for `agentwrap attach`, which finds the session's
own tmux server and shows the agent's state in the status line.
"""

from __future__ import annotations

import sys

import pexpect
from conftest import AwEnv
from support.waiting import wait_for


def spawn_run(aw: AwEnv, name: str, *agent_args: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "agentwrap", "run", "--name", name, "--profile", "standin", "--",
         *aw.standin(*agent_args)],
        env=aw.env, cwd=str(aw.project), dimensions=(30, 100), timeout=60,
    )


def test_keys_reach_agent_and_exit_code_is_the_agents(aw: AwEnv) -> None:
    child = spawn_run(aw, "att", "--exit-code", "3")
    try:
        aw.wait_state("att", "ready")
        child.send("typed by a person")
        aw.wait_state("att", "draft")
        child.send("\r")
        wait_for(lambda: aw.received() == ["typed by a person"], what="the person's message")
        aw.wait_state("att", "ready")
        child.send("\x04")  # Ctrl-D on an empty box: the stand-in exits with 3
        child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close()
    assert child.exitstatus == 3
    rec = aw.registry().get("att")
    assert rec.state == "exited" and rec.exit_code == 3


def test_detach_leaves_the_agent_running(aw: AwEnv) -> None:
    child = spawn_run(aw, "det")
    try:
        aw.wait_state("det", "ready")
        child.send("\x02d")  # tmux prefix (C-b) then d: detach
        child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert aw.registry().get("det").liveness == "running"
    res = aw.cli("send", "det", "still here after detach", "--wait", "--timeout", "30")
    assert res.returncode == 0, res.stderr
    assert any("still here after detach" in t for t in aw.received())


def test_attach_finds_the_sessions_own_server_and_shows_its_state(aw: AwEnv) -> None:
    aw.start_standin("lat")
    aw.wait_state("lat", "ready")
    child = pexpect.spawn(
        sys.executable, ["-m", "agentwrap", "attach", "lat"],
        env=aw.env, cwd=str(aw.project), dimensions=(30, 100), timeout=60,
    )
    try:
        # the agent's screen (from its own tmux server) and its state at the
        # right of the status line, in whichever order tmux draws them
        wanted = ["? for shortcuts", "agentwrap: ready"]
        seen: set[int] = set()
        while len(seen) < len(wanted):
            seen.add(child.expect_exact(wanted))
        child.send("\x02d")  # detach
        child.expect(pexpect.EOF, timeout=30)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert aw.registry().get("lat").liveness == "running"
