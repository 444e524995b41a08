"""What each agent gets per launch for its native channels (agentwrap/sessions/channels.py),
and the supervisor's use of the hooks' state signals. No real CLI is needed: the
version is given, and the hook commands are run as the agents would run them."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from agentwrap.agents import gemini
from agentwrap.agents import qwen as qwen_agent
from agentwrap.config import RunConfig, load_config
from agentwrap.detect.detector import HOOK_FRESH_S, Detector, HookReading, StructuredReading
from agentwrap.detect.precedence import DIALOG_DUE_S, TURN_END_DUE_S
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.states import Signal, State
from agentwrap.errors import ConfigError
from agentwrap.paths import Paths
from agentwrap.session_options import SessionOptions
from agentwrap.sessions import channels
from agentwrap.sessions.channels import describe, plan, version_at_least
from agentwrap.sessions.signals import HookSignals, read_signal, write_signal
from agentwrap.surfaces.hooks.protocol import EVENTS
from agentwrap.terminal.screen import Snapshot

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    env = {"HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    (tmp_path / "run").mkdir(mode=0o700)
    return Paths.from_env(env).ensure()


def _plan(agent: str, paths: Paths, *, version: str = "9.9.9", run: RunConfig | None = None,
          argv: list[str] | None = None, **kw: object) -> channels.LaunchChannels:
    profile = load_profile(agent, paths)
    return plan(profile, run or RunConfig(mcp=True), paths, "s1", argv or [f"/bin/{agent}"],
                {"PATH": "/bin"}, version=version, **kw)  # type: ignore[arg-type]


def _private(path: Path) -> None:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent


def test_claude_gets_a_settings_layer_with_hooks_and_the_mcp_config(paths: Paths) -> None:
    got = _plan("claude", paths, version="2.1.197")
    assert got.channels == ["hooks", "mcp"]
    assert got.argv[0] == "--settings" and got.argv[2] == "--mcp-config"
    assert "--strict-mcp-config" not in got.argv
    settings_file, mcp_file = Path(got.argv[1]), Path(got.argv[3])
    for f in (settings_file, mcp_file):
        assert f.is_relative_to(paths.state_dir / "launch" / "s1")
        _private(f)
    settings = json.loads(settings_file.read_text())
    assert sorted(settings["hooks"]) == ["Notification", "PermissionRequest", "PostToolBatch",
                                         "SessionStart", "Stop", "UserPromptSubmit"]
    asks = settings["hooks"]["PermissionRequest"][0]["hooks"][0]["command"]
    assert "AGENTWRAP_PROFILE=claude" in asks  # answer rules match the session's profile
    command = settings["hooks"]["PostToolBatch"][0]["hooks"][0]["command"]
    assert command.endswith("-m agentwrap hook claude PostToolBatch")
    assert "AGENTWRAP_SESSION=s1" in command and f"XDG_STATE_HOME={paths.state_dir.parent}" in command
    assert settings["hooks"]["Stop"][0]["hooks"][0]["timeout"] == 10  # seconds
    allow = settings["permissions"]["allow"]
    assert "mcp__agentwrap__check_input_queue" in allow
    assert not any("send_message" in a for a in allow)
    server = json.loads(mcp_file.read_text())["mcpServers"]["agentwrap"]
    assert server["args"][-3:] == ["-m", "agentwrap", "mcp"] and server["env"]["AGENTWRAP_SESSION"] == "s1"
    assert got.env == {}
    assert got.options() == {"channels": ["hooks", "mcp"], "agent_version": "2.1.197"}


def test_claude_before_post_tool_batch_drains_at_post_tool_use(paths: Paths) -> None:
    got = _plan("claude", paths, version="2.1.150")
    settings = json.loads(Path(got.argv[1]).read_text())
    assert "PostToolUse" in settings["hooks"] and "PostToolBatch" not in settings["hooks"]



def _background(settings_file: Path) -> set[str]:
    hooks = json.loads(settings_file.read_text())["hooks"]
    return {e for e, groups in hooks.items() if groups[0]["hooks"][0].get("async")}


def test_claude_signal_hooks_run_in_the_background(paths: Paths) -> None:
    """Issue 27: the agent waits for no hook that only reports (prompt,
    notification, turn end: the session file's ``idle`` says ready first);
    hand-overs are waited for, and the permission request when an answer
    rule of the person's could answer it before the dialog opens."""
    no_rules = _plan("claude", paths, version="2.1.197", rules=False)
    assert _background(Path(no_rules.argv[1])) == {
        "UserPromptSubmit", "Notification", "Stop", "PermissionRequest"}
    rules = _plan("claude", paths, version="2.1.197", rules=True)
    assert _background(Path(rules.argv[1])) == {"UserPromptSubmit", "Notification", "Stop"}
    older = _plan("claude", paths, version="2.1.150", rules=False)  # async unknown: all waited
    assert _background(Path(older.argv[1])) == set()


def test_claude_with_its_own_settings_flag_keeps_it_and_gets_mcp_only(paths: Paths) -> None:
    got = _plan("claude", paths, argv=["/bin/claude", "--settings", "mine.json"])
    assert got.channels == ["mcp"]
    assert "hooks" not in json.loads(Path(got.argv[1]).read_text())
    assert any("--settings" in n for n in got.notes)


def test_too_old_unknown_or_turned_off_registers_nothing(paths: Paths) -> None:
    old = _plan("claude", paths, version="1.0.3")
    assert old.argv == [] and old.channels == [] and "older than" in old.notes[0]
    off = _plan("claude", paths, enabled=False)
    assert off.argv == [] and "--no-channels" in off.notes[0]
    cfg_off = _plan("claude", paths, run=RunConfig(channels=False))
    assert cfg_off.argv == []
    # aider: no hooks, no MCP; its live channel is the --read file, and its
    # notifications command marks the turn's end (issue 37)
    assert _plan("aider", paths).options() == {"channels": ["read-file", "turn-end"],
                                               "agent_version": "9.9.9"}
    assert not (paths.state_dir / "launch" / "s1" / "claude-settings.json").exists()


def test_codex_default_is_mcp_only_and_says_how_to_enable_hooks(paths: Paths) -> None:
    got = _plan("codex", paths)
    assert got.channels == ["mcp"]
    assert got.argv[0] == "-c" and len(got.argv) == 2
    assert "--dangerously-bypass-hook-trust" not in got.argv
    key, _, value = got.argv[1].partition("=")
    assert key == "mcp_servers.agentwrap"
    entry = tomllib.loads(f"x = {value}")["x"]  # what codex parses the override as
    assert entry["args"][-3:] == ["-m", "agentwrap", "mcp"]
    assert entry["env"]["AGENTWRAP_SESSION"] == "s1"
    # the read-only tools run without Codex's approval dialog; send_message still asks
    assert entry["tools"]["check_input_queue"] == {"approval_mode": "approve"}
    assert "send_message" not in entry["tools"]
    assert 'codex_hook_trust = "bypass"' in got.notes[0]


def test_codex_bypass_registers_hooks_with_the_flag(paths: Paths) -> None:
    got = _plan("codex", paths, run=RunConfig(codex_hook_trust="bypass", mcp=True))
    assert got.channels == ["hooks", "mcp"]
    assert got.argv[-1] == "--dangerously-bypass-hook-trust"
    hooks = {}
    for i, a in enumerate(got.argv):
        if a == "-c" and got.argv[i + 1].startswith("hooks."):
            key, _, value = got.argv[i + 1].partition("=")
            hooks[key] = tomllib.loads(f"x = {value}")["x"]
    assert sorted(hooks) == ["hooks.PermissionRequest", "hooks.PostToolUse",
                             "hooks.SessionStart", "hooks.Stop", "hooks.UserPromptSubmit"]
    h = hooks["hooks.PostToolUse"][0]["hooks"][0]
    assert h["type"] == "command" and h["timeout"] == 10
    assert h["command"].endswith("-m agentwrap hook codex PostToolUse")
    # issue 27: the prompt's hook only reports; Codex would hold the request for it
    assert {k for k, v in hooks.items() if v[0]["hooks"][0].get("async")} == \
        {"hooks.UserPromptSubmit"}


def test_codex_hook_trust_is_the_users_own_decision(tmp_path: Path, paths: Paths) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".git").mkdir()
    (project / ".agentwrap.toml").write_text('[run]\ncodex_hook_trust = "bypass"\n')
    with pytest.raises(ConfigError, match="codex_hook_trust may only be set in your own"):
        load_config(paths, project)
    (project / ".agentwrap.toml").write_text('[profiles.codex.run]\ncodex_hook_trust = "bypass"\n')
    with pytest.raises(ConfigError, match="your own config"):
        load_config(paths, project)
    (project / ".agentwrap.toml").unlink()
    paths.config_file.write_text('[run]\ncodex_hook_trust = "yes"\n')
    with pytest.raises(ConfigError, match="off, bypass"):
        load_config(paths, project)
    paths.config_file.write_text('[run]\ncodex_hook_trust = "bypass"\n')
    assert load_config(paths, project).run.codex_hook_trust == "bypass"


