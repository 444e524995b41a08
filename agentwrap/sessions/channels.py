"""The native channels an agent gets for one launch: its hooks and the MCP server.

``agentwrap run`` types messages into an agent; most agents also offer
channels that reach a *running* turn (hooks between tool calls, see
:mod:`agentwrap.surfaces.hooks`) and a tool the agent can call (``agentwrap
mcp``). This module decides, per profile (its ``[channels]`` table) and the
installed version of the agent (probed once with ``--version`` and cached by
the executable's path, size and mtime), *whether* one launch registers them,
and builds each hook's command line (the native client, the wake socket);
*what* an agent's registration is (argv after the program name, environment,
files agentwrap writes for it) is its module's in :mod:`agentwrap.agents`
(issue 36: one module per agent, looked up in one table; the knowledge comes
from the real CLIs, tests/fixtures/hooks/README.md).

Nothing of the person's is edited (no ``~/.claude``, ``.claude/``,
``.codex/``, ``.gemini/``): the files live in ``<state>/launch/<session>/``
(0700, files 0600). The SessionStart hook hands over the startup context: the
previous session's handoff (:mod:`agentwrap.continuity`) and what is queued
for the session when the agent starts (``run --context`` files, messages sent
before it). Its context reaches the model with the first prompt (no agent
starts a turn for it), so it counts as delivered at the first hook that shows
a turn, not when handed (:mod:`agentwrap.delivery.handover`). Claude Code and
Gemini CLI run it at launch, so the supervisor types nothing until it has run
(at most :data:`agentwrap.sessions.signals.START_HOOK_WAIT_S`); Codex 0.169.0
and Copilot CLI 1.0.102 run it only once the first prompt is submitted, so there
the queue is typed as ever and the hook hands over only what came meanwhile.
Which agent's start-up context goes by the hook and which is typed, and what
proves it reached the model, is each agent's ``start_context``
(:data:`START_CONTEXT` gathers them; issue 35: Qwen Code 0.15.10's interactive
UI runs SessionStart and discards its output, so Qwen gets no SessionStart hook
and its start-up context is typed).

The MCP server's entry (``server_spec``, ``config_json``, ``server_env``) is
:mod:`agentwrap.agents.launch`'s, offered here too.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from ..agents.all_agents import AGENTS, get
from ..agents.base import NO_HOOKS, StartContext
from ..agents.launch import (
    ALLOWED_MCP_TOOLS,
    SIGNAL_CHANNEL,
    Launch,
    LaunchChannels,
    config_json,
    launch_dir,
    parse_version,
    python_args,
    server_env,
    server_spec,
    version_at_least,
)
from ..config import RunConfig
from ..delivery.read_channel import FILE_NAME as READ_FILE_NAME
from ..detect.profiles import Profile
from ..hook_wire import CLIENT_ENV, CLIENT_PYTHON, PROFILE_ENV, PROTOCOL, USAGE_EXIT, hook_socket
from ..paths import Paths, private_dir, write_private
from ..session_options import SessionOptions
from ..terminal.relay_helper import BINARY as RELAY_BINARY
from .turn_end import TURN_END_CHANNEL, TURN_END_FILE, own_setting
from .turn_end import command as turn_end_command

#: Events registered per agent (each agent's ``hook_events``), by the profiles' ``[channels] hooks``.
HOOK_EVENTS: dict[str, tuple[str, ...]] = {
    a.name: a.hook_events for a in AGENTS.values() if a.hook_events}
#: How long ``--version`` may take (once per executable: cached). Cline 3.0.65 and
#: Kimi Code 2.1.0 took 12-18 s for it on a loaded 2-core machine (load 20;
#: 1.4 s of CPU): a probe cut short registers no channel for that launch.
VERSION_TIMEOUT_S = 45.0


# --- versions ---------------------------------------------------------------------------


def probe_version(
    exe: str, arg: str, paths: Paths, env: Mapping[str, str] | None = None,
    timeout: float = VERSION_TIMEOUT_S,
) -> str | None:
    """The installed version of ``exe`` (``x.y.z``), asked once per executable
    (path, size, mtime) and cached in the state dir; None when it cannot tell."""
    real = os.path.realpath(exe)
    try:
        st = os.stat(real)
    except OSError:
        return None
    key = f"{real}|{st.st_size}|{st.st_mtime_ns}|{arg}"
    cache_file = paths.state_dir / "agent-versions.json"
    cache: dict[str, str] = {}
    try:
        loaded = json.loads(cache_file.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            cache = {str(k): str(v) for k, v in loaded.items()}
    except (OSError, ValueError):
        pass
    if key in cache:
        return cache[key] or None
    try:
        done = subprocess.run([exe, arg], capture_output=True, text=True, timeout=timeout,
                              env=dict(env) if env is not None else None,
                              stdin=subprocess.DEVNULL, check=False)
        found = parse_version(done.stdout or done.stderr or "")
    except (OSError, subprocess.TimeoutExpired):
        return None  # not cached: a slow machine may answer next time
    version = ".".join(str(n) for n in found) if found else ""
    cache = {k: v for k, v in cache.items() if not k.startswith(f"{real}|")}
    cache[key] = version
    try:
        private_dir(paths.state_dir, repair=True)
        write_private(cache_file, json.dumps(cache, indent=1).encode("utf-8"))
    except OSError:
        pass
    return version or None


# --- hook commands -------------------------------------------------------------------------


#: The native hook client (agentwrap/terminal/_native/hook.c, built by hatch_build.py;
#: its wire: :mod:`agentwrap.hook_wire`).
HOOK_CLIENT = RELAY_BINARY.parent / "agentwrap-hook"


@functools.cache
def _client_speaks(path: Path, mtime_ns: int) -> bool:
    """Run without arguments, the client names its protocol and exits
    :data:`~agentwrap.hook_wire.USAGE_EXIT`: a stale build would fail every
    hook, so it is asked once per build."""
    try:
        probe = subprocess.run([str(path)], capture_output=True, text=True, timeout=10,
                               stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == USAGE_EXIT and f"protocol {PROTOCOL} expected" in probe.stderr


def hook_client(env: Mapping[str, str] | None = None) -> Path | None:
    """The native hook client the hooks are registered with, or None: the
    Python hook (not built: no C compiler at install; a stale build; or
    ``AGENTWRAP_HOOK_CLIENT=python``)."""
    if (os.environ if env is None else env).get(CLIENT_ENV) == CLIENT_PYTHON:
        return None
    try:
        st = os.stat(HOOK_CLIENT)
    except OSError:
        return None
    if not os.access(HOOK_CLIENT, os.X_OK) or not _client_speaks(HOOK_CLIENT, st.st_mtime_ns):
        return None
    return HOOK_CLIENT


#: The agents that run a hook's command with a POSIX shell (``sh -c`` / ``bash -c``,
#: read in their code: each agent's ``shell_hooks``): their hook command sets its
#: variables with the shell's own assignments, not an ``env`` exec. The others
#: (Codex runs the person's ``$SHELL -lc``: a csh or fish would not read
#: ``VAR=value command``) keep ``env``.
SHELL_HOOK_AGENTS = frozenset(a.name for a in AGENTS.values() if a.hook_events and a.shell_hooks)


def hook_command(agent: str, event: str, session: str, paths: Paths, python: str,
                 profile: str = "", client: Path | None = None,
                 socket: PurePosixPath | None = None) -> str:
    """The shell command of one hook: ``VAR=... exec python -m agentwrap hook
    AGENT EVENT``, with the session and the dirs that find this store (so it
    works whatever environment the agent hands its hooks), and the profile
    (answer rules match it). With the native ``client`` (issue 27) the same
    command follows it, which it runs when the supervisor does not take the
    hook: ``VAR=... exec agentwrap-hook 1 SOCKET AGENT EVENT -- python -m ...``.

    Every process start is one the agent waits for (issue 27): ``exec``, because
    Debian's dash (``/bin/sh``: Claude Code, Kimi, OpenCode) forks the last
    command of ``sh -c`` and waits for it instead of becoming it, and the
    shell's assignments instead of an ``env`` exec for the agents of
    :data:`SHELL_HOOK_AGENTS` (``exec env VAR=...`` for the others; ``exec``
    is every shell's, csh and fish too). The shell then becomes the hook:
    the agent's one process is the client itself. ``socket``: the hook socket
    as the agent sees it (a container's: issue 39), else the session's own."""
    variables = {**server_env(session, paths), **({PROFILE_ENV: profile} if profile else {})}
    hook = [*python_args(shutil.which(python) or python), "-m", "agentwrap", "hook", agent, event]
    sock = (socket or hook_socket(paths, session)) if client is not None else None
    front = [str(client), PROTOCOL, str(sock), agent, event, "--"] \
        if client is not None and sock is not None else []
    run = [*front, *hook]
    if agent not in SHELL_HOOK_AGENTS:
        run = [shutil.which("env") or "/usr/bin/env", *(f"{k}={v}" for k, v in variables.items()),
               *run]
        variables = {}
    # an assignment is a word whose name is bare: only its value is quoted
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in variables.items()), "exec",
                     *(shlex.quote(p) for p in run)])


# --- the launch ------------------------------------------------------------------------------


def plan(
    profile: Profile, run: RunConfig, paths: Paths, session: str, argv: list[str],
    env: Mapping[str, str], *, enabled: bool = True, python: str | None = None,
    euid: int | None = None, version: str | None = None, dry_run: bool = False,
    rules: bool = True, cwd: str | None = None,
    inside: tuple[PurePosixPath, PurePosixPath] | None = None,
) -> LaunchChannels:
    """What the launch of ``argv`` (the agent command, resolved) gets, and the
    files for it written (``dry_run``: only said). ``version``: skip the probe.
    ``rules``: the person has answer rules for this profile (a hook may answer).
    ``cwd``: where the agent runs (where it looks for a config of the person's).
    The agent's own registration is its module's (``Agent.register``).
    ``inside``: the agent runs in a container that sees the hook client and the
    hook socket at these paths (issue 39: :mod:`agentwrap.containers.box`)."""
    out = LaunchChannels(dry_run=dry_run)
    spec = profile.channels
    if not spec.any:
        return out
    if not enabled or not run.channels:
        out.notes.append("native channels turned off (--no-channels or [run] channels = false)")
        return out
    exe = shutil.which(argv[0], path=env.get("PATH")) or argv[0]
    out.version = version or probe_version(exe, spec.version_arg, paths, env)
    if out.version is None:
        out.notes.append(f"hooks, mcp: not registered: `{Path(exe).name} {spec.version_arg}`"
                         " told no version")
        return out
    if not version_at_least(out.version, spec.min_version):
        out.notes.append(f"hooks, mcp: not registered: {profile.name} {out.version} is older"
                         f" than {spec.min_version}, the oldest version they are known to work with")
        return out
    python = python or sys.executable
    if not dry_run:
        private_dir(paths.state_dir, repair=True)
        private_dir(paths.state_dir / "launch", repair=True)
    mcp = spec.mcp is not None and run.mcp
    hooks = spec.hooks is not None
    agent = get(spec.hooks or (spec.mcp if mcp else None))
    if spec.mcp is not None and not run.mcp:
        out.notes.append("mcp: not registered ([run] mcp = true registers it)")
    if agent is not None and agent.register is not None:
        name, client = agent.name, functools.cache(hook_client)  # asked once, if at all

        def command(event: str, named: str) -> str:
            if inside is not None:
                return hook_command(name, event, session, paths, python, named,
                                    Path(inside[0]), inside[1])
            return hook_command(name, event, session, paths, python, named, client())

        agent.register(Launch(out, profile, run, paths, session, python, env, argv,
                              hooks, mcp, rules, euid, command))
    if spec.read_file:
        _read_file(out, spec.read_file, session, paths)
    if spec.turn_end:
        _turn_end(out, spec.turn_end, spec.turn_end_flags, session, paths, argv, env, cwd)
    return out


#: Every agent's start-up context channel (issue 35: a receipt only for what was
#: proven received): each agent's ``start_context``. A hook kind is ``hook`` only
#: where the e2e tests saw its session-start output in the model's request; any
#: other is typed. Keys: the profiles' ``[channels] hooks`` (None: no hooks at
#: all, or turned off).
START_CONTEXT: dict[str | None, StartContext] = {
    **{a.name: a.start_context for a in AGENTS.values() if a.hook_events}, None: NO_HOOKS}


def start_context(profile: Profile) -> StartContext:
    """The agent's row of :data:`START_CONTEXT` (an unknown kind: typed)."""
    return START_CONTEXT.get(profile.channels.hooks, START_CONTEXT[None])


def hands_over_at_start(profile: Profile) -> bool:
    """Whether the agent's session-start hook hands the startup context over:
    registered, and its output proven to reach the model (:data:`START_CONTEXT`);
    otherwise the startup context is typed."""
    from ..continuity.hooks import START_EVENTS

    return start_context(profile).channel == "hook" and any(
        e in START_EVENTS for e in HOOK_EVENTS.get(profile.channels.hooks or "", ()))


def registered_in_background(paths: Paths, session: str, event: str) -> bool:
    """Whether this launch of ``session`` registered ``event``'s hook to run in the
    background (the agent then ignores what the hook prints, so a hook must not
    answer there: issue 35); each agent's ``in_background`` reads its launch's
    files back. False when nothing says so."""
    return any(a.in_background(paths, session, event) for a in AGENTS.values()
               if a.in_background is not None)


def remove_launch_files(paths: Paths, session: str) -> list[Path]:
    """The session ended: its launch dir (settings, MCP config, Aider's read
    file) and a root-run Gemini dir go, so no stale file names a session that
    is gone. Returns the dirs removed; a failure is left for the next launch."""
    gone: list[Path] = []
    outside = [a.outside_dir(paths, session) for a in AGENTS.values() if a.outside_dir]
    for folder in (launch_dir(paths, session), *outside):
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                gone.append(folder)
    return gone


def read_file_path(paths: Paths, session: str) -> Path:
    """Aider's live file of a session (``--read``; see :mod:`agentwrap.delivery.read_channel`)."""
    return launch_dir(paths, session) / READ_FILE_NAME


def _read_file(out: LaunchChannels, option: str, session: str, paths: Paths) -> None:
    """The file exists (empty, 0600) before the agent starts: Aider skips a
    missing ``--read`` file for the whole session."""
    path = read_file_path(paths, session)
    if not out.dry_run:
        private_dir(path.parent, repair=True)
        write_private(path, b"")
    out.files.append(path)
    out.argv += [option, str(path)]
    out.channels.append("read-file")


def turn_end_path(paths: Paths, session: str) -> Path:
    """The file a session's turn-end command marks (:mod:`agentwrap.sessions.turn_end`)."""
    return launch_dir(paths, session) / TURN_END_FILE


def _turn_end(out: LaunchChannels, option: str, flags: tuple[str, ...], session: str,
              paths: Paths, argv: list[str], env: Mapping[str, str], cwd: str | None) -> None:
    """Aider's notifications command marks the turn-end file (made empty,
    0600, before the launch), unless the person set notifications themselves."""
    own = own_setting(argv, env, cwd)
    if own is not None:
        out.notes.append(f"turn-end: not registered: {own} (the quiet window decides ready)")
        return
    path = turn_end_path(paths, session)
    if not out.dry_run:
        private_dir(path.parent, repair=True)
        write_private(path, b"")
    out.files.append(path)
    out.argv += [*flags, option, turn_end_command(path)]
    out.channels.append(TURN_END_CHANNEL)


def describe(options: SessionOptions) -> str:
    """One line for ``state --explain``: which channels a session has, and why not others."""
    chans = options.channels
    if chans is None:
        return "typing only (launched before native channels, or by an older agentwrap)"
    text = ", ".join(["typing", *chans]) if chans else "typing only"
    notes = options.channel_notes
    if notes:
        text += " (" + "; ".join(str(n) for n in notes) + ")"
    return text


__all__ = [
    "ALLOWED_MCP_TOOLS",
    "HOOK_CLIENT",
    "HOOK_EVENTS",
    "SHELL_HOOK_AGENTS",
    "SIGNAL_CHANNEL",
    "START_CONTEXT",
    "LaunchChannels",
    "StartContext",
    "config_json",
    "describe",
    "hands_over_at_start",
    "hook_client",
    "hook_command",
    "launch_dir",
    "parse_version",
    "plan",
    "probe_version",
    "read_file_path",
    "registered_in_background",
    "remove_launch_files",
    "server_env",
    "server_spec",
    "start_context",
    "turn_end_path",
    "version_at_least",
]
