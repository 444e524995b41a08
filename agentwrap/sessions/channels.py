"""The native channels an agent gets for one launch: its hooks and the MCP server.

``agentwrap run`` types messages into an agent; three of the four agents also
offer channels that reach a *running* turn (hooks between tool calls, see
:mod:`agentwrap.surfaces.hooks`) and a tool the agent can call (``agentwrap
mcp``). This module works out, per profile (its ``[channels]`` table) and the
installed version of the agent (probed once with ``--version`` and cached by
the executable's path, size and mtime), what one launch needs: argv to put
after the program name, environment, and files agentwrap writes for it.

Per agent (the knowledge comes from the real CLIs, tests/fixtures/hooks/README.md):

* **Claude Code** (``hooks = "claude"``): ``--settings FILE``, a settings layer
  of its own that merges with the person's: PostToolBatch (PostToolUse before
  ``batch_event_since``), UserPromptSubmit, Stop, Notification, PermissionRequest
  (the exact request, answered by an answer rule: sessions/hook_questions); with the MCP
  server also ``permissions.allow`` for agentwrap's read-only tools (not
  ``send_message``). ``--mcp-config FILE`` adds the server beside the
  person's (never ``--strict-mcp-config``).
* **Codex** (``hooks = "codex"``): ``-c mcp_servers.agentwrap={...}``. Hooks
  given with ``-c`` are untrusted: the TUI opens its review screen and runs
  none until a person trusts each (in their own config.toml). So hooks are
  registered only when the person's *own* config says ``[run]
  codex_hook_trust = "bypass"``: then ``-c hooks.<Event>=[...]`` and
  ``--dangerously-bypass-hook-trust``, which runs every enabled hook of that
  launch without review: **the person's own untrusted hooks and a project's
  ``.codex/`` hooks too** - the risk that setting accepts. A ``-c`` array
  also replaces the person's ``hooks.<Event>`` of config.toml for that launch.
  ``UserPromptSubmit`` only reports, so it runs ``async`` (:data:`CODEX_SIGNAL_EVENTS`).
* **Gemini CLI** (``hooks = "gemini"``): ``GEMINI_CLI_SYSTEM_DEFAULTS_PATH``
  naming a settings file with ``hooks`` (timeouts in milliseconds) and
  ``mcpServers``. Gemini reads that file only if it and every directory
  above it are root's and not writable by group or others, so this works
  only when agentwrap runs as root (the file then goes in the state dir if
  that chain is root-private, else in ``/run/agentwrap``); otherwise Gemini
  gets nothing and the session's notes say why. A variable the person set
  themselves is left alone. Gemini waits for every hook, so only the events
  that give what nothing else does are registered: not ``BeforeAgent``, which
  held every prompt's request back (:data:`GEMINI_SKIPPED` says the trade).
* **Qwen Code** (``hooks = "qwen"``): 0.15.10 runs the hooks of the person's
  settings.json and of a trusted project's ``.qwen/settings.json`` only (not
  those of its system or system-defaults files, which it merges for
  everything else), and takes no hook from its command line. So the launch
  gets a private ``QWEN_HOME``: a copy of the person's settings.json with
  agentwrap's hooks added to theirs (timeouts in milliseconds; the signal ones
  ``async``: :data:`QWEN_SIGNAL_EVENTS`), every other
  entry of their Qwen dir linked (credentials, memory, extensions, skills), and
  ``QWEN_RUNTIME_DIR`` at their Qwen dir so sessions and logs stay where they
  were. Settings Qwen writes during the session (``/model``, ``/theme``) go to
  the copy and are not kept (the notes say so); without a settings.json of
  theirs yet (first run: onboarding writes it) or with ``disableAllHooks``,
  no hook is registered. The MCP server goes on the command line
  (``--mcp-config FILE``, added to the servers of its settings; the read-only
  tools ``--allowed-tools``), with or without that copy. Qwen 0.15.10 offers
  every MCP tool to the model only through its ``tool_search``.
* **GitHub Copilot CLI** (``hooks = "copilot"``): ``--plugin-dir DIR`` loads a
  plugin for this launch only (1.0.102): ``DIR/plugin.json`` and
  ``DIR/hooks/hooks.json`` in Copilot's own hook format (``{"version": 1,
  "hooks": {event: [{"type": "command", "bash": ..., "timeoutSec": ...}]}}``,
  timeouts in seconds; it waits for each hook but ``notification``);
  ``permissionRequest`` keeps the exact text only (it fires for requests
  Copilot runs unasked too: :data:`agentwrap.surfaces.hooks.protocol.TEXT_ONLY_QUESTIONS`). Its hooks
  run beside the person's (``~/.copilot/hooks``, a repo's ``.github/hooks``),
  which stay as they were; Copilot itself makes an empty data dir for the
  plugin under ``~/.copilot/plugin-data/_direct/``. Its ``sessionStart`` runs
  at the first prompt, not at launch (as Codex's). The MCP server:
  ``--additional-mcp-config @FILE`` (``{"mcpServers": {name: {"type": "local",
  "command", "args", "env", "tools": ["*"]}}}``, added to the person's
  ``~/.copilot/mcp-config.json`` for this launch), and ``--allow-tool`` for the
  read-only tools (Copilot asks before every MCP tool call otherwise).
* **Cline CLI** (``hooks = "cline"``): 3.0.65 runs the executables in
  ``$CLINE_DIR/hooks`` (``~/.cline/hooks``; also a workspace's
  ``.clinerules/hooks``), one per event, named after it; ``--hooks-dir`` only
  sets a variable nothing reads. So the launch gets a private ``CLINE_DIR``:
  a ``hooks/`` of agentwrap's scripts beside links to the person's own hook
  files, every other entry of their Cline dir linked, and ``CLINE_DATA_DIR``
  at their data dir (providers, sessions: where they always are).
* **Kimi Code** (``hooks = "kimi"``): 2.1.0 takes hooks from ``[[hooks]]`` in
  its ``config.toml`` (or an installed plugin) only, no flag. So the launch
  gets a private ``KIMI_CODE_HOME``: the person's config.toml with agentwrap's
  ``[[hooks]]`` appended (their text kept as it is), every other entry of their
  Kimi dir linked. Signals only: its PostToolUse runs in the background and
  its output never reaches the model. What Kimi writes to config.toml in the
  session (``/model``, a login), and entries it makes new at the top of its
  dir (a first run's ``sessions/``), are not kept (the notes say so); without
  a config.toml of theirs yet nothing is registered.
* **OpenCode** (``hooks = "opencode"``): no command hooks, only JS plugins, so
  agentwrap writes its own (agentwrap/sessions/opencode_plugin.js, the hook
  commands filled in) in the launch dir and names it in an extra config,
  ``OPENCODE_CONFIG`` (1.18.33 merges that file over the person's global
  config and under the project's; its ``plugin`` entries add to theirs). Not
  ``OPENCODE_CONFIG_DIR`` (OpenCode installs ``@opencode-ai/plugin`` into every
  config dir) nor ``OPENCODE_CONFIG_CONTENT`` (it outranks the project's
  config). A variable the person set is left alone: then nothing is
  registered. The plugin runs agentwrap's hook at a prompt (``chat.message``),
  after each tool call (``tool.execute.after``: the hand-over, appended to the
  tool's result), at the turn's end (``session.idle``) and when a permission or
  question dialog opens. Cost: with any plugin configured, OpenCode waits at
  start for its own install of ``@opencode-ai/plugin`` into
  ``~/.config/opencode`` (which it starts at every launch anyway) until that dir
  has it; offline, npm's retries make that about a minute.

Nothing of the person's is edited (no ``~/.claude``, ``.claude/``,
``.codex/``, ``.gemini/``): the files live in ``<state>/launch/<session>/``
(0700, files 0600). The SessionStart hook hands over the startup context: the
previous session's handoff (:mod:`agentwrap.continuity`) and what is queued
for the session when the agent starts (``run --context`` files, messages sent
before it). Its context reaches the model with the first prompt (no agent
starts a turn for it), so it counts as delivered at the first hook that shows
a turn, not when handed (:mod:`agentwrap.delivery.handover`). Claude Code and
Gemini CLI run it at launch, so the supervisor types nothing until it has run
(at most :data:`agentwrap.sessions.hook_requests.START_HOOK_WAIT_S`); Codex 0.169.0
and Copilot CLI 1.0.102 run it only once the first prompt is submitted, so there
the queue is typed as ever and the hook hands over only what came meanwhile.
Which agent's start-up context goes by the hook and which is typed, and what
proves it reached the model, is one table, :data:`START_CONTEXT` (issue 35:
Qwen Code 0.15.10's interactive UI runs SessionStart and discards its output, so
Qwen gets no SessionStart hook and its start-up context is typed).

How an agent launches agentwrap's MCP server for its session (here since
issue 21; was ``sessions/mcp_config.py``): ``agentwrap mcp``
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

import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ..config import RunConfig
from ..delivery.read_channel import FILE_NAME as READ_FILE_NAME
from ..detect.profiles import Profile
from ..paths import Paths, check_session_name, private_dir, write_private
from ..session_options import SessionOptions
from ..terminal.relay_helper import BINARY as RELAY_BINARY
from .hook_requests import hook_socket
from .turn_end import TURN_END_CHANNEL, TURN_END_FILE, own_setting
from .turn_end import command as turn_end_command

#: Events registered per agent: between tool calls, then the state signals.
HOOK_EVENTS: dict[str, tuple[str, ...]] = {
    "claude": ("SessionStart", "PostToolBatch", "UserPromptSubmit", "Stop", "Notification",
               "PermissionRequest"),
    "codex": ("SessionStart", "PostToolUse", "UserPromptSubmit", "Stop", "PermissionRequest"),
    "gemini": ("SessionStart", "AfterTool", "AfterAgent", "Notification"),  # not GEMINI_SKIPPED
    # no SessionStart: Qwen Code 0.15.10's interactive UI runs it and throws its
    # output away (START_CONTEXT: the start-up context is typed there)
    "qwen": ("PostToolUse", "UserPromptSubmit", "Stop", "Notification", "PermissionRequest"),
    "copilot": ("sessionStart", "postToolUse", "userPromptSubmitted", "agentStop",
                "notification", "permissionRequest"),
    "cline": ("PostToolUse", "TaskStart", "TaskComplete", "SessionShutdown"),
    "kimi": ("UserPromptSubmit", "Stop", "PermissionRequest", "Interrupt"),
    "opencode": ("tool.execute.after", "chat.message", "session.idle", "permission.asked",
                 "question.asked"),
}
#: Gemini events agentwrap understands but does not register (issue 27).
#: Gemini CLI 0.61 waits for every hook (no async hooks) and shows each as
#: "Executing Hook: <command>" with a spinner for at least 3 s
#: (``WARNING_PROMPT_DURATION_MS``), redrawing its screen all that time.
#: ``BeforeAgent`` runs after Enter and before the model request, so every
#: prompt paid a hook process (Enter -> request 1.27x ``--no-channels``, and
#: Enter -> dialog with it); what it gave is had elsewhere: ``busy`` from the
#: screen (the box empties, "Thinking..." follows; a turn end's ``ready`` no
#: longer holds once text was typed and sent since, agentwrap.detect.detector),
#: the prompt for the handoff notes from ``AfterAgent`` (which carries it), the
#: start's hand-over counted delivered at the first ``AfterTool`` or
#: ``AfterAgent``. What stays is what only a hook gives: ``SessionStart`` (the
#: start's context), ``AfterTool`` (the hand-over between tool calls),
#: ``AfterAgent`` (the turn's end at once, its ACKs; it runs as the turn ends,
#: not on the way to a request or a dialog) and ``Notification`` (the exact
#: command of a permission dialog, and ``waiting_input`` before it is drawn;
#: its dialog waits for it: the price of the exact text).
GEMINI_SKIPPED = ("BeforeAgent",)
#: Claude's events whose hook only reports a state: registered ``"async": true``
#: where the version runs hooks in the background, so the agent never waits
#: for them (issue 27: a prompt's request leaves at once, a turn's end is not
#: held on screen by a Stop hook the agent waits for: 2.1.332 shows "running
#: Stop hook" 30-130 ms longer then). Claude writes its session file's
#: ``idle`` as the turn ends, and the detector lets that newer word end the
#: prompt's ``busy`` signal (detect.detector), so ``ready`` does not wait for
#: the Stop hook either. The others answer (hand-over, a rule's permission
#: answer) and are waited for.
CLAUDE_SIGNAL_EVENTS = frozenset({"UserPromptSubmit", "Notification", "Stop"})
#: Codex's events whose hook only reports a state, registered ``async = true``
#: (issue 27): Codex 0.169 waits for a hook otherwise, and ``UserPromptSubmit``
#: runs between Enter and the model request (Enter -> request 80 vs 55 ms
#: ``--no-channels``, 1.46x; with a ``sleep 1.5`` hook 1,550-1,650 ms, async
#: 67-71). It still tells ``busy`` and the prompt for the handoff notes, just
#: not before the request leaves (a later turn end's signal is never replaced by
#: it: agentwrap.sessions.signals). ``Stop`` (the turn's end, its ACKs) and
#: ``PostToolUse``, ``PermissionRequest`` (they answer) are waited for.
CODEX_SIGNAL_EVENTS = frozenset({"UserPromptSubmit"})
#: Qwen Code's events whose hook only reports a state, registered ``"async": true``
#: from ``async_hooks_since`` (issue 27: 0.15.10 runs such a hook in the
#: background, its output kept for the next turn; ours prints nothing). Qwen
#: waits for every other hook, and runs ``UserPromptSubmit`` before each
#: request of a turn, the tool results' too (``CONTINUATIONS`` of
#: agentwrap.surfaces.hooks.protocol): every tool step waited for two hook
#: processes, the hand-over's and that one. ``PostToolUse`` (the hand-over) and ``PermissionRequest`` (a rule's
#: answer) are waited for.
QWEN_SIGNAL_EVENTS = frozenset({"UserPromptSubmit", "Stop", "Notification"})
#: Hook timeout: seconds for Claude, Codex, Copilot and Kimi, milliseconds for
#: Gemini and Qwen (Cline takes none: 120 s for a waited-for hook).
HOOK_TIMEOUT_S = 10
#: The MCP tools Claude may call without asking (send_message still asks).
ALLOWED_MCP_TOOLS = ("check_input_queue", "wait_for_input", "acknowledge", "list_sessions")
GEMINI_DEFAULTS_ENV = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
CODEX_BYPASS_FLAG = "--dangerously-bypass-hook-trust"
QWEN_HOME_ENV = "QWEN_HOME"
QWEN_RUNTIME_ENV = "QWEN_RUNTIME_DIR"
QWEN_MCP_FLAG = "--mcp-config"
QWEN_ALLOW_FLAG = "--allowed-tools"
COPILOT_PLUGIN_FLAG = "--plugin-dir"
COPILOT_MCP_FLAG = "--additional-mcp-config"
COPILOT_ALLOW_FLAG = "--allow-tool"
CLINE_DIR_ENV = "CLINE_DIR"
CLINE_DATA_ENV = "CLINE_DATA_DIR"
KIMI_HOME_ENV = "KIMI_CODE_HOME"
#: The channel of hooks that only report state (Kimi): nothing is handed over
#: through them, so typing is the way in while the agent works.
SIGNAL_CHANNEL = "hook-signals"
OPENCODE_CONFIG_ENV = "OPENCODE_CONFIG"
#: agentwrap's OpenCode plugin, filled in per launch (its COMMANDS).
OPENCODE_PLUGIN = Path(__file__).with_name("opencode_plugin.js")
OPENCODE_COMMANDS_MARK = "/*AGENTWRAP_COMMANDS*/ {}"
#: The plugin's name in Copilot (one name per loaded plugin).
COPILOT_PLUGIN_NAME = "agentwrap"
#: Where a root-owned Gemini settings file goes when the state dir is not root-private.
ROOT_RUN_DIR = Path("/run/agentwrap")
#: How long ``--version`` may take (once per executable: cached). Cline 3.0.65 and
#: Kimi Code 2.1.0 took 12-18 s for it on a loaded 2-core machine (load 20;
#: 1.4 s of CPU): a probe cut short registers no channel for that launch.
VERSION_TIMEOUT_S = 45.0
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


# --- commands and files -------------------------------------------------------------------


def _python_args(python: str) -> list[str]:
    """``-P`` (3.11+): ``-m agentwrap`` must not import an ``agentwrap`` folder
    from the agent's working directory."""
    return [python, "-P"] if python == sys.executable and sys.version_info >= (3, 11) \
        else [python]