def test_gemini_without_root_gets_nothing_and_says_why(paths: Paths) -> None:
    got = _plan("gemini", paths, euid=1000)
    assert got.argv == [] and got.env == {} and got.channels == []
    assert "root" in got.notes[0]


def test_gemini_leaves_a_system_defaults_path_of_the_persons_alone(paths: Paths) -> None:
    profile = load_profile("gemini", paths)
    got = plan(profile, RunConfig(mcp=True), paths, "s1", ["/bin/gemini"],
               {"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": "/etc/mine.json"}, version="0.61.0", euid=0)
    assert got.env == {} and "already set" in got.notes[0]


def test_gemini_as_root_gets_a_root_private_settings_file(
    paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "runroot" / "agentwrap"
    run_dir.parent.mkdir()
    monkeypatch.setattr(gemini, "ROOT_RUN_DIR", run_dir)
    chain: dict[str, str | None] = {}

    def fake_chain(path: Path) -> str | None:  # the state dir under /tmp is not root-private
        return chain.get(str(path)) if str(path) != str(paths.state_dir) else "tmp"

    monkeypatch.setattr(gemini, "root_private_chain", fake_chain)
    got = _plan("gemini", paths, euid=0, version="0.61.0")
    assert got.channels == ["hooks", "mcp"] and got.argv == []
    path = Path(got.env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"])
    assert path.parent.parent == run_dir and path.parent.name.endswith("-s1")
    _private(path)
    data = json.loads(path.read_text())
    assert data["hooksConfig"] == {"enabled": True}
    # issue 27: not BeforeAgent, which Gemini waits for between Enter and its request
    assert sorted(data["hooks"]) == ["AfterAgent", "AfterTool", "Notification", "SessionStart"]
    assert set(data["hooks"]) | set(gemini.SKIPPED) == set(EVENTS["gemini"])
    assert data["hooks"]["AfterTool"][0]["hooks"][0]["timeout"] == 10_000  # milliseconds
    assert data["mcpServers"]["agentwrap"]["env"]["AGENTWRAP_SESSION"] == "s1"
    assert "mcp_agentwrap_check_input_queue" in data["tools"]["allowed"]
    assert "mcp_agentwrap_send_message" not in data["tools"]["allowed"]


def test_root_private_chain_refuses_tmp(tmp_path: Path) -> None:
    assert gemini.root_private_chain(tmp_path) is not None
    assert gemini.root_private_chain(Path("/")) in (None, "/ is owned by uid 0, not root")


def test_versions() -> None:
    assert channels.parse_version("2.1.197 (Claude Code)") == (2, 1, 197)
    assert channels.parse_version("codex-cli 0.169.0") == (0, 169, 0)
    assert version_at_least("2.1.197", "2.1.197") and version_at_least("2.2", "2.1.197")
    assert not version_at_least("2.1.9", "2.1.197") and not version_at_least("x", "1.0")
    assert version_at_least("whatever", "")


def test_version_probe_runs_once_per_executable(paths: Paths, tmp_path: Path) -> None:
    exe = tmp_path / "fakeagent"
    count = tmp_path / "count"
    exe.write_text(f"#!/bin/sh\necho x >> {count}\necho 'fakeagent 1.2.3'\n")
    exe.chmod(0o755)
    assert channels.probe_version(str(exe), "--version", paths) == "1.2.3"
    assert channels.probe_version(str(exe), "--version", paths) == "1.2.3"
    assert count.read_text().count("x") == 1
    _private(paths.state_dir / "agent-versions.json")


def test_a_slow_version_probe_is_waited_for(paths: Paths, tmp_path: Path) -> None:
    """Cline's and Kimi's --version took up to 18 s on a loaded machine: a probe
    cut short at 15 s registered no channel for that launch. The default deadline
    is above that worst case, and a probe is waited for up to its deadline, not
    less (scaled down here: a 1 s probe under a 4 s deadline, not 17 s under 45)."""
    assert channels.VERSION_TIMEOUT_S >= 2 * 18
    exe = tmp_path / "slowagent"
    exe.write_text("#!/bin/sh\nsleep 1\necho 'slowagent 3.0.65'\n")
    exe.chmod(0o755)
    assert channels.probe_version(str(exe), "--version", paths, timeout=4) == "3.0.65"
    slower = tmp_path / "slower"
    slower.write_text("#!/bin/sh\nsleep 3\necho 'slower 3.0.65'\n")
    slower.chmod(0o755)
    assert channels.probe_version(str(slower), "--version", paths, timeout=1) is None


def test_registered_hook_command_runs_the_handler(paths: Paths) -> None:
    """The command string, run by a shell as the agents run it, writes the signal."""
    got = _plan("claude", paths, version="2.1.197")
    command = json.loads(Path(got.argv[1]).read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    payload = json.dumps({"hook_event_name": "Stop", "session_id": "x"})
    done = subprocess.run(["sh", "-c", command], input=payload, env=env, capture_output=True,
                          text=True, timeout=30, cwd=paths.state_dir)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    sig = read_signal(paths, "s1")
    assert sig is not None and sig.signal == "turn_end" and sig.agent == "claude"


def test_the_hook_command_is_the_one_process_the_agent_starts(
    tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    """Issue 27: the agent waits for every process its hook starts. The shell
    the agent runs the command with becomes the hook client (``exec``: Debian's
    dash would fork it and wait), with the variables as the shell's own
    assignments (no ``env`` exec between) for the agents that run a POSIX
    shell; Codex, which runs the person's $SHELL, keeps ``exec env``. A value
    with a space stays one value."""
    base = Path(tempfile.mkdtemp(prefix="aw s", dir="/tmp"))  # short: the socket's path
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    env = {"HOME": str(base), "XDG_STATE_HOME": str(base / "state"),
           "XDG_CONFIG_HOME": str(base / "config"), "XDG_RUNTIME_DIR": str(base / "run")}
    (base / "run").mkdir(parents=True, mode=0o700)
    spaced = Paths.from_env(env).ensure()
    client = tmp_path / "client"  # stands for agentwrap-hook: says who it is and what it got
    client.write_text("#!/bin/sh\necho \"$PPID|$AGENTWRAP_SESSION|$AGENTWRAP_PROFILE|"
                      "$XDG_STATE_HOME|$*\"\n")
    client.chmod(0o755)
    for agent in [*sorted(channels.SHELL_HOOK_AGENTS), "codex"]:
        cmd = channels.hook_command(agent, "Stop", "s1", spaced, sys.executable, agent, client)
        words = shlex.split(cmd)
        if agent == "codex":
            assert words[:2] == ["exec", shutil.which("env") or "/usr/bin/env"], cmd
        else:
            assert words[0] == "AGENTWRAP_SESSION=s1" and "exec" in words, (agent, cmd)
            assert not any(Path(w).name == "env" for w in words), (agent, cmd)
        for shell in ("sh", "bash"):
            done = subprocess.run([shell, "-c", cmd], capture_output=True, text=True, timeout=30,
                                  env={"PATH": "/usr/bin:/bin"}, check=True)
            parent, session, profile, state, args = done.stdout.strip().split("|")
            assert int(parent) == os.getpid(), (agent, shell, "the shell did not become it")
            assert (session, profile, state) == ("s1", agent, str(base / "state")), (agent, shell)
            assert args.startswith(f"1 {channels.hook_socket(spaced, 's1')} {agent} Stop -- ")


def test_describe() -> None:
    assert describe(SessionOptions()).startswith("typing only")
    assert describe(SessionOptions(channels=("hooks", "mcp"))) == "typing, hooks, mcp"
    assert describe(SessionOptions(channels=("mcp",), channel_notes=("hooks: no",))) == \
        "typing, mcp (hooks: no)"


# --- the supervisor's side: signals as a state stronger than the screen ------------------


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class FakeHooks:
    def __init__(self) -> None:
        self.reading: HookReading | None = None

    def read(self) -> HookReading | None:
        return self.reading


def _claude_screen(box: str = "", busy: bool = False) -> Snapshot:
    rule = "─" * 60
    spinner = "✻ Thinking… (esc to interrupt)\n" if busy else ""
    footer = "esc to interrupt" if busy else "? for shortcuts"
    return Snapshot.from_text(f"● hi\n{spinner}{rule}\n❯ {box}\n{rule}\n  {footer}\n",
                              cols=80, rows=12)


def test_a_fresh_hook_signal_decides_and_a_newer_screen_wins(tmp_path: Path) -> None:
    clock, hooks = Clock(), FakeHooks()
    profile = load_profile("claude", Paths.from_env({"HOME": str(tmp_path)}))
    det = Detector(profile, clock=clock, hooks=hooks)
    busy = _claude_screen(busy=True)
    det.update(busy)
    clock.t += 2.0
    assert det.update(busy).signal is Signal.SCREEN
    # the turn ended (Stop) 0.1 s ago, but the spinner line is still drawn: the
    # screen does not agree yet (issue 37: keys wait for it), busy by the hook ...
    hooks.reading = HookReading(State.READY, "claude hook Stop: turn end", 0.1)
    r = det.update(busy)
    assert (r.state, r.signal, r.rule) == (State.BUSY, Signal.HOOK, "hook:draw-due"), r
    # ... for at most TURN_END_DUE_S: then the still line is a leftover, ready by the hook
    clock.t += TURN_END_DUE_S
    hooks.reading = HookReading(State.READY, "claude hook Stop: turn end", 0.1 + TURN_END_DUE_S)
    r = det.update(busy)
    assert (r.state, r.signal, r.rule) == (State.READY, Signal.HOOK, "hook"), r
    assert "Stop" in r.reason
    # the screen changes well after the signal: the screen decides again
    clock.t += 3.0
    hooks.reading = HookReading(State.READY, "claude hook Stop: turn end", 3.1)
    typed = _claude_screen(box="half a thought")
    r = det.update(typed)
    assert r.signal is not Signal.HOOK
    # a permission question not drawn yet: expected (busy, nothing typed; issue 37),
    # then, its dialog never drawn as the profile knows it, waiting_input
    ready = _claude_screen()
    det.update(ready)
    clock.t += 1.0
    hooks.reading = HookReading(State.WAITING_INPUT, "claude hook Notification", 0.2)
    r = det.update(ready)
    assert (r.state, r.rule) == (State.BUSY, "hook:dialog-due"), r
    clock.t += DIALOG_DUE_S
    hooks.reading = HookReading(State.WAITING_INPUT, "claude hook Notification", 0.2 + DIALOG_DUE_S)
    assert det.update(ready).state is State.WAITING_INPUT
    # too old: ignored however still the screen is
    hooks.reading = HookReading(State.BUSY, "claude hook UserPromptSubmit", HOOK_FRESH_S + 1)
    clock.t += HOOK_FRESH_S + 2
    assert det.update(ready).signal is not Signal.HOOK


def test_a_turn_end_is_ready_at_once_unless_the_screen_contradicts_it(tmp_path: Path) -> None:
    """Issue 27: the hook *is* the agent saying its turn ended, so no quiet
    window (the screen has just changed: the reply was drawn); only a spinner
    still moving, or the person's text in the box, contradicts it."""
    clock, hooks = Clock(), FakeHooks()
    profile = load_profile("claude", Paths.from_env({"HOME": str(tmp_path)}))
    det = Detector(profile, clock=clock, hooks=hooks)
    det.update(_claude_screen())
    clock.t += 1.0
    assert det.update(_claude_screen()).state is State.READY  # seen ready once
    det.update(_claude_screen(busy=True))  # a turn runs
    clock.t += 0.01
    hooks.reading = HookReading(State.READY, "claude hook Stop: turn end", 0.0)
    # the spinner is still drawn and the screen moves: busy, whatever the hook says
    spinning = Snapshot.from_text(_claude_screen(busy=True).text().replace("Thinking", "Pondering"),
                                  cols=80, rows=12)
    r = det.update(spinning)
    assert (r.state, r.signal) == (State.BUSY, Signal.HOOK), r
    assert "changed 0 ms ago" in r.reason
    # the agent redraws its idle prompt: ready at once, though it changed just now
    clock.t += 0.01
    hooks.reading = HookReading(State.READY, "claude hook Stop: turn end", 0.02)
    r = det.update(_claude_screen())
    assert (r.state, r.signal, r.quiet_ms) == (State.READY, Signal.HOOK, 0), r
    # a busy line on a still screen: the turn's end said before the screen agrees,
    # busy (issue 37) till TURN_END_DUE_S; then a line the redraw left: the hook wins
    clock.t += profile.quiet_ms / 1000 + 0.05
    hooks.reading = HookReading(State.READY, "claude hook Stop: turn end", 0.4)
    det.update(_claude_screen(busy=True))
    clock.t += profile.quiet_ms / 1000 + 0.05
    r = det.update(_claude_screen(busy=True))
    assert (r.state, r.signal, r.rule) == (State.BUSY, Signal.HOOK, "hook:draw-due"), r
    clock.t += TURN_END_DUE_S
    hooks.reading = HookReading(State.READY, "claude hook Stop: turn end", 0.4 + TURN_END_DUE_S)
    r = det.update(_claude_screen(busy=True))
    assert (r.state, r.signal) == (State.READY, Signal.HOOK), r
    # the person's text in the box, just typed: a draft, kept
    clock.t += 0.01
    hooks.reading = HookReading(State.READY, "claude hook Stop: turn end", 0.05)
    r = det.update(_claude_screen(box="x"))
    assert (r.state, r.signal) == (State.DRAFT, Signal.HOOK), r



def test_a_prompt_typed_and_sent_after_a_turn_end_is_not_ready_by_that_end(
    tmp_path: Path,
) -> None:
    """Issue 27: Gemini's prompt start sends no signal (BeforeAgent is not
    registered), so the last turn's end is the latest word when the next prompt
    is sent right after it (a message agentwrap typed at ``ready``): text seen in
    the box since that end, now gone, means a prompt went; the screen decides
    (an empty box that just changed: busy), not the old turn end."""
    clock, hooks = Clock(), FakeHooks()
    profile = load_profile("gemini", Paths.from_env({"HOME": str(tmp_path)}))
    det = Detector(profile, clock=clock, hooks=hooks)
    box = "▄" * 40 + "\n > {}\n" + "▀" * 40 + "\n"
    empty = Snapshot.from_text(box.format("  Type your message or @path/to/file"), cols=80, rows=12)
    det.update(empty)
    clock.t += 1.0
    assert det.update(empty).state is State.READY
    hooks.reading = HookReading(State.READY, "gemini hook AfterAgent: turn end", 0.0)
    assert det.update(empty).signal is Signal.HOOK
    clock.t += 0.2
    hooks.reading = HookReading(State.READY, "gemini hook AfterAgent: turn end", 0.2)
    typed = Snapshot.from_text(box.format("the next message"), cols=80, rows=12)
    assert det.update(typed).state is State.DRAFT
    clock.t += 0.1  # Enter: the box empties, Gemini has not drawn its spinner yet
    hooks.reading = HookReading(State.READY, "gemini hook AfterAgent: turn end", 0.3)
    sent = Snapshot.from_text("> the next message\n" + box.format(""), cols=80, rows=12)
    r = det.update(sent)
    # busy: by the screen's submitted-prompt rule (issue 37), the box's text just went
    assert (r.state, r.rule) == (State.BUSY, "empty-box:submitted"), r
    # the next turn's end, newer than the text: ready at once again
    clock.t += 0.5
    hooks.reading = HookReading(State.READY, "gemini hook AfterAgent: turn end", 0.0)
    assert det.update(empty).signal is Signal.HOOK


class FakePublished:
    """The agent's published state (Claude's session file), as the detector reads it."""

    def __init__(self) -> None:
        self.reading: StructuredReading | None = None

    def read(self) -> StructuredReading | None:
        return self.reading

    def stamp(self) -> float | None:
        return None


def test_the_agents_newer_published_state_wins_over_an_older_hook_signal(tmp_path: Path) -> None:
    """Issue 27: Claude writes its session file's ``idle`` as its turn ends and
    starts its (background) Stop hook only later: the prompt's ``busy`` signal,
    older than that file, must not hold ``ready`` back. Mid-turn the file says
    ``busy`` (or is older than the signal): the hook's busy holds."""
    clock, hooks, published = Clock(), FakeHooks(), FakePublished()
    profile = load_profile("claude", Paths.from_env({"HOME": str(tmp_path)}))
    det = Detector(profile, clock=clock, hooks=hooks, structured=published)
    det.update(_claude_screen())
    clock.t += 1.0
    # the previous turn's idle, older than this turn's prompt signal: busy holds
    published.reading = StructuredReading(State.READY, "claude session file says 'idle'", 5.0)
    hooks.reading = HookReading(State.BUSY, "claude hook UserPromptSubmit: prompt submitted", 1.0)
    r = det.update(_claude_screen())
    assert (r.state, r.signal) == (State.BUSY, Signal.HOOK), r
    # mid-turn, between tool calls: the file says busy, written after the signal
    published.reading = StructuredReading(State.BUSY, "claude session file says 'busy'", 0.5)
    r = det.update(_claude_screen())
    assert r.state is State.BUSY, r
    # the turn ended: idle written after the prompt's signal, before any Stop signal
    clock.t += 0.01
    published.reading = StructuredReading(State.READY, "claude session file says 'idle'", 0.02)
    r = det.update(_claude_screen())
    assert (r.state, r.signal) == (State.READY, Signal.STRUCTURED), r
    # the Stop signal that follows says the same, as the newer word
    hooks.reading = HookReading(State.READY, "claude hook Stop: turn end", 0.0)
    r = det.update(_claude_screen())
    assert (r.state, r.signal) == (State.READY, Signal.HOOK), r
    # a file of unknown age never outweighs a fresh signal
    hooks.reading = HookReading(State.BUSY, "claude hook UserPromptSubmit: prompt submitted", 1.0)
    published.reading = StructuredReading(State.READY, "claude session file says 'idle'")
    assert det.update(_claude_screen()).state is State.BUSY


def test_a_signal_never_replaces_one_of_a_later_event(paths: Paths) -> None:
    """Hooks may finish in another order than the agent's events (run in the
    background, or by the hook server's threads): a prompt's signal stamped
    with its hook's start never overwrites the turn end that came after it."""
    t = time.time()
    write_signal(paths, "s1", "turn_end", source="hook", agent="claude", event="Stop", now=t)
    late = write_signal(paths, "s1", "prompt_submitted", source="hook", agent="claude",
                        event="UserPromptSubmit", now=t - 0.2)
    assert late is None
    got = read_signal(paths, "s1")
    assert got is not None and got.signal == "turn_end"
    write_signal(paths, "s1", "prompt_submitted", source="hook", agent="claude",
                 event="UserPromptSubmit", now=t + 0.1)  # the next turn
    got = read_signal(paths, "s1")
    assert got is not None and got.signal == "prompt_submitted"


def test_a_hook_process_is_stamped_with_its_start(paths: Paths, tmp_path: Path) -> None:
    """The Python hook stamps its signal with when the agent started it, not
    when it got round to writing (Python's start alone is ~50 ms)."""
    from agentwrap.terminal.proctree import started_at

    mine = started_at()
    assert mine is not None and mine <= time.time()
    assert started_at(2**22 + 7) is None  # no such process
    env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(paths.state_dir.parent),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_RUNTIME_DIR": str(tmp_path / "run"),
           "AGENTWRAP_SESSION": "s1", "AGENTWRAP_HOOK_CLIENT": "python"}
    before = time.time()
    subprocess.run([sys.executable, "-c", "import time; time.sleep(1.0); import runpy;"
                    " runpy.run_module('agentwrap', run_name='__main__')", "hook", "claude", "Stop"],
                   input=json.dumps({"hook_event_name": "Stop"}).encode(), env=env, check=True,
                   timeout=60)
    got = read_signal(paths, "s1")
    assert got is not None and got.signal == "turn_end"
    assert before - 0.05 <= got.at < before + 0.9  # its start, not after the 1 s sleep


def test_hook_signals_ignore_an_earlier_launch(paths: Paths) -> None:
    write_signal(paths, "s1", "turn_end", source="hook", agent="claude", event="Stop",
                 now=time.time() - 5)
    assert HookSignals(paths, "s1", since=time.time()).read() is None
    fresh = HookSignals(paths, "s1", since=time.time() - 60)
    got = fresh.read()
    assert got is not None and got.state is State.READY and 4 < got.age_s < 30
    write_signal(paths, "s1", "permission_prompt", source="hook", agent="gemini",
                 event="Notification", detail="Allow?")
    got = fresh.read()
    assert got is not None and got.state is State.WAITING_INPUT and "Allow?" in got.reason


def test_mcp_is_registered_only_when_the_user_turns_it_on(paths: Paths) -> None:
    got = _plan("claude", paths, version="2.1.197", run=RunConfig())
    assert got.channels == ["hooks"] and "--mcp-config" not in got.argv
    assert any("[run] mcp = true" in n for n in got.notes)


def test_an_ended_sessions_launch_files_are_removed(paths: Paths) -> None:
    got = _plan("claude", paths)
    folder = channels.launch_dir(paths, "s1")
    assert got.files and all(f.parent == folder for f in got.files)
    assert channels.remove_launch_files(paths, "s1") == [folder]
    assert not folder.exists()
    assert channels.remove_launch_files(paths, "s1") == []  # nothing left: nothing to do


def _qwen_home(tmp_path: Path, settings: object) -> Path:
    """A person's ~/.qwen: settings.json, credentials and a memory dir."""
    own = tmp_path / "person" / ".qwen"
    (own / "memory").mkdir(parents=True)
    (own / "memory" / "notes.md").write_text("remember me\n")
    (own / "oauth_creds.json").write_text("{}\n")
    if settings is not None:
        (own / "settings.json").write_text(
            settings if isinstance(settings, str) else json.dumps(settings))
    return own


def _plan_qwen(paths: Paths, env: dict[str, str]) -> channels.LaunchChannels:
    return plan(load_profile("qwen", paths), RunConfig(), paths, "s1", ["/bin/qwen"],
                {"PATH": "/bin", **env}, version="0.15.10")


def test_qwen_gets_a_private_home_with_its_hooks_beside_the_persons(
    paths: Paths, tmp_path: Path,
) -> None:
    """Qwen Code runs hooks from the user's settings.json only: the launch gets
    a private QWEN_HOME holding a copy of it with agentwrap's hooks after the
    person's own, the rest of their Qwen dir linked; nothing of theirs changes."""
    mine = {"$version": 4, "model": {"name": "m"},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "my-stop"}]}],
                      "PreToolUse": [{"hooks": [{"type": "command", "command": "my-pre"}]}]}}
    own = _qwen_home(tmp_path, mine)
    before = (own / "settings.json").read_bytes()
    got = _plan_qwen(paths, {"HOME": str(tmp_path / "person")})
    assert got.channels == ["hooks"] and got.argv == []
    private = Path(got.env["QWEN_HOME"])
    assert private == channels.launch_dir(paths, "s1") / "qwen-home"
    assert got.env["QWEN_RUNTIME_DIR"] == str(own)  # sessions and logs stay where they were
    _private(private / "settings.json")
    data = json.loads((private / "settings.json").read_text())
    assert data["model"] == {"name": "m"}
    assert sorted(data["hooks"]) == sorted([*channels.HOOK_EVENTS["qwen"], "PreToolUse"])
    assert data["hooks"]["Stop"][0]["hooks"][0]["command"] == "my-stop"  # theirs first
    ours = data["hooks"]["Stop"][1]["hooks"][0]
    assert " hook qwen Stop" in ours["command"] and "AGENTWRAP_SESSION=s1" in ours["command"]
    assert ours["timeout"] == 10_000  # milliseconds
    assert data["hooks"]["PreToolUse"] == mine["hooks"]["PreToolUse"]  # kept as it was
    assert (private / "memory").is_symlink() and (private / "memory").resolve() == own / "memory"
    assert (private / "oauth_creds.json").resolve() == own / "oauth_creds.json"
    assert (own / "settings.json").read_bytes() == before
    assert "settings changed in this session are not kept" in describe(SessionOptions.from_json(got.options()))
    # the session ends: the private home goes, the person's dir is untouched
    assert channels.remove_launch_files(paths, "s1") == [channels.launch_dir(paths, "s1")]
    assert (own / "memory" / "notes.md").read_text() == "remember me\n"
    assert (own / "oauth_creds.json").exists() and (own / "settings.json").read_bytes() == before


