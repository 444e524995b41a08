"""Codex (``patterns/codex.toml``): ``-c`` overrides, and its app-server (issue 24).

Its native channel is the app-server (:mod:`agentwrap.app_server`, named by
``native``: this module imports none of it).

``-c mcp_servers.agentwrap={...}``. Hooks given with ``-c`` are untrusted: the
TUI opens its review screen and runs none until a person trusts each (in their
own config.toml). So hooks are registered only when the person's *own* config
says ``[run] codex_hook_trust = "bypass"``: then ``-c hooks.<Event>=[...]`` and
``--dangerously-bypass-hook-trust``, which runs every enabled hook of that
launch without review: **the person's own untrusted hooks and a project's
``.codex/`` hooks too** - the risk that setting accepts. A ``-c`` array also
replaces the person's ``hooks.<Event>`` of config.toml for that launch.
``UserPromptSubmit`` only reports, so it runs ``async`` (:data:`SIGNAL_EVENTS`).
Codex runs a hook with the person's ``$SHELL -lc`` (a csh or fish would not read
``VAR=value command``), so its hooks set their variables with ``env``.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from .base import CONTEXT, QUESTION, TYPED, Agent, StartContext

if TYPE_CHECKING:
    from .launch import Launch

NAME = "codex"
#: Codex's events whose hook only reports a state, registered ``async = true``
#: (issue 27): Codex 0.169 waits for a hook otherwise, and ``UserPromptSubmit``
#: runs between Enter and the model request (Enter -> request 80 vs 55 ms
#: ``--no-channels``, 1.46x; with a ``sleep 1.5`` hook 1,550-1,650 ms, async
#: 67-71). It still tells ``busy`` and the prompt for the handoff notes, just
#: not before the request leaves (a later turn end's signal is never replaced by
#: it: agentwrap.sessions.signals). ``Stop`` (the turn's end, its ACKs) and
#: ``PostToolUse``, ``PermissionRequest`` (they answer) are waited for.
SIGNAL_EVENTS = frozenset({"UserPromptSubmit"})
BYPASS_FLAG = "--dangerously-bypass-hook-trust"


def toml(value: Any) -> str:
    """A TOML value for ``codex -c`` (strings as JSON strings, which TOML reads)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_toml_key(k)}={toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def register(launch: Launch) -> None:
    """``-c mcp_servers.agentwrap=...``; ``-c hooks.<Event>=...`` only when trusted."""
    from .launch import ALLOWED_MCP_TOOLS, HOOK_TIMEOUT_S, SERVER_NAME, hook_group

    out = launch.out
    hooks = launch.hooks
    if launch.mcp:
        spec = launch.mcp_spec()
        entry = {"command": spec["command"], "args": spec["args"], "env": spec["env"],
                 # the read-only tools run without Codex's per-call approval dialog
                 # (send_message still asks), as Claude's permissions.allow does
                 "tools": {t: {"approval_mode": "approve"} for t in ALLOWED_MCP_TOOLS}}
        out.argv += ["-c", f"mcp_servers.{SERVER_NAME}={toml(entry)}"]
        out.channels.append("mcp")
    if hooks and launch.run.codex_hook_trust != "bypass":
        out.notes.append(
            "hooks: not registered for Codex: hooks given per launch are untrusted and Codex"
            " runs none of them until a person reviews each; set [run] codex_hook_trust ="
            ' "bypass" in your own config.toml to register them with'
            f" {BYPASS_FLAG} (which also runs your other untrusted hooks)"
        )
        hooks = False
    if hooks:
        for e in AGENT.hook_events:
            group = hook_group(launch.command(e), HOOK_TIMEOUT_S, e in SIGNAL_EVENTS)
            out.argv += ["-c", f"hooks.{e}={toml(group)}"]
        out.argv.append(BYPASS_FLAG)
        out.channels.insert(0, "hooks")


AGENT = Agent(
    name=NAME,
    hook_events=("SessionStart", "PostToolUse", "UserPromptSubmit", "Stop", "PermissionRequest"),
    events={
        "SessionStart": CONTEXT,
        "PostToolUse": CONTEXT,
        "UserPromptSubmit": "prompt_submitted",
        "Stop": "turn_end",
        "PermissionRequest": QUESTION,  # its approval dialog is to open
    },
    shell_hooks=False,
    tool_names={},  # every Codex approval is the "shell" dialog (patterns/codex.toml)
    one_tool="shell",
    # Codex 0.169 runs no PostToolUse hook for apply_patch (seen end to end: only
    # its shell calls fire one), so its edits are the watcher's (edits_by_hook False)
    edit_tools={"apply_patch": ()},  # the paths are in the patch text
    patch_edits=True,
    start_context=StartContext("typed", f"{TYPED}: Codex 0.169.0 runs SessionStart only once"
                               " the first prompt is submitted (session_start_at_launch = false)"),
    native="agentwrap.app_server.channel",  # its TUI on a private app-server (issue 24)
    register=register,
)

__all__ = ["AGENT", "BYPASS_FLAG", "NAME", "SIGNAL_EVENTS", "register", "toml"]
