"""GitHub Copilot CLI (``patterns/copilot.toml``): a ``--plugin-dir`` plugin of hooks.

``--plugin-dir DIR`` loads a plugin for this launch only (1.0.102):
``DIR/plugin.json`` and ``DIR/hooks/hooks.json`` in Copilot's own hook format
(``{"version": 1, "hooks": {event: [{"type": "command", "bash": ...,
"timeoutSec": ...}]}}``, timeouts in seconds; it waits for each hook but
``notification``); ``permissionRequest`` keeps the exact text only (it fires
for requests Copilot runs unasked too: ``text_only_questions``). Its hooks run
beside the person's (``~/.copilot/hooks``, a repo's ``.github/hooks``), which
stay as they were; Copilot itself makes an empty data dir for the plugin under
``~/.copilot/plugin-data/_direct/``. Its ``sessionStart`` runs at the first
prompt, not at launch (as Codex's). The MCP server: ``--additional-mcp-config
@FILE`` (``{"mcpServers": {name: {"type": "local", "command", "args", "env",
"tools": ["*"]}}}``, added to the person's ``~/.copilot/mcp-config.json`` for
this launch), and ``--allow-tool`` for the read-only tools (Copilot asks
before every MCP tool call otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import CONTEXT, NOTIFICATION, QUESTION, TYPED, Agent, StartContext

if TYPE_CHECKING:
    from pathlib import Path

    from .conversation import Entry, Query
    from .launch import Launch

NAME = "copilot"
PLUGIN_FLAG = "--plugin-dir"
MCP_FLAG = "--additional-mcp-config"
ALLOW_FLAG = "--allow-tool"
#: The plugin's name in Copilot (one name per loaded plugin).
PLUGIN_NAME = "agentwrap"


def register(launch: Launch) -> None:
    """A plugin of agentwrap's hooks in the launch dir, loaded with ``--plugin-dir``;
    the MCP server with ``--additional-mcp-config @FILE`` (it adds to the
    person's ``~/.copilot/mcp-config.json`` for this launch), its read-only
    tools allowed with ``--allow-tool=agentwrap(TOOL)`` (Copilot asks before
    every MCP tool call otherwise). Each ``--allow-tool`` takes a list: one of
    agentwrap's own options follows it, so the agent's own arguments after
    agentwrap's are never read as tool names."""
    from ..paths import private_dir
    from .launch import ALLOWED_MCP_TOOLS, HOOK_TIMEOUT_S, SERVER_NAME

    out = launch.out
    folder = launch.folder
    if not out.dry_run and (launch.hooks or launch.mcp):
        private_dir(folder, repair=True)
    if launch.mcp:
        spec = launch.mcp_spec()
        entry = {"type": "local", "command": spec["command"], "args": spec["args"],
                 "env": spec["env"], "tools": ["*"]}
        path = launch.write_json(folder / "copilot-mcp.json",
                                 {"mcpServers": {SERVER_NAME: entry}})
        out.files.append(path)
        out.argv += [f"{ALLOW_FLAG}={SERVER_NAME}({t})" for t in ALLOWED_MCP_TOOLS]
        out.argv += [MCP_FLAG, f"@{path}"]
        out.channels.append("mcp")
    if not launch.hooks:
        return
    plugin = folder / "copilot-plugin"
    if not out.dry_run:
        for d in (plugin, plugin / "hooks"):  # each 0700, not just the deepest
            private_dir(d, repair=True)
    manifest = {"name": PLUGIN_NAME, "version": "1.0.0",
                "description": f"agentwrap's hooks for session {launch.session} (this launch only)"}
    config = {"version": 1, "hooks": {
        e: [{"type": "command", "timeoutSec": HOOK_TIMEOUT_S, "bash": launch.command(e)}]
        for e in AGENT.hook_events
    }}
    out.files += [launch.write_json(plugin / "plugin.json", manifest),
                  launch.write_json(plugin / "hooks" / "hooks.json", config)]
    out.argv += [PLUGIN_FLAG, str(plugin)]
    out.channels.insert(0, "hooks")


# --- its conversation (issue 42) ------------------------------------------------------

#: Copilot's own dir (``~/.copilot`` when unset).
HOME_ENV = "COPILOT_HOME"
#: Each session's record: ``<home>/session-state/<session id>/events.jsonl``.
EVENTS = "events.jsonl"


def session_dirs(query: Query) -> list[Path]:
    """Copilot's session folders whose ``workspace.yaml`` names the session's
    project as its ``cwd`` (its records are kept by session, not by project:
    another project's are never read)."""
    from .conversation import cwds, home_of, read_whole

    root = home_of(query.environ, HOME_ENV, ".copilot")
    if root is None:
        return []
    try:
        found = [p for p in (root / "session-state").iterdir()
                 if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    wanted = set(cwds(query))
    out = []
    for folder in found:
        raw = read_whole(folder / "workspace.yaml", 64 * 1024) or b""
        said = [line[4:].strip() for line in raw.decode("utf-8", "replace").splitlines()
                if line.startswith("cwd: ")]
        if said and said[0] in wanted:
            out.append(folder)
    return out


def read_conversation(query: Query) -> list[Entry]:
    """The conversation in Copilot CLI's session events (1.0.102: one event a
    line; ``user.message`` its ``content``, ``assistant.message`` its
    ``content`` and ``toolRequests``; hooks, permissions, usage and the system
    prompt are not the conversation): the one its ``agentStop`` hook named
    (``transcriptPath``) if it is one of :func:`session_dirs`, else the newest
    there written since the session started."""
    from . import conversation as c
    from .conversation import EntryKind, cut, stamp

    folders = session_dirs(query)
    path = c.hinted_in(query.hinted, folders, (EVENTS,)) or c.newest(
        folders, (EVENTS,), query.started)
    out: list[Entry] = []
    for record in c.json_lines(c.tail_lines(path) if path is not None else None):
        kind, at, data = record.get("type"), stamp(record.get("timestamp")), record.get("data")
        if at is None or not isinstance(data, dict):
            continue
        text = data.get("content")
        if kind == "user.message" and isinstance(text, str) and text.strip():
            out.append(c.Entry(EntryKind.PROMPT, at, cut(text.strip()), "transcript"))
        if kind != "assistant.message":
            continue
        if isinstance(text, str) and text.strip():
            out.append(c.Entry(EntryKind.REPLY, at, cut(text.strip()), "transcript"))
        calls = data.get("toolRequests")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                out.append(c.tool_entry(at, call.get("name"), call.get("arguments")))
    return out


AGENT = Agent(
    name=NAME,
    hook_events=("sessionStart", "postToolUse", "userPromptSubmitted", "agentStop",
                 "notification", "permissionRequest"),
    events={  # its own names (Copilot CLI 1.0.102, a --plugin-dir plugin's hooks)
        "sessionStart": CONTEXT,  # at the first prompt (source "new"), not at launch
        "postToolUse": CONTEXT,  # after a successful tool call; appended to its result
        "userPromptSubmitted": "prompt_submitted",
        "agentStop": "turn_end",  # no reply in it: read from its transcriptPath
        "notification": NOTIFICATION,  # run in the background; notification_type as Claude's
        "permissionRequest": QUESTION,  # every request, asked or not: text_only_questions
    },
    flat_context="additionalContext",  # it ignores hookSpecificOutput
    text_only_questions=True,
    transcript_field="transcriptPath",
    tool_names={"create": "Create", "edit": "Edit"},  # its file dialog; "bash" as is
    every_request=True,
    start_context=StartContext("typed", f"{TYPED}: Copilot CLI 1.0.102 runs sessionStart only"
                               " once the first prompt is submitted"
                               " (session_start_at_launch = false)"),
    register=register,
    conversation=read_conversation,
)

__all__ = ["AGENT", "ALLOW_FLAG", "EVENTS", "HOME_ENV", "MCP_FLAG", "NAME", "PLUGIN_FLAG",
           "PLUGIN_NAME", "read_conversation", "register", "session_dirs"]