def test_qwens_signal_hooks_run_in_the_background(paths: Paths, tmp_path: Path) -> None:
    """Issue 27: Qwen Code 0.15.10 runs an ``"async": true`` hook in the
    background. The hooks that only report (a prompt, the turn's end, a
    notification) are registered so: it runs UserPromptSubmit before every
    request of a turn, each tool step's too; the hand-over (PostToolUse), a
    rule's answer (PermissionRequest) and the start's context are waited for.
    Without ``async_hooks_since`` every hook is waited for."""
    _qwen_home(tmp_path, {"$version": 4})
    qwen = load_profile("qwen", paths)
    older = dataclasses.replace(qwen, channels=dataclasses.replace(qwen.channels,
                                                                   async_hooks_since=""))
    for profile, background in ((qwen, qwen_agent.SIGNAL_EVENTS), (older, set())):
        got = plan(profile, RunConfig(), paths, "s1", ["/bin/qwen"],
                   {"PATH": "/bin", "HOME": str(tmp_path / "person")}, version="0.15.10")
        hooks = json.loads((Path(got.env["QWEN_HOME"]) / "settings.json").read_text())["hooks"]
        marked = {e for e, groups in hooks.items() if groups[-1]["hooks"][0].get("async")}
        assert marked == set(background), profile.channels
    assert {"UserPromptSubmit", "Stop", "Notification"} == qwen_agent.SIGNAL_EVENTS


