"""Claude Code (``patterns/claude.toml``): hooks through a settings layer of its own.

``--settings FILE``, a settings layer that merges with the person's:
PostToolBatch (PostToolUse before ``batch_event_since``), UserPromptSubmit,
Stop, Notification, PermissionRequest (the exact request, answered by an
answer rule: :mod:`agentwrap.answers.hook_questions`); with the MCP server
also ``permissions.allow`` for agentwrap's read-only tools (not
``send_message``). ``--mcp-config FILE`` adds the server beside the person's
(never ``--strict-mcp-config``). Its SessionStart runs at launch, so its
start-up context goes by the hook.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .base import CONTEXT, NOTIFICATION, QUESTION, SEEN, Agent, StartContext

if TYPE_CHECKING:
    from ..paths import Paths
    from .launch import Launch

NAME = "claude"
#: Claude's events whose hook only reports a state: registered ``"async": true``
#: where the version runs hooks in the background, so the agent never waits
#: for them (issue 27: a prompt's request leaves at once, a turn's end is not
#: held on screen by a Stop hook the agent waits for: 2.1.332 shows "running
#: Stop hook" 30-130 ms longer then). Claude writes its session file's
#: ``idle`` as the turn ends, and the detector lets that newer word end the
#: prompt's ``busy`` signal (detect.detector), so ``ready`` does not wait for
#: the Stop hook either. The others answer (hand-over, a rule's permission
#: answer) and are waited for.
SIGNAL_EVENTS = frozenset({"UserPromptSubmit", "Notification", "Stop"})
#: The settings layer of a Claude launch (its hooks, its MCP permissions).
SETTINGS = "claude-settings.json"


def register(launch: Launch) -> None:
    """``--settings`` with agentwrap's hooks (and MCP permissions), ``--mcp-config``."""
    from .launch import ALLOWED_MCP_TOOLS, HOOK_TIMEOUT_S, SERVER_NAME, hook_group, version_at_least

    out = launch.out
    hooks = launch.hooks
    if hooks and any(a == "--settings" or a.startswith("--settings=") for a in launch.argv[1:]):
        out.notes.append("hooks: not registered: the command line has its own --settings")
        hooks = False
    settings: dict[str, Any] = {}
    if hooks:
        batch = "PostToolBatch"
        if out.version and not version_at_least(out.version,
                                                launch.profile.channels.batch_event_since):
            batch = "PostToolUse"
        events = [batch if e == "PostToolBatch" else e for e in AGENT.hook_events]
        background = background_events(launch)
        settings["hooks"] = {
            e: hook_group(launch.command(e), HOOK_TIMEOUT_S, e in background) for e in events
        }
    if launch.mcp:
        settings["permissions"] = {
            "allow": [f"mcp__{SERVER_NAME}__{t}" for t in ALLOWED_MCP_TOOLS]
        }
        config = {"mcpServers": {SERVER_NAME: launch.mcp_spec()}}
        path = launch.write_json(launch.folder / "mcp.json", config)
        out.files.append(path)
        out.argv += ["--mcp-config", str(path)]
        out.channels.append("mcp")
    if settings:
        path = launch.write_json(launch.folder / SETTINGS, settings)
        out.files.append(path)
        out.argv[:0] = ["--settings", str(path)]
    if hooks:
        out.channels.insert(0, "hooks")


def background_events(launch: Launch) -> frozenset[str]:
    """Claude's hooks the agent need not wait for: the signal events, and the
    PermissionRequest when no answer rule of the person's could answer it
    before the dialog opens (``rules`` False: its hook only reports the exact
    request then; a rule added later answers the dialog on the screen until
    the next launch). None before ``async_hooks_since``."""
    if not launch.runs_async_hooks():
        return frozenset()
    return SIGNAL_EVENTS if launch.rules else SIGNAL_EVENTS | {"PermissionRequest"}


def registered_in_background(paths: Paths, session: str, event: str) -> bool:
    """Whether this launch of ``session`` registered ``event``'s hook ``"async"`` (read
    back from the settings layer Claude was given): the agent then ignores what the
    hook prints, so a hook must not answer there (issue 35). False when nothing says
    so (no such launch file: another agent, or hooks not registered)."""
    from .launch import launch_dir

    try:
        data = json.loads((launch_dir(paths, session) / SETTINGS).read_text("utf-8"))
        groups = data["hooks"][event]
        return any(h.get("async") is True for g in groups for h in g["hooks"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


AGENT = Agent(
    name=NAME,
    hook_events=("SessionStart", "PostToolBatch", "UserPromptSubmit", "Stop", "Notification",
                 "PermissionRequest"),
    events={
        "SessionStart": CONTEXT,
        "PostToolBatch": CONTEXT,  # once per batch of tool calls (2.1.197 has it)
        "PostToolUse": CONTEXT,  # once per tool call: for versions without PostToolBatch
        "UserPromptSubmit": "prompt_submitted",
        "Stop": "turn_end",
        "Notification": NOTIFICATION,
        "PermissionRequest": QUESTION,  # a permission dialog or AskUserQuestion is to open
    },
    tool_names={"Write": "Create", "MultiEdit": "Edit", "NotebookEdit": "Edit",
                "WebFetch": "Fetch"},
    edit_tools={"Edit": ("file_path",), "Write": ("file_path",), "MultiEdit": ("file_path",),
                "NotebookEdit": ("notebook_path",)},
    edits_by_hook=True,
    start_context=StartContext("hook", SEEN),
    register=register,
    in_background=registered_in_background,
)

__all__ = ["AGENT", "NAME", "SETTINGS", "SIGNAL_EVENTS", "background_events", "register",
           "registered_in_background"]
