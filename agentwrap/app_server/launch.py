"""Codex's TUI on a private app-server that agentwrap owns (issue 24).

With ``[run] codex_app_server = true`` (the default) a Codex launch starts ``codex
app-server --listen unix://SOCKET`` first (the socket in agentwrap's 0700
runtime directory, the person's ``~/.codex`` read as the TUI would and never
written) and then the person's TUI as ``codex --remote unix://SOCKET ...``: the
person sees and types exactly as before, and agentwrap can read the session as
data (docs/codex-app-server.md, :mod:`agentwrap.codex_server`).

Fail-open: a Codex without ``app-server --listen``/``--remote``, a socket path
too long for a unix socket, or a server that does not come up leaves the
launch as it is today (typed, read off the screen), and the session's options
say why (``app_server_note``: ``state --explain`` and ``doctor`` show it).

The switch is on by default (``[run] codex_app_server = false`` turns it off):
state, delivery, steering and approvals run through the server, tested on the
real Codex with the Codex e2e set (docs/codex-app-server.md says what stands).
With it off nothing here runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from pathlib import Path

import tomllib

from ..agents.all_agents import get
from ..codex_server.process import AppServer, support_problem
from ..config import RunConfig
from ..detect.profiles import Profile
from ..errors import AppServerError
from ..paths import Paths
from ..session_options import SessionOptions
from ..terminal.proctree import descendants, kill_pids

#: Codex's own ``-c key=value`` overrides the channels add (hooks, MCP server) belong
#: to the server too: it, not the TUI, runs the thread that fires them.
_CONFIG_FLAG = "-c"
#: The module the agent table's ``native`` names for a TUI on this server.
CHANNEL_MODULE = f"{__package__}.channel"
_MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, with room for the NUL


def socket_path(paths: Paths, name: str) -> Path:
    """The session's app-server socket, in the private runtime directory."""
    return paths.runtime_dir / f"codex-{name}.sock"


def config_args(argv: list[str]) -> list[str]:
    out: list[str] = []
    for i, arg in enumerate(argv[:-1]):
        if arg == _CONFIG_FLAG:
            out += [arg, argv[i + 1]]
    return out


def with_app_server(
    run: RunConfig, profile: Profile, paths: Paths, name: str, argv: list[str],
    env: dict[str, str], cwd: Path,
) -> tuple[list[str], dict[str, object]]:
    """The TUI's argv on a freshly started private app-server, and what the
    session's options record of it; unchanged argv (and the reason) when the
    switch is off, the agent is not Codex, or the server cannot run."""
    agent = get(profile.name)
    if not run.codex_app_server or agent is None or agent.native != CHANNEL_MODULE:
        return argv, {}
    log = logging.getLogger("agentwrap.session")
    sock = socket_path(paths, name)
    problem = support_problem(argv[0], env)
    if problem is None and not trust_decided(env, cwd):
        problem = (f"Codex has no trust decision for {cwd} (its remote TUI would not ask;"
                   " its own launch shows the folder-trust dialog)")
    if problem is None and len(str(sock)) > _MAX_SOCKET_PATH:
        problem = f"the socket path {sock} is too long for a unix socket"
    if problem is None:
        try:
            server = AppServer.start(
                argv[0], sock, env=env, cwd=cwd, log=paths.logs_dir / f"codex-app-server-{name}.log",
                extra_args=tuple(config_args(argv[1:])),
            )
        except AppServerError as exc:
            problem = str(exc)
    if problem is not None:
        note = f"off: {problem}; typed and read off the screen as without it"
        log.warning("codex app-server for %s: %s", name, note)
        return argv, {"app_server_note": note}
    address = f"unix://{server.socket}"
    log.info("codex app-server for %s: %s (pid %d)", name, address, server.pid)
    return [argv[0], "--remote", address, *argv[1:]], {
        "app_server": address, "app_server_pid": server.pid,
    }


def trust_decided(env: Mapping[str, str], cwd: Path) -> bool:
    """Whether the person's Codex config holds a trust decision for ``cwd``
    (its own entry, else its git root's, as Codex looks them up). Without one
    Codex's local TUI asks "Do you trust this folder?", its remote TUI asks
    nothing: such a launch stays Codex's own, so the person is asked as
    before (and ``--trust-folder`` has its dialog to answer)."""
    home = env.get("CODEX_HOME") or str(Path(env.get("HOME") or Path.home()) / ".codex")
    try:
        with open(Path(home) / "config.toml", "rb") as f:
            projects = tomllib.load(f).get("projects")
    except (OSError, tomllib.TOMLDecodeError):
        return False
    if not isinstance(projects, dict):
        return False
    here = Path(os.path.realpath(cwd))
    root = next((d for d in (here, *here.parents) if (d / ".git").exists()), None)
    for path in (here, root):
        entry = projects.get(str(path)) if path is not None else None
        if isinstance(entry, dict) and "trust_level" in entry:
            return True
    return False


def stop_app_server(paths: Paths, name: str, pid: int | None, grace: float = 2.0) -> None:
    """Stop the session's app-server when its agent has ended (the person quit
    the TUI): its process group, if ``pid`` is still that server (its command
    line names this session's socket; a reused pid is left alone)."""
    sock = socket_path(paths, name)
    if pid is not None and serves(pid, sock):
        group = [pid, *(p for p in descendants(pid) if p != pid)]
        kill_pids(group, signal.SIGTERM, grace=grace)
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()


def describe_app_server(options: SessionOptions) -> str | None:
    """What ``state --explain`` says of the session's app-server; None when the
    launch did not ask for one (the switch was off, or another agent)."""
    if options.app_server:
        return f"on: the TUI runs on {options.app_server} (pid {options.app_server_pid})"
    return options.app_server_note


def doctor_app_server(run: RunConfig, exe: str) -> str:
    """What ``doctor`` says of Codex's app-server for the installed ``exe``."""
    if not run.codex_app_server:  # nothing probed: with the switch off nothing changes
        return "off ([run] codex_app_server = false): typed and read off the screen"
    problem = support_problem(exe)
    if problem is not None:
        return f"asked for, but falls back to typing and the screen: {problem}"
    return "on: each codex session starts its TUI on a private app-server (codex --remote)"


def serves(pid: int | None, sock: Path) -> bool:
    """Whether ``pid`` is still the app-server listening on ``sock``."""
    if pid is None:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"unix://{sock}".encode() in cmdline


__all__ = ["CHANNEL_MODULE", "config_args", "describe_app_server", "doctor_app_server", "serves",
           "socket_path", "stop_app_server", "trust_decided", "with_app_server"]