def test_qwen_keeps_the_persons_qwen_home_and_runtime_dir(paths: Paths, tmp_path: Path) -> None:
    own = _qwen_home(tmp_path, {"advanced": {"runtimeOutputDir": "/elsewhere"}})
    got = _plan_qwen(paths, {"HOME": "/nowhere", "QWEN_HOME": str(own)})
    assert (Path(got.env["QWEN_HOME"]) / "memory").resolve() == own / "memory"
    assert "QWEN_RUNTIME_DIR" not in got.env  # their own setting decides
    got = _plan_qwen(paths, {"HOME": "/nowhere", "QWEN_HOME": str(own),
                             "QWEN_RUNTIME_DIR": "/theirs"})
    assert "QWEN_RUNTIME_DIR" not in got.env


@pytest.mark.parametrize(("settings", "why"), [
    (None, "does not exist yet"),
    ("{ // a comment\n}", "could not be read as JSON"),
    ({"disableAllHooks": True}, "turns hooks off"),
    ([1, 2], "not a JSON object"),
])
def test_qwen_without_usable_settings_registers_nothing(
    paths: Paths, tmp_path: Path, settings: object, why: str,
) -> None:
    _qwen_home(tmp_path, settings)
    got = _plan_qwen(paths, {"HOME": str(tmp_path / "person")})
    assert got.channels == [] and got.env == {} and got.files == []
    assert why in " ".join(got.notes) and not channels.launch_dir(paths, "s1").exists()


