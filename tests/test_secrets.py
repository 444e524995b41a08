"""No secret in any process's argv, log or state file (issue 35, item 4).

A command line is every local user's to read (``ps -eo args``) for as long as
the process lives. A real session is started with sentinel values in several
environment variables (and, on PostgreSQL, in the store URL's password); then
every program the session starts is looked at: each ``execve`` of the whole
tree traced from ``agentwrap run`` on (the tmux client and its server, the
pane's launcher, the agent, the supervisor, its tmux calls; ``strace``), the
``/proc/*/cmdline`` of every process on the machine while it runs, and every
file under the session's XDG dirs. The agent must still get the values: its
own environment is read too.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import AwEnv
from support.secret_scan import (
    argv_holding,
    environ_of,
    files_holding,
    sentinels,
    strace_argv,
    token,
    tokens,
    trace_holding,
)
from support.waiting import wait_for

from agentwrap.sessions import channels
from agentwrap.terminal.pty import PtyTerminal
from agentwrap.terminal.tmux import TmuxTerminal

STANDIN = Path(__file__).resolve().parent / "support" / "standin_agent.py"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Iterator[str]:
    """The store URL (with a sentinel password on PostgreSQL: the test server trusts
    local connections and ignores it), "" for SQLite."""
    if request.param == "sqlite":
        yield ""
        return
    url: str = request.getfixturevalue("pg_url")
    yield url + f"&password={token()}"


def test_a_sessions_programs_carry_no_secret_in_their_argv(aw: AwEnv, store: str) -> None:
    values = sentinels()
    if store:
        values["AGENTWRAP_STORE_URL"] = store
    toks = tokens(values)
    assert len(toks) == len(values)
    env = {**aw.env, **values}
    trace = aw.root / "execve.trace"
    tracer = strace_argv()
    run = [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", "sa", "--profile",
           "standin", "--", *aw.standin()]
    if tracer is not None:
        run = [*tracer, "-o", str(trace), *run]
    proc = subprocess.Popen(run, env=env, cwd=aw.project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        aw.env.update(values)  # the CLI calls below use the same store
        rec = aw.wait_state("sa", "ready", timeout=90)
        agent = TmuxTerminal.adopt(Path(rec.tmux_socket or ""), "sa").agent_pid()
        assert agent is not None
        got = environ_of(agent)
        for key, value in values.items():  # the agent has exactly what the run had
            assert got[key.encode()] == value.encode()
        assert argv_holding(toks) == []
        sent = aw.cli("send", "sa", "hello", "--wait", "--timeout", "60")
        assert sent.returncode == 0, sent.stderr
        assert argv_holding(toks) == []
        assert aw.cli("stop", "sa").returncode == 0
        if tracer is not None:  # the trace ends with the last process it follows
            wait_for(lambda: proc.poll() is not None, 90, "every traced process ended")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    if tracer is not None:
        lines = trace.read_bytes().splitlines()
        assert any(b"standin_agent.py" in x and b"execve(" in x for x in lines)  # it traced
        assert any(b"tmux" in x and b"new-session" in x for x in lines)
        assert trace_holding(trace, toks) == []
        trace.unlink()
    assert files_holding(aw.root, toks) == []


def test_the_pty_backends_programs_carry_no_secret_in_their_argv(tmp_path: Path) -> None:
    values = sentinels()
    toks = tokens(values)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), **values}
    term = PtyTerminal([sys.executable, str(STANDIN), "--log", str(tmp_path / "log")],
                       env=env, cwd=tmp_path)
    try:
        wait_for(lambda: term.child.isalive() and term.child.pid, 30, "the agent")
        assert environ_of(term.child.pid)[b"OPENAI_API_KEY"] == values["OPENAI_API_KEY"].encode()
        assert argv_holding(toks) == []
    finally:
        term.close()


@pytest.mark.parametrize("agent", sorted({*channels.SHELL_HOOK_AGENTS, "codex"}))
def test_hook_commands_carry_only_agentwraps_own_variables(
        aw: AwEnv, agent: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an agent's settings run at each hook (``VAR=value exec agentwrap-hook
    ...``) and its MCP server entry name where the store is, never a value of
    the environment: each becomes the argv of a process (``env`` for Codex)."""
    values = sentinels()
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    cmd = channels.hook_command(agent, "Stop", "sa", aw.paths, sys.executable, "claude",
                                client=Path("/opt/agentwrap-hook"))
    mcp = channels.config_json("sa", aw.paths)
    assert not [t for t in tokens(values) if t.decode() in cmd or t.decode() in mcp]
    words = shlex.split(cmd)
    if agent == "codex":  # ``exec env VAR=value ...``: the assignments are argv words
        words = words[next(i for i, w in enumerate(words) if Path(w).name == "env") + 1:]
    assigned = {w.partition("=")[0] for w in words if "=" in w and not w.startswith("-")
                and w.partition("=")[0].isidentifier()}
    assert assigned <= {"AGENTWRAP_SESSION", "AGENTWRAP_PROFILE", "XDG_CONFIG_HOME",
                        "XDG_STATE_HOME", "XDG_RUNTIME_DIR"}
