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
)

__all__ = ["AGENT", "ALLOW_FLAG", "MCP_FLAG", "NAME", "PLUGIN_FLAG", "PLUGIN_NAME", "register"]