def test_copilot_gets_a_plugin_of_its_hooks_for_this_launch_only(
    paths: Paths, tmp_path: Path,
) -> None:
    """Copilot CLI loads a plugin with ``--plugin-dir`` for one launch: its
    manifest and hooks/hooks.json (Copilot's own format, timeouts in seconds)
    in the private launch dir; the person's ~/.copilot and repo are not touched."""
    home = tmp_path / "person"
    (home / ".copilot" / "hooks").mkdir(parents=True)
    (home / ".copilot" / "hooks" / "mine.json").write_text('{"version": 1, "hooks": {}}')
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    got = plan(load_profile("copilot", paths), RunConfig(), paths, "s1", ["/bin/copilot"],
               {"PATH": "/bin", "HOME": str(home)}, version="1.0.102")
    assert got.channels == ["hooks"] and got.env == {}
    plugin = channels.launch_dir(paths, "s1") / "copilot-plugin"
    assert got.argv == ["--plugin-dir", str(plugin)]
    assert got.files == [plugin / "plugin.json", plugin / "hooks" / "hooks.json"]
    for f in got.files:
        _private(f)
    for d in (channels.launch_dir(paths, "s1"), plugin, plugin / "hooks"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert json.loads((plugin / "plugin.json").read_text())["name"] == "agentwrap"
    data = json.loads((plugin / "hooks" / "hooks.json").read_text())
    assert data["version"] == 1
    assert list(data["hooks"]) == list(channels.HOOK_EVENTS["copilot"])
    assert set(channels.HOOK_EVENTS["copilot"]) == set(EVENTS["copilot"])
    [hook] = data["hooks"]["postToolUse"]  # a flat list: no matcher groups
    assert sorted(hook) == ["bash", "timeoutSec", "type"] and hook["type"] == "command"
    assert hook["timeoutSec"] == 10  # seconds
    assert " hook copilot postToolUse" in hook["bash"] and "AGENTWRAP_SESSION=s1" in hook["bash"]
    assert "AGENTWRAP_PROFILE=copilot" in hook["bash"]
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before
    assert channels.remove_launch_files(paths, "s1") == [channels.launch_dir(paths, "s1")]
    # a dry run (doctor) says the same and writes nothing
    dry = plan(load_profile("copilot", paths), RunConfig(), paths, "s1", ["/bin/copilot"],
               {"PATH": "/bin"}, version="1.0.102", dry_run=True)
    assert dry.argv == got.argv and dry.channels == ["hooks"]
    assert not channels.launch_dir(paths, "s1").exists()


def _mcp_entry(entry: dict[str, object], paths: Paths) -> None:
    """A server entry that starts ``python -m agentwrap mcp`` for session s1 of this store."""
    assert entry["args"][-3:] == ["-m", "agentwrap", "mcp"]  # type: ignore[index]
    env = entry["env"]
    assert isinstance(env, dict) and env["AGENTWRAP_SESSION"] == "s1"
    assert Paths.from_env(env).db_path == paths.db_path


def test_copilot_gets_the_mcp_server_for_this_launch_only(paths: Paths, tmp_path: Path) -> None:
    """``--additional-mcp-config @FILE`` (it adds to ~/.copilot/mcp-config.json for
    one launch) and the read-only tools allowed; each ``--allow-tool`` takes a
    list, so an option of agentwrap's own follows the last one."""
    got = _plan("copilot", paths, version="1.0.102")
    assert got.channels == ["hooks", "mcp"]
    config = channels.launch_dir(paths, "s1") / "copilot-mcp.json"
    allowed = [f"--allow-tool=agentwrap({t})" for t in channels.ALLOWED_MCP_TOOLS]
    assert got.argv[:len(allowed) + 2] == [*allowed, "--additional-mcp-config", f"@{config}"]
    assert got.argv[-2] == "--plugin-dir"
    assert "send_message" not in " ".join(got.argv)  # still asks the person
    _private(config)
    entry = json.loads(config.read_text())["mcpServers"]["agentwrap"]
    assert (entry["type"], entry["tools"]) == ("local", ["*"])
    _mcp_entry(entry, paths)
    off = _plan("copilot", paths, version="1.0.102", run=RunConfig())
    assert off.channels == ["hooks"] and "--additional-mcp-config" not in off.argv


def test_qwen_gets_the_mcp_server_by_its_command_line(paths: Paths, tmp_path: Path) -> None:
    """``--mcp-config FILE`` adds to the servers of Qwen's settings for this launch,
    with or without a settings.json of the person's (then without hooks)."""
    got = plan(load_profile("qwen", paths), RunConfig(mcp=True), paths, "s1", ["/bin/qwen"],
               {"PATH": "/bin", "HOME": str(tmp_path / "nobody")}, version="0.15.10")
    assert got.channels == ["mcp"] and "does not exist yet" in got.notes[0]
    config = channels.launch_dir(paths, "s1") / "qwen-mcp.json"
    allowed = ",".join(f"mcp__agentwrap__{t}" for t in channels.ALLOWED_MCP_TOOLS)
    assert got.argv == [f"--allowed-tools={allowed}", "--mcp-config", str(config)]
    _private(config)
    _mcp_entry(json.loads(config.read_text())["mcpServers"]["agentwrap"], paths)
    _qwen_home(tmp_path, {"model": {"name": "m"}})
    both = plan(load_profile("qwen", paths), RunConfig(mcp=True), paths, "s1", ["/bin/qwen"],
                {"PATH": "/bin", "HOME": str(tmp_path / "person")}, version="0.15.10")
    assert both.channels == ["hooks", "mcp"] and both.argv == got.argv
    private = json.loads((Path(both.env["QWEN_HOME"]) / "settings.json").read_text())
    assert "mcpServers" not in private  # the person's settings copy gets hooks only


def test_copilots_registered_hook_hands_over_in_its_own_shape(paths: Paths) -> None:
    """The command Copilot runs, fed its captured postToolUse, answers with a
    top-level additionalContext (Copilot ignores hookSpecificOutput)."""
    from agentwrap.message import NewMessage, Source
    from agentwrap.service import Service
    from agentwrap.sessions.registry import SessionRecord

    got = _plan("copilot", paths, version="1.0.102")
    plugin = got.argv[got.argv.index("--plugin-dir") + 1]
    hooks = json.loads(Path(plugin, "hooks", "hooks.json").read_text())["hooks"]
    with Service.open(paths) as svc:
        svc.registry.register(SessionRecord(name="s1", profile="copilot", backend="tmux",
                                            command=["copilot"], cwd="/", started=time.time()))
        svc.send(NewMessage(session="s1", content="the build is green", source=Source.WEBHOOK,
                            source_id="ci"))
    root = Path(__file__).resolve().parents[1]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(root),
           "AGENTWRAP_HOOK_CLIENT": "python"}
    fixture = root / "tests" / "fixtures" / "hooks" / "copilot" / "postToolUse.json"
    done = subprocess.run(["bash", "-c", hooks["postToolUse"][0]["bash"]],
                          input=fixture.read_text(), env=env, capture_output=True, text=True,
                          timeout=60, cwd=paths.state_dir)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert list(answer) == ["additionalContext"]
    assert "[webhook:ci] the build is green" in answer["additionalContext"]