#: ``python``: register ``python -m agentwrap hook`` even where the native client is built.
HOOK_CLIENT_ENV = "AGENTWRAP_HOOK_CLIENT"
#: The native hook client (agentwrap/terminal/_native/hook.c, built by hatch_build.py).
HOOK_CLIENT = RELAY_BINARY.parent / "agentwrap-hook"
HOOK_CLIENT_PROTOCOL = "1"  # must match HOOK_PROTOCOL in hook.c


@functools.cache
def _client_speaks(path: Path, mtime_ns: int) -> bool:
    """Run without arguments, the client names its protocol and exits 64: a
    stale build would fail every hook, so it is asked once per build."""
    try:
        probe = subprocess.run([str(path)], capture_output=True, text=True, timeout=10,
                               stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 64 and f"protocol {HOOK_CLIENT_PROTOCOL} expected" in probe.stderr


def hook_client(env: Mapping[str, str] | None = None) -> Path | None:
    """The native hook client the hooks are registered with, or None: the
    Python hook (not built: no C compiler at install; a stale build; or
    ``AGENTWRAP_HOOK_CLIENT=python``)."""
    if (os.environ if env is None else env).get(HOOK_CLIENT_ENV) == "python":
        return None
    try:
        st = os.stat(HOOK_CLIENT)
    except OSError:
        return None
    if not os.access(HOOK_CLIENT, os.X_OK) or not _client_speaks(HOOK_CLIENT, st.st_mtime_ns):
        return None
    return HOOK_CLIENT


#: The agents that run a hook's command with a POSIX shell (``sh -c`` / ``bash -c``,
#: read in their code: Claude Code's spawn with ``shell: true``, Gemini CLI's and
#: Qwen Code's ``bash -c``, Kimi Code's ``shell: true``, Copilot's ``bash`` entry,
#: agentwrap's OpenCode plugin's ``/bin/sh -c``, Cline's hook file, a shell script):
#: their hook command sets its variables with the shell's own assignments, not an
#: ``env`` exec. Codex runs the person's ``$SHELL -lc`` (a csh or fish would not
#: read ``VAR=value command``), so its hooks keep ``env``.
SHELL_HOOK_AGENTS = frozenset({"claude", "gemini", "qwen", "kimi", "copilot", "opencode",
                               "cline"})


def hook_command(agent: str, event: str, session: str, paths: Paths, python: str,
                 profile: str = "", client: Path | None = None) -> str:
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
    the agent's one process is the client itself."""
    variables = {**server_env(session, paths), **({"AGENTWRAP_PROFILE": profile} if profile else {})}
    hook = [*_python_args(shutil.which(python) or python), "-m", "agentwrap", "hook", agent, event]
    sock = hook_socket(paths, session) if client is not None else None
    front = [str(client), HOOK_CLIENT_PROTOCOL, str(sock), agent, event, "--"] \
        if client is not None and sock is not None else []
    run = [*front, *hook]
    if agent not in SHELL_HOOK_AGENTS:
        run = [shutil.which("env") or "/usr/bin/env", *(f"{k}={v}" for k, v in variables.items()),
               *run]
        variables = {}
    # an assignment is a word whose name is bare: only its value is quoted
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in variables.items()), "exec",
                     *(shlex.quote(p) for p in run)])


