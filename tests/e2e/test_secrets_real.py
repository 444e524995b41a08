"""No secret in any process's argv, with the real agents and their native
channels running (issue 35, item 4).

``tests/test_secrets.py`` proves it with the stand-in agent. Here the
programs are the real ones: Claude Code 2.1.332 with agentwrap's hooks
registered (the native ``agentwrap-hook`` runs at each event, the shell
``sh -c`` of each hook command before it) and its MCP server entry (``python
-m agentwrap mcp``, Claude's child), and Codex 0.169.0 on the private
``codex app-server`` agentwrap launches for the session (with the person's
``codex_hook_trust = "bypass"``: its hook commands run too, through ``env``,
whose assignments are argv words). Each is started with sentinel values in
its secret variables (the key the model server gets among them); a queued
message is delivered and the turn it starts runs a tool. Meanwhile: every
``execve`` of the whole tree from ``agentwrap run`` on is traced (``strace
-f``: the tmux client and server, the supervisor, the agent, its hooks, the
MCP server, the app-server and what it runs), every process's
``/proc/PID/cmdline`` on the machine is read over and over, and after the
stop every file under the session's XDG dirs. No token may be in any of
them; the agent's own environment (and the app-server's) holds each value,
and the model server got the key in a header.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from support.secret_scan import (
    ArgvWatch,
    environ_of,
    execs,
    files_holding,
    sentinels,
    strace_argv,
    token,
    tokens,
    trace_holding,
)
from support.waiting import wait_for

from agentwrap.terminal.tmux import TmuxTerminal

from .conftest import AgentSession
from .model_server import TOOL_COMMAND, TOOL_FILE

Make = Callable[..., AgentSession]

#: The variables under which each session keeps its state (agentwrap's and the agent's).
XDG = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "XDG_DATA_HOME")


class Traced:
    """``agentwrap run --detach`` of ``s`` under ``strace -f`` (every execve of
    the tree to ``trace``), started with ``values`` in its environment."""

    def __init__(self, s: AgentSession, values: dict[str, str], trace: Path) -> None:
        tracer = strace_argv()
        if tracer is None:
            pytest.fail("strace is not installed: `apt-get install strace`")
        s.env.update(values)  # the CLI calls of the test have them too, as a person's would
        self.s, self.trace, self.toks = s, trace, tokens(values)
        assert len(self.toks) == len(values)
        run = [sys.executable, "-m", "agentwrap", "run", "--detach", "--name", s.name, "--cwd",
               str(s.workdir), "--", *s.argv]
        self.proc = subprocess.Popen([*tracer, "-o", str(trace), *run], env=s.env, cwd=s.workdir,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def agent_pid(self) -> int:
        pid = TmuxTerminal.adopt(Path(self.s.socket), self.s.name).agent_pid()
        assert pid is not None
        return pid

    def stop(self) -> list[bytes]:
        """Stop the session, wait for the last traced process to end (the trace
        is whole then), and give back the trace's execve lines."""
        try:
            res = self.s.cli("stop", self.s.name)
            assert res.returncode == 0, res.stderr
            wait_for(lambda: self.proc.poll() is not None, 120, "every traced process ended",
                     on_timeout=lambda: self.trace.read_text(errors="replace")[-3000:])
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.communicate()
        return execs(self.trace)

    def files_holding(self) -> list[str]:
        return [f for var in XDG for f in files_holding(Path(self.s.env[var]), self.toks)]

    def model_got(self, value: str) -> bool:
        """The model server got ``value`` in a request header (the agent used it)."""
        return any(value in v for r in self.s.server.requests() for v in r.headers.values())


def _hook_runs(lines: list[bytes], client: str, event: str) -> int:
    """How many times the native hook client was executed for ``event``."""
    return sum(1 for x in lines if x.split(b"(", 1)[0].endswith(b"execve")
               and client.encode() in x.split(b",", 1)[0] and f'"{event}"'.encode() in x)


def _why(s: AgentSession, res: subprocess.CompletedProcess[str]) -> str:
    """What a failed ``send --wait`` leaves to look at."""
    explain = s.cli("state", s.name, "--explain").stdout
    return f"{res.stdout}{res.stderr}\n{explain}\n{s.history()}\n{s.screen()}"


