"""What every agent's launch registration shares: the :class:`Launch` it is
given, the :class:`LaunchChannels` it fills in, and the helpers for the files.

An agent's ``register`` (its module in :mod:`agentwrap.agents`) reads the
launch (profile, version, the person's environment, whether hooks and the MCP
server are wanted) and adds argv, environment, files, channels and notes to
``launch.out``; :func:`agentwrap.sessions.channels.plan` decides *whether* to
register (channels on, the version known and new enough) and calls it. How a
hook's command line is built (the native client, the wake socket) stays with
:mod:`agentwrap.sessions.channels`: a launch gets it as ``launch.command``.

How an agent launches agentwrap's MCP server for its session (here since
issue 36; was ``sessions/channels.py``): ``agentwrap mcp``
(:mod:`agentwrap.surfaces.mcp`) is a stdio server the agent starts itself;
what it needs is the session it serves and where agentwrap keeps its state.
:func:`server_spec` says both in the shape the agents' MCP settings share
(``command``, ``args``, ``env``): the Python running agentwrap now, ``-m
agentwrap mcp``, ``AGENTWRAP_SESSION`` and the XDG dirs of ``paths``, so the
server finds the same store whatever environment the agent hands its servers.
:func:`config_json` wraps it as Claude Code's ``--mcp-config`` (and Gemini's
``mcpServers`` setting) expects. Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..detect.profiles import Profile
from ..hook_wire import SESSION_ENV
from ..paths import Paths, check_session_name, private_dir, write_private

#: Hook timeout: seconds for Claude, Codex, Copilot and Kimi, milliseconds for
#: Gemini and Qwen (Cline takes none: 120 s for a waited-for hook).
HOOK_TIMEOUT_S = 10
#: The MCP tools an agent may call without asking (send_message still asks).
ALLOWED_MCP_TOOLS = ("check_input_queue", "wait_for_input", "acknowledge", "list_sessions")
#: The server's name in the agent's MCP settings (its tools show as
#: ``mcp__agentwrap__check_input_queue`` in Claude Code).
SERVER_NAME = "agentwrap"
#: The channel of hooks that only report state (Kimi): nothing is handed over
#: through them, so typing is the way in while the agent works.
SIGNAL_CHANNEL = "hook-signals"
_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass
class LaunchChannels:
    """What one launch gets: ``argv`` (after the program name), ``env``, the
    ``files`` written for it, the ``channels`` registered (``hooks``, ``mcp``)
    and ``notes`` on what was left out and why."""

    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    version: str | None = None
    dry_run: bool = False  # say what a launch would get; write nothing (doctor)

    def options(self) -> dict[str, object]:
        """For the session record's options (``state --explain``, ``ls --json``)."""
        opts: dict[str, object] = {"channels": list(self.channels)}
        if self.notes:
            opts["channel_notes"] = list(self.notes)
        if self.version:
            opts["agent_version"] = self.version
        return opts


@dataclass
class Launch:
    """One launch as an agent's ``register`` sees it. ``hooks``/``mcp``: wanted
    (the profile names them, the person's config allows them); ``rules``: the
    person has answer rules for this profile (a hook may answer); ``hook_command``:
    ``(event, profile) -> the hook's shell command`` (profile "": none named)."""

    out: LaunchChannels
    profile: Profile
    run: RunConfig
    paths: Paths
    session: str
    python: str
    env: Mapping[str, str]
    argv: list[str]
    hooks: bool
    mcp: bool
    rules: bool
    euid: int | None
    hook_command: Callable[[str, str], str]

    def command(self, event: str, *, named: bool = True) -> str:
        """The hook command of ``event`` (``named``: with the profile, which answer rules match)."""
        return self.hook_command(event, self.profile.name if named else "")

    @property
    def folder(self) -> Path:
        """The session's launch dir."""
        return launch_dir(self.paths, self.session)

    def mcp_spec(self) -> dict[str, Any]:
        """The MCP server entry this launch's agent starts (``-P`` kept with the python)."""
        spec = server_spec(self.session, self.paths, python=self.python)
        spec["args"] = [*python_args(self.python)[1:], *spec["args"]]
        return spec

    def write_json(self, path: Path, data: Any) -> Path:
        """``data`` as a private JSON file (``dry_run``: only named)."""
        if self.out.dry_run:
            return path
        private_dir(path.parent, repair=True)
        write_private(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))
        return path

    def runs_async_hooks(self) -> bool:
        """The agent's version runs a hook marked ``async`` in the background."""
        since = self.profile.channels.async_hooks_since
        version = self.out.version
        return bool(since and version and version_at_least(version, since))