# --- the MCP server's launch ---------------------------------------------------------------

#: The server's name in the agent's MCP settings (its tools show as
#: ``mcp__agentwrap__check_input_queue`` in Claude Code).
SERVER_NAME = "agentwrap"


def server_env(session: str, paths: Paths) -> dict[str, str]:
    """``AGENTWRAP_SESSION`` and the XDG dirs that make :meth:`Paths.from_env`
    give back ``paths``."""
    env = {
        "AGENTWRAP_SESSION": check_session_name(session),
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


def _mcp_spec(session: str, paths: Paths, python: str) -> dict[str, Any]:
    spec = server_spec(session, paths, python=python)
    spec["args"] = [*_python_args(python)[1:], *spec["args"]]
    return spec


def launch_dir(paths: Paths, session: str) -> Path:
    """Where the files for a session's launch live (0700)."""
    return paths.state_dir / "launch" / check_session_name(session)


def _write_json(out: LaunchChannels, path: Path, data: Any) -> Path:
    if out.dry_run:
        return path
    private_dir(path.parent, repair=True)
    write_private(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))
    return path


def root_private_chain(path: Path) -> str | None:
    """None when ``path`` and every dir above it are root's and not writable
    by group or others (what Gemini asks of a system settings file), else why not."""
    p = Path(os.path.realpath(path))
    for part in [p, *p.parents]:
        try:
            st = os.stat(part)
        except OSError as exc:
            return f"{part}: {exc.strerror}"
        if st.st_uid != 0:
            return f"{part} is owned by uid {st.st_uid}, not root"
        if stat.S_IMODE(st.st_mode) & 0o022:
            return f"{part} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def gemini_defaults_dir(paths: Paths, session: str, euid: int | None = None) -> tuple[Path | None, str]:
    """A dir for Gemini's system-defaults file that Gemini will read, or
    (None, why not)."""
    if (os.geteuid() if euid is None else euid) != 0:
        return None, ("Gemini reads a system-defaults file only if root owns it and every dir"
                      " above it; agentwrap does not run as root")
    own = launch_dir(paths, session)
    why = root_private_chain(paths.state_dir)
    if why is None:
        return own, ""
    digest = hashlib.sha256(str(paths.state_dir).encode()).hexdigest()[:12]
    alt = ROOT_RUN_DIR / f"{digest}-{session}"
    why_run = root_private_chain(ROOT_RUN_DIR.parent)
    if why_run is not None:
        return None, f"no root-private dir for Gemini's settings file ({why}; {why_run})"
    return alt, ""


