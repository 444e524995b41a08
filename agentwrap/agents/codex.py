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
``VAR=value command``), so its hooks set their variables with ``env``. Its
conversation is read from its rollout
(``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`` of the session's project
folder: :func:`read_conversation`).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from .base import CONTEXT, QUESTION, TYPED, Agent, StartContext

if TYPE_CHECKING:
    from pathlib import Path

    from .conversation import Entry, Query
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


#: Codex's own context in a user message of its rollout (not the person's words).
OWN_CONTEXT = ("<environment_context>", "<user_instructions>", "<skills_instructions>",
               "# AGENTS.md instructions")
#: The function-call arguments that name what a call acts on, in order of preference.
TARGET_ARGS = ("cmd", "command", "path", "file_path", "query")
#: Most days of ``sessions/YYYY/MM/DD`` folders looked in (the session's, back from today).
MAX_DAYS = 31
#: Most rollouts of those days opened to find the session's (the newest first).
MAX_ROLLOUTS = 20
#: Bytes of a rollout's end read first to learn its project folder (a turn's
#: ``turn_context`` is a few KB): another project's rollout costs no more.
CWD_PROBE_BYTES = 256 * 1024


def rollout_dirs(query: Query, now: float | None = None) -> list[Path]:
    """Codex's rollout folders a session started at ``query.started`` may
    write to: ``<CODEX_HOME or ~/.codex>/sessions/YYYY/MM/DD`` from the day
    before it started (the folder is named in local time) to tomorrow, at most
    :data:`MAX_DAYS`, newest first."""
    import time
    from datetime import date, timedelta

    from .conversation import home_of

    home = home_of(query.environ, "CODEX_HOME", ".codex")
    if home is None:
        return []
    last = date.fromtimestamp(time.time() if now is None else now) + timedelta(days=1)
    first = date.fromtimestamp(max(0.0, query.started)) - timedelta(days=1)
    days = [last - timedelta(days=n) for n in range(MAX_DAYS)]
    return [home / "sessions" / f"{d.year:04d}" / f"{d.month:02d}" / f"{d.day:02d}"
            for d in days if d >= first]


def _cwd_of(records: list[dict[str, Any]]) -> str | None:
    """The project folder the rollout's last ``session_meta``/``turn_context`` names."""
    for record in reversed(records):
        payload = record.get("payload")
        if record.get("type") in ("session_meta", "turn_context") and isinstance(payload, dict) \
                and isinstance(payload.get("cwd"), str):
            return str(payload["cwd"])
    return None


def _since(folders: list[Path], started: float) -> list[Path]:
    """The regular ``rollout-*.jsonl`` files of ``folders`` written since
    ``started``, newest first (at most :data:`MAX_ROLLOUTS`)."""
    import stat

    found: list[tuple[float, Path]] = []
    for folder in folders:
        try:
            entries = [(p.lstat(), p) for p in folder.iterdir()
                       if p.name.startswith("rollout-") and p.name.endswith(".jsonl")]
        except OSError:
            continue
        found += [(i.st_mtime, p) for i, p in entries
                  if stat.S_ISREG(i.st_mode) and i.st_mtime >= started]
    return [p for _, p in sorted(found, reverse=True)[:MAX_ROLLOUTS]]


def rollout_of(query: Query) -> list[dict[str, Any]]:
    """The records of the session's rollout: the one its hooks named if it is
    a ``rollout-*.jsonl`` of :func:`rollout_dirs`, else the newest there
    written since the session started; either only if it says it ran in the
    session's project folder (another project's rollout is never read)."""
    from .conversation import cwds, hinted_in, json_lines, tail_lines

    folders = rollout_dirs(query)
    hinted = hinted_in(query.hinted, folders, (".jsonl",))
    mine = cwds(query)
    for path in [*([hinted] if hinted and hinted.name.startswith("rollout-") else []),
                 *_since(folders, query.started)]:
        probe = json_lines(tail_lines(path, CWD_PROBE_BYTES))
        cwd = _cwd_of(probe)
        if cwd is not None and cwd not in mine:
            continue
        records = json_lines(tail_lines(path))
        if _cwd_of(records) in mine:
            return records
    return []


def read_conversation(query: Query) -> list[Entry]:
    """The conversation in Codex's rollout (one record a line): its
    ``response_item`` records, the ``user`` and ``assistant`` messages (not
    the ``developer`` ones, nor Codex's own context: :data:`OWN_CONTEXT`) and
    its ``function_call``/``custom_tool_call`` items with their command (its
    ``event_msg`` records tell the same again and are not read)."""
    from .conversation import Entry, EntryKind, cut, stamp

    out: list[Entry] = []
    for record in rollout_of(query):
        item, at = record.get("payload"), stamp(record.get("timestamp"))
        if record.get("type") != "response_item" or not isinstance(item, dict) or at is None:
            continue
        kind = item.get("type")
        if kind == "message" and item.get("role") in ("user", "assistant"):
            content = item.get("content")
            text = "".join(str(p.get("text")) for p in content if isinstance(p, dict)
                           and isinstance(p.get("text"), str)) if isinstance(content, list) else ""
            text = text.strip()
            if text and not (item["role"] == "user" and text.startswith(OWN_CONTEXT)):
                out.append(Entry(EntryKind.PROMPT if item["role"] == "user" else EntryKind.REPLY,
                                 at, cut(text), "transcript"))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            name = str(item.get("name") or kind)[:200]
            raw = item.get("arguments", item.get("input", item.get("action")))
            try:
                given = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                given = raw
            target = ""
            if isinstance(given, dict):
                found = next((given[k] for k in TARGET_ARGS if isinstance(given.get(k),
                                                                         (str, int, list))), "")
                target = " ".join(map(str, found)) if isinstance(found, list) else str(found)
            elif isinstance(given, str):
                target = given  # a custom tool's input (apply_patch: the patch)
            out.append(Entry(EntryKind.TOOL, at, cut(target or name), "transcript", tool=name,
                             target=cut(target)))
    return out


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
    conversation=read_conversation,
)

__all__ = ["AGENT", "BYPASS_FLAG", "CWD_PROBE_BYTES", "MAX_DAYS", "MAX_ROLLOUTS", "NAME", "OWN_CONTEXT",
           "SIGNAL_EVENTS", "TARGET_ARGS", "read_conversation", "register", "rollout_dirs",
           "rollout_of", "toml"]