def _tool_result_reached_the_model(s: AgentSession) -> bool:
    return any(r.body is not None and not r.side and any(
        k in json.dumps(r.body) for k in ("tool_result", "function_call_output"))
        for r in s.server.requests())


def test_claude_with_its_hooks_and_mcp_server_puts_no_secret_in_any_argv(
        make_session: Make, tmp_path: Path) -> None:
    s = make_session("claude")
    s.write_config("[run]\nmcp = true\n")
    readme = s.workdir / "README.md"
    readme.write_text("# scratch project for agentwrap tests\n")
    values = sentinels()
    run = Traced(s, values, tmp_path / "execve.trace")
    with ArgvWatch(run.toks) as watch:
        st = s.wait_state("ready", timeout=120)
        assert {"hooks", "mcp"} <= set(st["channels"] or []), st
        got = environ_of(run.agent_pid())
        for key, value in values.items():  # the agent has exactly what the run had
            assert got[key.encode()] == value.encode(), key
        marker = f"SE{uuid.uuid4().hex[:8]}"
        call = json.dumps({"file_path": str(readme)})
        res = s.send(f"[[call: Read {call}]] read it {marker}", "--wait", "--timeout", "120",
                     timeout=150)
        assert res.returncode == 0, _why(s, res)
        s.wait_until(lambda: _tool_result_reached_the_model(s), 90, "the Read result at the model")
        s.wait_until(lambda: s.state()["state"] == "ready", 90, "the turn's end")
        assert run.model_got(values["ANTHROPIC_AUTH_TOKEN"])
        lines = run.stop()
    print(f"claude: {watch.scans} scans of every /proc/*/cmdline, {len(lines)} execve traced")
    assert watch.scans > 0 and watch.found == []
    assert trace_holding(run.trace, run.toks) == []
    assert any(b"tmux" in x and b"new-session" in x for x in lines)  # it traced the tree
    assert any(b'"-m", "agentwrap", "mcp"' in x for x in lines)  # the MCP server ran
    for event in ("SessionStart", "UserPromptSubmit", "PostToolBatch", "Stop"):
        assert _hook_runs(lines, "agentwrap-hook", event) >= 1, event
    assert run.files_holding() == []


def test_codex_on_its_app_server_puts_no_secret_in_any_argv(
        make_session: Make, tmp_path: Path) -> None:
    s = make_session("codex")
    s.write_config('[run]\ncodex_app_server = true\ncodex_hook_trust = "bypass"\n')
    values = {**sentinels(), "AGENTWRAP_CODEX_KEY": token()}  # the provider's env_key
    run = Traced(s, values, tmp_path / "execve.trace")
    with ArgvWatch(run.toks) as watch:
        st = s.wait_state("ready", timeout=120)
        assert (st["app_server"] or "").startswith("on:"), st
        assert "hooks" in (st["channels"] or []), st
        server = int(st["app_server"].rsplit("pid ", 1)[1].rstrip(")"))
        for pid in (run.agent_pid(), server):  # the TUI, and the server that asks the model
            got = environ_of(pid)
            for key, value in values.items():
                assert got[key.encode()] == value.encode(), (pid, key)
        marker = f"SE{uuid.uuid4().hex[:8]}"
        call = json.dumps({"cmd": TOOL_COMMAND})  # in the sandbox: no question to answer
        res = s.send(f"[[call: exec_command {call}]] make the file {marker}", "--wait",
                     "--timeout", "120", timeout=150)
        assert res.returncode == 0, _why(s, res)
        s.wait_until(lambda: _tool_result_reached_the_model(s), 90, "the tool's result at the model")
        s.wait_until(lambda: s.state()["state"] == "ready", 90, "the turn's end")
        assert (s.workdir / TOOL_FILE).exists()
        assert run.model_got(values["AGENTWRAP_CODEX_KEY"])
        lines = run.stop()
    print(f"codex: {watch.scans} scans of every /proc/*/cmdline, {len(lines)} execve traced")
    assert watch.scans > 0 and watch.found == []
    assert trace_holding(run.trace, run.toks) == []
    assert any(b'"app-server"' in x for x in lines)  # the server was in the traced tree
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"):
        assert _hook_runs(lines, "agentwrap-hook", event) >= 1, event
    assert run.files_holding() == []