# --- per agent --------------------------------------------------------------------------------


def _hook_group(command: str, timeout: int, background: bool = False) -> list[dict[str, Any]]:
    hook: dict[str, Any] = {"type": "command", "command": command, "timeout": timeout}
    if background:
        hook["async"] = True
    return [{"hooks": [hook]}]


def _claude(out: LaunchChannels, profile: Profile, session: str, paths: Paths, python: str,
            argv: list[str], hooks: bool, mcp: bool, rules: bool = True) -> None:
    folder = launch_dir(paths, session)
    if hooks and any(a == "--settings" or a.startswith("--settings=") for a in argv[1:]):
        out.notes.append("hooks: not registered: the command line has its own --settings")
        hooks = False
    settings: dict[str, Any] = {}
    if hooks:
        batch = "PostToolBatch"
        if out.version and not version_at_least(out.version, profile.channels.batch_event_since):
            batch = "PostToolUse"
        events = [batch if e == "PostToolBatch" else e for e in HOOK_EVENTS["claude"]]
        background = _background_events(out.version, profile, rules)
        settings["hooks"] = {
            e: _hook_group(hook_command("claude", e, session, paths, python, profile.name,
                                        hook_client()), HOOK_TIMEOUT_S, e in background)
            for e in events
        }
    if mcp:
        settings["permissions"] = {
            "allow": [f"mcp__{SERVER_NAME}__{t}" for t in ALLOWED_MCP_TOOLS]
        }
        config = {"mcpServers": {SERVER_NAME: _mcp_spec(session, paths, python)}}
        path = _write_json(out, folder / "mcp.json", config)
        out.files.append(path)
        out.argv += ["--mcp-config", str(path)]
        out.channels.append("mcp")
    if settings:
        path = _write_json(out, folder / CLAUDE_SETTINGS, settings)
        out.files.append(path)
        out.argv[:0] = ["--settings", str(path)]
    if hooks:
        out.channels.insert(0, "hooks")