def _opencode_commands(plugin: Path) -> dict[str, str]:
    """The hook commands filled into agentwrap's OpenCode plugin."""
    import re

    m = re.search(r"^const COMMANDS = (\{.*?\n\});$", plugin.read_text(), re.M | re.S)
    assert m is not None, plugin.read_text()[:2000]
    commands: dict[str, str] = json.loads(m.group(1))
    return commands


def test_opencode_gets_agentwraps_plugin_through_an_extra_config(
    paths: Paths, tmp_path: Path,
) -> None:
    """OpenCode has plugins, not command hooks: agentwrap's plugin, its hook
    commands filled in, and a config naming it, both in the private launch dir,
    given with OPENCODE_CONFIG; the person's ~/.config/opencode is not touched."""
    home = tmp_path / "person"
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text('{"plugin": ["theirs"]}')
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    got = plan(load_profile("opencode", paths), RunConfig(), paths, "s1", ["/bin/opencode"],
               {"PATH": "/bin", "HOME": str(home)}, version="1.18.33")
    folder = channels.launch_dir(paths, "s1") / "opencode"
    plugin, config = folder / "agentwrap-plugin.js", folder / "opencode.json"
    assert got.channels == ["hooks"] and got.argv == []
    assert got.env == {"OPENCODE_CONFIG": str(config)}
    assert got.files == [plugin, config]
    for f in got.files:
        _private(f)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert json.loads(config.read_text()) == {"plugin": [plugin.as_uri()]}
    commands = _opencode_commands(plugin)
    assert list(commands) == list(channels.HOOK_EVENTS["opencode"])
    assert set(channels.HOOK_EVENTS["opencode"]) == set(EVENTS["opencode"])
    assert " hook opencode tool.execute.after" in commands["tool.execute.after"]
    assert "AGENTWRAP_SESSION=s1" in commands["session.idle"]
    assert "AGENTWRAP_PROFILE=opencode" in commands["chat.message"]
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before
    # a dry run (doctor) says the same and writes nothing
    assert channels.remove_launch_files(paths, "s1") == [channels.launch_dir(paths, "s1")]
    dry = plan(load_profile("opencode", paths), RunConfig(), paths, "s1", ["/bin/opencode"],
               {"PATH": "/bin"}, version="1.18.33", dry_run=True)
    assert dry.env == got.env and dry.channels == ["hooks"]
    assert not channels.launch_dir(paths, "s1").exists()