# --- versions ---------------------------------------------------------------------------


def parse_version(text: str) -> tuple[int, ...] | None:
    m = _VERSION_RE.search(text)
    if m is None:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def version_at_least(version: str, floor: str) -> bool:
    if not floor:
        return True
    have, want = parse_version(version), parse_version(floor)
    if have is None or want is None:
        return False
    width = max(len(have), len(want))
    return have + (0,) * (width - len(have)) >= want + (0,) * (width - len(want))


# --- files and dirs -----------------------------------------------------------------------


def python_args(python: str) -> list[str]:
    """``-P`` (3.11+): ``-m agentwrap`` must not import an ``agentwrap`` folder
    from the agent's working directory."""
    return [python, "-P"] if python == sys.executable and sys.version_info >= (3, 11) \
        else [python]


def launch_dir(paths: Paths, session: str) -> Path:
    """Where the files for a session's launch live (0700)."""
    return paths.state_dir / "launch" / check_session_name(session)


def hook_group(command: str, timeout: int, background: bool = False) -> list[dict[str, Any]]:
    """One hook in the ``{"hooks": [{"type": "command", ...}]}`` group Claude's
    shape (Codex, Gemini, Qwen read it too) gives each event."""
    hook: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout}
    if background:
        hook["async"] = True
    return [{"hooks": [hook]}]


def agent_dir(env: Mapping[str, str], var: str, default: str) -> Path:
    """An agent's own dir: ``var`` (``~`` and relative paths resolved) or ``~/default``."""
    home = Path(env.get("HOME") or Path.home())
    raw = env.get(var, "").strip()
    if not raw:
        return home / default
    if raw == "~" or raw.startswith("~/"):
        return home / raw[2:]
    return Path(os.path.abspath(raw))


def link_dir(own: Path, private: Path, mine: str) -> None:
    """``private`` (made anew, 0700) as the agent's dir ``own`` seen through
    links, but for the entry ``mine``, which the launch writes itself."""
    if private.is_dir() and not private.is_symlink():
        shutil.rmtree(private)  # a previous launch's of this session name
    private_dir(private.parent, repair=True)
    private_dir(private, repair=True)
    try:
        entries = list(own.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        if entry.name != mine:
            (private / entry.name).symlink_to(entry)


# --- the MCP server's launch ---------------------------------------------------------------


def server_env(session: str, paths: Paths) -> dict[str, str]:
    """``AGENTWRAP_SESSION`` and the XDG dirs that make :meth:`Paths.from_env`
    give back ``paths``."""
    env = {
        SESSION_ENV: check_session_name(session),
        "XDG_CONFIG_HOME": str(paths.config_dir.parent),
        "XDG_STATE_HOME": str(paths.state_dir.parent),
    }
    if paths.runtime_dir.name == "agentwrap":  # else the /tmp fallback, found without it
        env["XDG_RUNTIME_DIR"] = str(paths.runtime_dir.parent)
    return env


def server_spec(session: str, paths: Paths, *, python: str | None = None) -> dict[str, Any]:
    """One stdio MCP server entry: ``{"command", "args", "env"}``."""
    return {
        "type": "stdio",
        "command": python or sys.executable,
        "args": ["-m", "agentwrap", "mcp"],
        "env": server_env(session, paths),
    }


def config_json(session: str, paths: Paths, *, python: str | None = None) -> str:
    """``{"mcpServers": {"agentwrap": ...}}``: a file for ``claude --mcp-config``."""
    return json.dumps(
        {"mcpServers": {SERVER_NAME: server_spec(session, paths, python=python)}}, indent=2
    )


__all__ = [
    "ALLOWED_MCP_TOOLS", "HOOK_TIMEOUT_S", "SERVER_NAME", "SIGNAL_CHANNEL", "Launch",
    "LaunchChannels", "agent_dir", "config_json", "hook_group", "launch_dir", "link_dir",
    "parse_version", "python_args", "server_env", "server_spec", "version_at_least",
]