def _background_events(version: str | None, profile: Profile, rules: bool) -> frozenset[str]:
    """Claude's hooks the agent need not wait for: the signal events, and the
    PermissionRequest when no answer rule of the person's could answer it
    before the dialog opens (``rules`` False: its hook only reports the exact
    request then; a rule added later answers the dialog on the screen until
    the next launch). None before ``async_hooks_since``."""
    if not _runs_async_hooks(version, profile):
        return frozenset()
    return CLAUDE_SIGNAL_EVENTS if rules else CLAUDE_SIGNAL_EVENTS | {"PermissionRequest"}


#: The settings layer of a Claude launch (its hooks, its MCP permissions).
CLAUDE_SETTINGS = "claude-settings.json"


def registered_in_background(paths: Paths, session: str, event: str) -> bool:
    """Whether this launch of ``session`` registered ``event``'s hook ``"async"`` (read
    back from the settings layer Claude was given): the agent then ignores what the
    hook prints, so a hook must not answer there (issue 35). False when nothing says
    so (no such launch file: another agent, or hooks not registered)."""
    try:
        data = json.loads((launch_dir(paths, session) / CLAUDE_SETTINGS).read_text("utf-8"))
        groups = data["hooks"][event]
        return any(h.get("async") is True for g in groups for h in g["hooks"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _runs_async_hooks(version: str | None, profile: Profile) -> bool:
    """The agent's version runs a hook marked ``async`` in the background."""
    since = profile.channels.async_hooks_since
    return bool(since and version and version_at_least(version, since))


def _toml(value: Any) -> str:
    """A TOML value for ``codex -c`` (strings as JSON strings, which TOML reads)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_toml_key(k)}={_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _codex(out: LaunchChannels, session: str, paths: Paths, python: str, run: RunConfig,
           hooks: bool, mcp: bool, profile: str = "codex") -> None:
    if mcp:
        spec = _mcp_spec(session, paths, python)
        entry = {"command": spec["command"], "args": spec["args"], "env": spec["env"],
                 # the read-only tools run without Codex's per-call approval dialog
                 # (send_message still asks), as Claude's permissions.allow does
                 "tools": {t: {"approval_mode": "approve"} for t in ALLOWED_MCP_TOOLS}}
        out.argv += ["-c", f"mcp_servers.{SERVER_NAME}={_toml(entry)}"]
        out.channels.append("mcp")
    if hooks and run.codex_hook_trust != "bypass":
        out.notes.append(
            "hooks: not registered for Codex: hooks given per launch are untrusted and Codex"
            " runs none of them until a person reviews each; set [run] codex_hook_trust ="
            ' "bypass" in your own config.toml to register them with'
            f" {CODEX_BYPASS_FLAG} (which also runs your other untrusted hooks)"
        )
        hooks = False
    if hooks:
        for e in HOOK_EVENTS["codex"]:
            command = hook_command("codex", e, session, paths, python, profile, hook_client())
            group = _hook_group(command, HOOK_TIMEOUT_S, e in CODEX_SIGNAL_EVENTS)
            out.argv += ["-c", f"hooks.{e}={_toml(group)}"]
        out.argv.append(CODEX_BYPASS_FLAG)
        out.channels.insert(0, "hooks")


def _gemini(out: LaunchChannels, session: str, paths: Paths, python: str,
            env: Mapping[str, str], hooks: bool, mcp: bool, euid: int | None) -> None:
    if env.get(GEMINI_DEFAULTS_ENV):
        out.notes.append(f"hooks, mcp: not registered for Gemini: {GEMINI_DEFAULTS_ENV} is"
                         " already set (your own system defaults are left alone)")
        return
    folder, why = gemini_defaults_dir(paths, session, euid)
    if folder is None:
        out.notes.append(f"hooks, mcp: not registered for Gemini: {why}")
        return
    settings: dict[str, Any] = {}
    if hooks:
        settings["hooksConfig"] = {"enabled": True}
        settings["hooks"] = {
            e: _hook_group(hook_command("gemini", e, session, paths, python,
                                        client=hook_client()), HOOK_TIMEOUT_S * 1000)
            for e in HOOK_EVENTS["gemini"]
        }
    if mcp:
        spec = _mcp_spec(session, paths, python)
        settings["mcpServers"] = {
            SERVER_NAME: {"command": spec["command"], "args": spec["args"], "env": spec["env"]}
        }
        # the read-only tools run without Gemini's confirmation (send_message still asks)
        settings["tools"] = {"allowed": [f"mcp_{SERVER_NAME}_{t}" for t in ALLOWED_MCP_TOOLS]}
    if not settings:
        return
    if folder.parent == ROOT_RUN_DIR and not out.dry_run:
        private_dir(ROOT_RUN_DIR, repair=True)
    path = _write_json(out, folder / "gemini-system-defaults.json", settings)
    unusable = None if out.dry_run else root_private_chain(path)
    if unusable is not None:  # e.g. a mount made it unusable: say so, register nothing
        out.notes.append(f"hooks, mcp: not registered for Gemini: {unusable}")
        return
    out.files.append(path)
    out.env[GEMINI_DEFAULTS_ENV] = str(path)
    out.channels += [c for c, on in (("hooks", hooks), ("mcp", mcp)) if on]


def qwen_dir(env: Mapping[str, str]) -> Path:
    """The person's Qwen dir: ``QWEN_HOME`` (``~`` and relative paths as Qwen
    resolves them) or ``~/.qwen``."""
    return _agent_dir(env, QWEN_HOME_ENV, ".qwen")


def _agent_dir(env: Mapping[str, str], var: str, default: str) -> Path:
    """An agent's own dir: ``var`` (``~`` and relative paths resolved) or ``~/default``."""
    home = Path(env.get("HOME") or Path.home())
    raw = env.get(var, "").strip()
    if not raw:
        return home / default
    if raw == "~" or raw.startswith("~/"):
        return home / raw[2:]
    return Path(os.path.abspath(raw))


def _qwen(out: LaunchChannels, session: str, paths: Paths, python: str,
          env: Mapping[str, str], hooks: bool, mcp: bool = False, profile: str = "qwen",
          background: frozenset[str] = frozenset()) -> None:
    if mcp:
        _qwen_mcp(out, session, paths, python)
    if not hooks:
        return
    own = qwen_dir(env)
    theirs = own / "settings.json"
    try:
        settings = json.loads(theirs.read_text(encoding="utf-8"))
    except FileNotFoundError:
        out.notes.append(f"hooks: not registered for Qwen Code: {theirs} does not exist yet"
                         " (its first run writes it); they are from the next launch on")
        return
    except (OSError, ValueError) as exc:
        out.notes.append(f"hooks: not registered for Qwen Code: {theirs} could not be read"
                         f" as JSON ({exc})")
        return
    if not isinstance(settings, dict) or settings.get("disableAllHooks") is True:
        out.notes.append(f"hooks: not registered for Qwen Code: {theirs} turns hooks off"
                         if isinstance(settings, dict) else
                         f"hooks: not registered for Qwen Code: {theirs} is not a JSON object")
        return
    raw_hooks = settings.get("hooks")
    had: dict[str, Any] = raw_hooks if isinstance(raw_hooks, dict) else {}
    merged = dict(had)
    for e in HOOK_EVENTS["qwen"]:
        theirs_e = had.get(e)
        before: list[Any] = theirs_e if isinstance(theirs_e, list) else []
        merged[e] = [*before, *_hook_group(
            hook_command("qwen", e, session, paths, python, profile, hook_client()),
            HOOK_TIMEOUT_S * 1000, e in background)]
    settings["hooks"] = merged
    private = launch_dir(paths, session) / "qwen-home"
    if not out.dry_run:
        _link_qwen_dir(own, private)
    _write_json(out, private / "settings.json", settings)
    out.files.append(private / "settings.json")
    out.env[QWEN_HOME_ENV] = str(private)
    runtime = settings.get("advanced", {}).get("runtimeOutputDir") \
        if isinstance(settings.get("advanced"), dict) else None
    if not env.get(QWEN_RUNTIME_ENV) and not runtime:
        out.env[QWEN_RUNTIME_ENV] = str(own)  # sessions and logs where they always go
    out.notes.append(f"hooks: through a private QWEN_HOME ({private}): your settings.json"
                     " with agentwrap's hooks; settings changed in this session are not kept")
    out.channels.insert(0, "hooks")


def _qwen_mcp(out: LaunchChannels, session: str, paths: Paths, python: str) -> None:
    """``--mcp-config FILE``: Qwen Code adds its servers to those of its settings for
    this launch (with or without a settings.json of the person's); the read-only
    tools ``--allowed-tools=mcp__agentwrap__TOOL,...`` (one word: what follows is
    the agent's own arguments, never more tool names)."""
    folder = launch_dir(paths, session)
    if not out.dry_run:
        private_dir(folder, repair=True)
    spec = _mcp_spec(session, paths, python)
    entry = {"command": spec["command"], "args": spec["args"], "env": spec["env"]}
    path = _write_json(out, folder / "qwen-mcp.json", {"mcpServers": {SERVER_NAME: entry}})
    out.files.append(path)
    allowed = ",".join(f"mcp__{SERVER_NAME}__{t}" for t in ALLOWED_MCP_TOOLS)
    out.argv += [f"{QWEN_ALLOW_FLAG}={allowed}", QWEN_MCP_FLAG, str(path)]
    out.channels.append("mcp")


def _link_qwen_dir(own: Path, private: Path) -> None:
    """``private`` as ``own`` (the person's Qwen dir) seen through links, but
    for settings.json: what Qwen reads and writes there is theirs."""
    _link_dir(own, private, "settings.json")


def _link_dir(own: Path, private: Path, mine: str) -> None:
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


#: The extensions Cline 3.0.65 runs a hook file with (a file without one: bash).
CLINE_HOOK_SUFFIXES = ("", ".sh", ".bash", ".zsh")


def cline_dir(env: Mapping[str, str]) -> Path:
    """The person's Cline dir: ``CLINE_DIR`` or ``~/.cline``."""
    return _agent_dir(env, CLINE_DIR_ENV, ".cline")


def _cline(out: LaunchChannels, session: str, paths: Paths, python: str,
           env: Mapping[str, str], hooks: bool, profile: str = "cline") -> None:
    """A private ``CLINE_DIR`` whose ``hooks/`` holds agentwrap's hook scripts
    and links to the person's own hook files."""
    if not hooks:
        return
    own = cline_dir(env)
    private = launch_dir(paths, session) / "cline-dir"
    theirs: list[Path] = []
    try:
        theirs = sorted(p for p in (own / "hooks").iterdir())
    except OSError:
        pass
    taken = {p.name.lower() for p in theirs}
    if not out.dry_run:
        _link_dir(own, private, "hooks")
        private_dir(private / "hooks", repair=True)
        for entry in theirs:
            (private / "hooks" / entry.name).symlink_to(entry)
    client = hook_client()
    for e in HOOK_EVENTS["cline"]:
        # a name of its own beside a hook file of theirs for the same event (both run)
        name = next(e + x for x in CLINE_HOOK_SUFFIXES if (e + x).lower() not in taken)
        script = private / "hooks" / name
        command = hook_command("cline", e, session, paths, python, profile, client)
        if not out.dry_run:
            write_private(script, f"#!/bin/sh\n{command}\n".encode())
            script.chmod(0o700)
        out.files.append(script)
    out.env[CLINE_DIR_ENV] = str(private)
    if not env.get(CLINE_DATA_ENV, "").strip():
        out.env[CLINE_DATA_ENV] = str(own / "data")  # providers, sessions: where they are
    out.notes.append(f"hooks: through a private CLINE_DIR ({private}): your Cline dir linked,"
                     " agentwrap's hooks beside yours")
    out.channels.insert(0, "hooks")


def kimi_dir(env: Mapping[str, str]) -> Path:
    """The person's Kimi Code dir: ``KIMI_CODE_HOME`` or ``~/.kimi-code``."""
    return _agent_dir(env, KIMI_HOME_ENV, ".kimi-code")


def _kimi(out: LaunchChannels, session: str, paths: Paths, python: str,
          env: Mapping[str, str], hooks: bool, profile: str = "kimi") -> None:
    """A private ``KIMI_CODE_HOME``: the person's config.toml with agentwrap's
    ``[[hooks]]`` appended, the rest of their dir linked."""
    if not hooks:
        return
    own = kimi_dir(env)
    theirs = own / "config.toml"
    why = ""
    try:
        text = theirs.read_text(encoding="utf-8")
    except FileNotFoundError:
        out.notes.append(f"hooks: not registered for Kimi Code: {theirs} does not exist yet"
                         " (its first run writes it); they are from the next launch on")
        return
    except (OSError, UnicodeDecodeError) as exc:
        text, why = "", f"{theirs} could not be read ({exc})"
    client = hook_client()
    added = "".join(
        f"\n[[hooks]]\nevent = {json.dumps(e)}\ncommand = "
        f"{json.dumps(hook_command('kimi', e, session, paths, python, profile, client))}"
        f"\ntimeout = {HOOK_TIMEOUT_S}\n" for e in HOOK_EVENTS["kimi"])
    merged = text + ("" if not text or text.endswith("\n") else "\n") + added
    if not why:
        try:
            hooks_seen = tomllib.loads(merged).get("hooks")
            if not isinstance(hooks_seen, list) or len(hooks_seen) < len(HOOK_EVENTS["kimi"]):
                why = f"{theirs} has hooks agentwrap cannot add to"
        except tomllib.TOMLDecodeError as exc:
            why = f"{theirs} with agentwrap's [[hooks]] is not TOML ({exc})"
    if why:
        out.notes.append(f"hooks: not registered for Kimi Code: {why}")
        return
    private = launch_dir(paths, session) / "kimi-home"
    if not out.dry_run:
        _link_dir(own, private, "config.toml")
        write_private(private / "config.toml", merged.encode("utf-8"))
    out.files.append(private / "config.toml")
    out.env[KIMI_HOME_ENV] = str(private)
    out.notes.append(f"hook-signals: through a private KIMI_CODE_HOME ({private}): your"
                     " config.toml with agentwrap's hooks (they tell the agent's state;"
                     " messages are typed after a turn); config changed in this session is"
                     " not kept")
    out.channels.insert(0, SIGNAL_CHANNEL)


def _copilot(out: LaunchChannels, session: str, paths: Paths, python: str, hooks: bool,
             mcp: bool, profile: str = "copilot") -> None:
    """A plugin of agentwrap's hooks in the launch dir, loaded with ``--plugin-dir``;
    the MCP server with ``--additional-mcp-config @FILE`` (it adds to the
    person's ``~/.copilot/mcp-config.json`` for this launch), its read-only
    tools allowed with ``--allow-tool=agentwrap(TOOL)`` (Copilot asks before
    every MCP tool call otherwise). Each ``--allow-tool`` takes a list: one of
    agentwrap's own options follows it, so the agent's own arguments after
    agentwrap's are never read as tool names."""
    folder = launch_dir(paths, session)
    if not out.dry_run and (hooks or mcp):
        private_dir(folder, repair=True)
    if mcp:
        spec = _mcp_spec(session, paths, python)
        entry = {"type": "local", "command": spec["command"], "args": spec["args"],
                 "env": spec["env"], "tools": ["*"]}
        path = _write_json(out, folder / "copilot-mcp.json", {"mcpServers": {SERVER_NAME: entry}})
        out.files.append(path)
        out.argv += [f"{COPILOT_ALLOW_FLAG}={SERVER_NAME}({t})" for t in ALLOWED_MCP_TOOLS]
        out.argv += [COPILOT_MCP_FLAG, f"@{path}"]
        out.channels.append("mcp")
    if not hooks:
        return
    plugin = folder / "copilot-plugin"
    if not out.dry_run:
        for d in (plugin, plugin / "hooks"):  # each 0700, not just the deepest
            private_dir(d, repair=True)
    manifest = {"name": COPILOT_PLUGIN_NAME, "version": "1.0.0",
                "description": f"agentwrap's hooks for session {session} (this launch only)"}
    client = hook_client()
    config = {"version": 1, "hooks": {
        e: [{"type": "command", "timeoutSec": HOOK_TIMEOUT_S,
             "bash": hook_command("copilot", e, session, paths, python, profile, client)}]
        for e in HOOK_EVENTS["copilot"]
    }}
    out.files += [_write_json(out, plugin / "plugin.json", manifest),
                  _write_json(out, plugin / "hooks" / "hooks.json", config)]
    out.argv += [COPILOT_PLUGIN_FLAG, str(plugin)]
    out.channels.insert(0, "hooks")


def _opencode(out: LaunchChannels, session: str, paths: Paths, python: str,
              env: Mapping[str, str], hooks: bool, profile: str = "opencode") -> None:
    """agentwrap's plugin in the launch dir, named by an extra config in ``OPENCODE_CONFIG``."""
    if not hooks:
        return
    if env.get(OPENCODE_CONFIG_ENV):
        out.notes.append(f"hooks: not registered for OpenCode: {OPENCODE_CONFIG_ENV} is already"
                         " set (your own config file is left alone)")
        return
    folder = launch_dir(paths, session) / "opencode"
    client = hook_client()
    commands = {e: hook_command("opencode", e, session, paths, python, profile, client)
                for e in HOOK_EVENTS["opencode"]}
    source = OPENCODE_PLUGIN.read_text(encoding="utf-8")
    if OPENCODE_COMMANDS_MARK not in source:  # a broken install: say so, register nothing
        out.notes.append(f"hooks: not registered for OpenCode: {OPENCODE_PLUGIN} has no"
                         " commands mark")
        return
    plugin = folder / "agentwrap-plugin.js"
    if not out.dry_run:
        private_dir(launch_dir(paths, session), repair=True)
        private_dir(folder, repair=True)
        write_private(plugin, source.replace(OPENCODE_COMMANDS_MARK, json.dumps(
            commands, indent=2, ensure_ascii=True)).encode("utf-8"))
    config = _write_json(out, folder / "opencode.json", {"plugin": [plugin.as_uri()]})
    out.files += [plugin, config]
    out.env[OPENCODE_CONFIG_ENV] = str(config)
    out.channels.insert(0, "hooks")


def plan(
    profile: Profile, run: RunConfig, paths: Paths, session: str, argv: list[str],
    env: Mapping[str, str], *, enabled: bool = True, python: str | None = None,
    euid: int | None = None, version: str | None = None, dry_run: bool = False,
    rules: bool = True, cwd: str | None = None,
) -> LaunchChannels:
    """What the launch of ``argv`` (the agent command, resolved) gets, and the
    files for it written (``dry_run``: only said). ``version``: skip the probe.
    ``rules``: the person has answer rules for this profile (a hook may answer).
    ``cwd``: where the agent runs (where it looks for a config of the person's)."""
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
    kind = spec.hooks or (spec.mcp if mcp else None)
    if spec.mcp is not None and not run.mcp:
        out.notes.append("mcp: not registered ([run] mcp = true registers it)")
    if kind == "claude":
        _claude(out, profile, session, paths, python, argv, hooks, mcp, rules)
    elif kind == "codex":
        _codex(out, session, paths, python, run, hooks, mcp, profile.name)
    elif kind == "gemini":
        _gemini(out, session, paths, python, env, hooks, mcp, euid)
    elif kind == "qwen":
        _qwen(out, session, paths, python, env, hooks, mcp, profile.name,
              QWEN_SIGNAL_EVENTS if _runs_async_hooks(out.version, profile) else frozenset())
    elif kind == "copilot":
        _copilot(out, session, paths, python, hooks, mcp, profile.name)
    elif kind == "cline":
        _cline(out, session, paths, python, env, hooks, profile.name)
    elif kind == "kimi":
        _kimi(out, session, paths, python, env, hooks, profile.name)
    elif kind == "opencode":
        _opencode(out, session, paths, python, env, hooks, profile.name)
    if spec.read_file:
        _read_file(out, spec.read_file, session, paths)
    if spec.turn_end:
        _turn_end(out, spec.turn_end, spec.turn_end_flags, session, paths, argv, env, cwd)
    return out


@dataclass(frozen=True)
class StartContext:
    """How an agent's start-up context (the previous session's handoff, what was
    queued before it started) reaches the model, and what proves it did.

    ``channel``: ``hook``: the session-start hook's output, which the agent puts
    in the request of the first prompt: counted delivered at the first hook that
    shows a turn (:mod:`agentwrap.continuity.hooks`); ``typed``: queued as startup
    context and typed once the agent is ready, with an ACK asked (proven by the
    ACK, like any message). ``proof``: for ``hook``, where it was seen in the
    model's request on the real CLI; for ``typed``, why not the hook."""

    channel: str
    proof: str


_SEEN = ("seen in the first prompt's request (model server log): tests/e2e/"
         "test_startup_receipts.py, test_real_agents.py::test_startup_context_reaches_model_once")
_TYPED = "typed once ready, ACK asked"
#: Every agent's start-up context channel (issue 35: a receipt only for what was
#: proven received). A hook kind is ``hook`` only where the e2e tests saw its
#: session-start output in the model's request; any other is typed. Keys: the
#: profiles' ``[channels] hooks`` (None: no hooks at all, or turned off).
START_CONTEXT: dict[str | None, StartContext] = {
    "claude": StartContext("hook", _SEEN),
    "gemini": StartContext("hook", _SEEN),
    "copilot": StartContext("typed", f"{_TYPED}: Copilot CLI 1.0.102 runs sessionStart only"
                            " once the first prompt is submitted (session_start_at_launch = false)"),
    "qwen": StartContext("typed", f"{_TYPED}: Qwen Code 0.15.10's interactive UI runs"
                         " SessionStart and discards its output (model server log: never in a"
                         " request), so it is not registered"),
    "codex": StartContext("typed", f"{_TYPED}: Codex 0.169.0 runs SessionStart only once the"
                          " first prompt is submitted (session_start_at_launch = false)"),
    "cline": StartContext("typed", f"{_TYPED}: Cline 3.0.65 has no session-start hook"),
    "kimi": StartContext("typed", f"{_TYPED}: no session-start hook is registered"),
    "opencode": StartContext("typed", f"{_TYPED}: agentwrap's plugin has no session-start event"),
    None: StartContext("typed", f"{_TYPED}: no hooks"),
}


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


def remove_launch_files(paths: Paths, session: str) -> list[Path]:
    """The session ended: its launch dir (settings, MCP config, Aider's read
    file) and a root-run Gemini dir go, so no stale file names a session that
    is gone. Returns the dirs removed; a failure is left for the next launch."""
    digest = hashlib.sha256(str(paths.state_dir).encode()).hexdigest()[:12]
    gone: list[Path] = []
    for folder in (launch_dir(paths, session), ROOT_RUN_DIR / f"{digest}-{session}"):
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
    "HOOK_CLIENT_ENV",
    "HOOK_EVENTS",
    "SIGNAL_CHANNEL",
    "START_CONTEXT",
    "LaunchChannels",
    "StartContext",
    "cline_dir",
    "config_json",
    "describe",
    "hands_over_at_start",
    "hook_client",
    "hook_command",
    "kimi_dir",
    "launch_dir",
    "parse_version",
    "plan",
    "probe_version",
    "qwen_dir",
    "read_file_path",
    "registered_in_background",
    "remove_launch_files",
    "root_private_chain",
    "server_env",
    "start_context",
    "turn_end_path",
    "version_at_least",
]