def test_opencode_config_of_the_persons_own_is_left_alone(paths: Paths) -> None:
    got = plan(load_profile("opencode", paths), RunConfig(), paths, "s1", ["/bin/opencode"],
               {"PATH": "/bin", "OPENCODE_CONFIG": "/home/me/oc.json"}, version="1.18.33")
    assert got.channels == [] and got.env == {} and got.files == []
    assert "OPENCODE_CONFIG is already set" in got.notes[0]
    assert not (channels.launch_dir(paths, "s1") / "opencode").exists()


def test_opencode_plugins_hook_hands_over_in_the_shape_it_reads(paths: Paths) -> None:
    """The command the plugin runs after a tool call, fed the payload the plugin
    builds, answers with a top-level additionalContext (what the plugin appends
    to the tool's result); a prompt's signal prints nothing."""
    from agentwrap.message import NewMessage, Source
    from agentwrap.service import Service
    from agentwrap.sessions.registry import SessionRecord

    _plan("opencode", paths, version="1.18.33")
    commands = _opencode_commands(channels.launch_dir(paths, "s1") / "opencode"
                                  / "agentwrap-plugin.js")
    with Service.open(paths) as svc:
        svc.registry.register(SessionRecord(name="s1", profile="opencode", backend="tmux",
                                            command=["opencode"], cwd="/", started=time.time()))
        svc.send(NewMessage(session="s1", content="the build is green", source=Source.WEBHOOK,
                            source_id="ci"))
    root = Path(__file__).resolve().parents[1]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(root),
           "AGENTWRAP_HOOK_CLIENT": "python"}

    def run(event: str, payload: dict[str, object]) -> str:
        done = subprocess.run(["/bin/sh", "-c", commands[event]],
                              input=json.dumps({"hook_event_name": event, **payload}),
                              env=env, capture_output=True, text=True, timeout=60,
                              cwd=paths.state_dir)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert run("chat.message", {"session_id": "ses_1", "cwd": "/", "prompt": "hi"}) == ""
    answer = json.loads(run("tool.execute.after", {
        "session_id": "ses_1", "cwd": "/", "tool_name": "read",
        "tool_input": {"filePath": "/x"}}))
    assert list(answer) == ["additionalContext"]
    assert "[webhook:ci] the build is green" in answer["additionalContext"]


def _cline_home(tmp_path: Path) -> Path:
    own = tmp_path / "person" / ".cline"
    (own / "data" / "settings").mkdir(parents=True)
    (own / "data" / "settings" / "providers.json").write_text('{"version": 1}')
    (own / "hooks").mkdir()
    (own / "hooks" / "PostToolUse").write_text("#!/bin/sh\necho mine\n")  # theirs, no suffix
    (own / "hooks" / "TaskComplete.py").write_text("print('mine')\n")
    return own


def test_cline_gets_a_private_dir_with_its_hooks_beside_the_persons(
    paths: Paths, tmp_path: Path,
) -> None:
    """Cline CLI runs the hook files of $CLINE_DIR/hooks only (--hooks-dir is
    read by nothing in 3.0.65): the launch gets a private CLINE_DIR whose hooks/
    holds agentwrap's scripts beside links to the person's own, the rest of their
    Cline dir linked and CLINE_DATA_DIR at their data; nothing of theirs changes."""
    own = _cline_home(tmp_path)
    before = sorted((p.relative_to(own), p.read_bytes() if p.is_file() else b"")
                    for p in own.rglob("*"))
    got = plan(load_profile("cline", paths), RunConfig(), paths, "s1", ["/bin/cline"],
               {"PATH": "/bin", "HOME": str(tmp_path / "person")}, version="3.0.65")
    assert got.channels == ["hooks"] and got.argv == []
    private = Path(got.env["CLINE_DIR"])
    assert private == channels.launch_dir(paths, "s1") / "cline-dir"
    assert got.env["CLINE_DATA_DIR"] == str(own / "data")
    assert (private / "data").resolve() == own / "data"
    hooks = private / "hooks"
    assert stat.S_IMODE(hooks.stat().st_mode) == 0o700
    assert (hooks / "PostToolUse").resolve() == own / "hooks" / "PostToolUse"  # theirs runs
    assert (hooks / "TaskComplete.py").resolve() == own / "hooks" / "TaskComplete.py"
    # ours: one file per event, named after it, a suffix of its own where theirs took the name
    names = sorted(p.name for p in got.files)
    assert names == sorted(["PostToolUse.sh", "TaskStart", "TaskComplete", "SessionShutdown"])
    for f in got.files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o700 and not f.is_symlink()
        text = f.read_text()
        assert text.startswith("#!/bin/sh\nAGENTWRAP_SESSION=s1 ") and " hook cline " in text
        assert " exec " in text and "/env " not in text  # the shell becomes the hook
    assert after_tree(own) == before
    assert "private CLINE_DIR" in describe(SessionOptions.from_json(got.options()))
    assert channels.remove_launch_files(paths, "s1") == [channels.launch_dir(paths, "s1")]
    assert after_tree(own) == before


def after_tree(own: Path) -> list[tuple[Path, bytes]]:
    return sorted((p.relative_to(own), p.read_bytes() if p.is_file() else b"")
                  for p in own.rglob("*"))


def test_cline_keeps_the_persons_cline_and_data_dirs(paths: Paths, tmp_path: Path) -> None:
    own = _cline_home(tmp_path)
    got = plan(load_profile("cline", paths), RunConfig(), paths, "s1", ["/bin/cline"],
               {"PATH": "/bin", "HOME": "/nowhere", "CLINE_DIR": str(own),
                "CLINE_DATA_DIR": "/theirs"}, version="3.0.65")
    assert (Path(got.env["CLINE_DIR"]) / "hooks" / "TaskComplete.py").resolve() == \
        own / "hooks" / "TaskComplete.py"
    assert "CLINE_DATA_DIR" not in got.env  # their own setting decides


def test_clines_registered_hook_hands_over_as_context_modification(
    paths: Paths, tmp_path: Path,
) -> None:
    """The script Cline runs, fed its captured PostToolUse, answers with a
    top-level contextModification (what Cline 3.0.65 turns into a user message
    after the tool result)."""
    from agentwrap.message import NewMessage, Source
    from agentwrap.service import Service
    from agentwrap.sessions.registry import SessionRecord

    got = plan(load_profile("cline", paths), RunConfig(), paths, "s1", ["/bin/cline"],
               {"PATH": "/bin", "HOME": str(tmp_path / "person")}, version="3.0.65")
    script = Path(got.env["CLINE_DIR"]) / "hooks" / "PostToolUse"
    with Service.open(paths) as svc:
        svc.registry.register(SessionRecord(name="s1", profile="cline", backend="tmux",
                                            command=["cline"], cwd="/", started=time.time()))
        svc.send(NewMessage(session="s1", content="the build is green", source=Source.WEBHOOK,
                            source_id="ci"))
    root = Path(__file__).resolve().parents[1]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(root),
           "AGENTWRAP_HOOK_CLIENT": "python"}
    fixture = root / "tests" / "fixtures" / "hooks" / "cline" / "PostToolUse.json"
    done = subprocess.run([str(script)], input=fixture.read_text(), env=env,
                          capture_output=True, text=True, timeout=60, cwd=paths.state_dir)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert list(answer) == ["contextModification"]
    assert "[webhook:ci] the build is green" in answer["contextModification"]


KIMI_CONFIG = ('default_model = "m"\n\n[providers.p]\ntype = "openai"\napi_key = "k"\n\n'
               '[models.m]\nprovider = "p"\nmodel = "x"\nmax_context_size = 1000\n\n'
               '[[hooks]]\nevent = "Stop"\ncommand = "my-stop"\n')


def _kimi_home(tmp_path: Path, config: str | None) -> Path:
    own = tmp_path / "person" / ".kimi-code"
    (own / "sessions").mkdir(parents=True)
    (own / "tui.toml").write_text('theme = "dark"\n')
    if config is not None:
        (own / "config.toml").write_text(config)
    return own


def test_kimi_gets_a_private_home_with_its_hooks_after_the_persons(
    paths: Paths, tmp_path: Path,
) -> None:
    """Kimi Code takes hooks from [[hooks]] in its config.toml only: the launch
    gets a private KIMI_CODE_HOME with the person's config.toml, their text kept
    and agentwrap's [[hooks]] appended, the rest of their Kimi dir linked."""
    own = _kimi_home(tmp_path, KIMI_CONFIG)
    before = after_tree(own)
    got = plan(load_profile("kimi", paths), RunConfig(), paths, "s1", ["/bin/kimi"],
               {"PATH": "/bin", "HOME": str(tmp_path / "person")}, version="2.1.0")
    # signals only: nothing is handed over through them, so typing reaches the busy agent
    assert got.channels == ["hook-signals"] and got.argv == []
    from agentwrap.delivery.choice import busy_channel_of

    opts = SessionOptions.from_json(got.options())
    assert opts.has_hooks() and busy_channel_of(opts) is None
    assert not channels.hands_over_at_start(load_profile("kimi", paths))
    assert not channels.hands_over_at_start(load_profile("cline", paths))
    assert not channels.hands_over_at_start(load_profile("copilot", paths))  # at the first prompt
    private = Path(got.env["KIMI_CODE_HOME"])
    assert private == channels.launch_dir(paths, "s1") / "kimi-home"
    _private(private / "config.toml")
    text = (private / "config.toml").read_text()
    assert text.startswith(KIMI_CONFIG)  # theirs, byte for byte
    data = tomllib.loads(text)
    assert data["providers"] == {"p": {"type": "openai", "api_key": "k"}}
    assert [h["event"] for h in data["hooks"]] == ["Stop", *channels.HOOK_EVENTS["kimi"]]
    assert data["hooks"][0]["command"] == "my-stop"
    ours = data["hooks"][1]
    assert " hook kimi UserPromptSubmit" in ours["command"] and ours["timeout"] == 10
    assert "PostToolUse" not in channels.HOOK_EVENTS["kimi"]  # its output never reaches the model
    assert (private / "sessions").resolve() == own / "sessions"
    assert (private / "tui.toml").resolve() == own / "tui.toml"
    assert after_tree(own) == before
    assert "config changed in this session is not kept" in describe(
        SessionOptions.from_json(got.options()))


@pytest.mark.parametrize(("config", "why"), [
    (None, "does not exist yet"),
    ("hooks = []\n", "is not TOML"),  # an inline array: [[hooks]] cannot extend it
    ("default_model = \n", "is not TOML"),
])
def test_kimi_without_a_usable_config_registers_nothing(
    paths: Paths, tmp_path: Path, config: str | None, why: str,
) -> None:
    _kimi_home(tmp_path, config)
    got = plan(load_profile("kimi", paths), RunConfig(), paths, "s1", ["/bin/kimi"],
               {"PATH": "/bin", "HOME": str(tmp_path / "person")}, version="2.1.0")
    assert got.channels == [] and got.env == {} and got.files == []
    assert why in got.notes[0] and not channels.launch_dir(paths, "s1").exists()
def test_a_signal_wakes_the_supervisor_to_look_not_to_run_a_queue_turn(paths: Paths) -> None:
    """Issue 27: a hook's signal says "look at the screen"; it brings nothing to
    deliver, so its wake-up is told apart (the supervisor runs no queue turn for
    it, which held its loop past Claude's repaint at a turn's end)."""
    from agentwrap.datagram import SIGNAL, WakeSocket, only_signals

    paths.runtime_dir.mkdir(parents=True, exist_ok=True)
    with WakeSocket(paths.wake_socket("s1")) as inbox:
        write_signal(paths, "s1", "turn_end", source="hook", agent="claude", event="Stop")
        got = inbox.drain()
    assert got == [SIGNAL]
    assert only_signals(got)
    assert not only_signals([SIGNAL, b"wake"]) and not only_signals([])


#: Every agent's start-up context channel (issue 35): the session-start hook only
#: where its output was seen in the model's request on the real CLI
#: (tests/e2e/test_startup_receipts.py), else typed once ready with an ACK asked.
START_CHANNELS = {"claude": "hook", "gemini": "hook", "copilot": "typed", "codex": "typed",
                  "qwen": "typed", "cline": "typed", "kimi": "typed", "opencode": "typed",
                  "aider": "typed"}


@pytest.mark.parametrize("agent", sorted(START_CHANNELS))
def test_every_agents_startup_context_is_proven_received_or_typed(paths: Paths,
                                                                 agent: str) -> None:
    from agentwrap.continuity.hooks import START_EVENTS

    profile = load_profile(agent, paths)
    row = channels.start_context(profile)
    assert row.channel == START_CHANNELS[agent], row
    starts = [e for e in channels.HOOK_EVENTS.get(profile.channels.hooks or "", ())
              if e in START_EVENTS]
    assert channels.hands_over_at_start(profile) == (row.channel == "hook")
    if row.channel == "hook":  # proven in a request, run at launch (the queue waits for it)
        assert starts and "test_startup_receipts" in row.proof, row
        assert profile.channels.session_start_at_launch
    else:  # a hook whose output never reaches the model is not registered to hand over
        assert row.proof.startswith("typed"), row
        assert not starts or not profile.channels.session_start_at_launch, (starts, row)


def test_the_startup_context_table_has_every_hook_kind() -> None:
    from agentwrap.detect.profiles import CHANNEL_KINDS

    assert set(channels.START_CONTEXT) == {*CHANNEL_KINDS, None}
    assert "SessionStart" not in channels.HOOK_EVENTS["qwen"]  # 0.15.10 discards its output
