"""Claude Code (``patterns/claude.toml``): hooks through a settings layer of its own.

``--settings FILE``, a settings layer that merges with the person's:
PostToolBatch (PostToolUse before ``batch_event_since``), UserPromptSubmit,
Stop, Notification, PermissionRequest (the exact request, answered by an
answer rule: :mod:`agentwrap.answers.hook_questions`); with the MCP server
also ``permissions.allow`` for agentwrap's read-only tools (not
``send_message``). ``--mcp-config FILE`` adds the server beside the person's
(never ``--strict-mcp-config``). Its SessionStart runs at launch, so its
start-up context goes by the hook. Its conversation is read from its
transcript (``<config>/projects/<slug>/<session>.jsonl``: :func:`read_conversation`).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from .base import CONTEXT, NOTIFICATION, QUESTION, SEEN, Agent, StartContext

if TYPE_CHECKING:
    from pathlib import Path

    from ..paths import Paths
    from .conversation import Entry, Query
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


#: The tool_use input fields that name what a tool call acts on, in order of preference.
TARGET_FIELDS = ("command", "file_path", "notebook_path", "path", "pattern", "url", "query")
#: The tool that asks the person (its call is a question, its result the answer).
ASK_TOOL = "AskUserQuestion"


def project_slug(cwd: str) -> str:
    """The folder name Claude Code gives a project's transcripts under
    ``~/.claude/projects/`` (:func:`agentwrap.agents.conversation.slug`)."""
    from .conversation import slug

    return slug(cwd)


def transcript_of(query: Query) -> Path | None:
    """The session's transcript: the one its hooks named, if it is a ``.jsonl``
    in Claude's own folder for this project (``<config>/projects/<slug>/``);
    else the newest one there written since the session started."""
    from pathlib import Path

    from .conversation import newest

    slugs = {project_slug(query.cwd), project_slug(os.path.realpath(query.cwd))}
    if query.hinted:
        hinted = Path(query.hinted)
        real = Path(os.path.realpath(hinted))
        if (real.suffix == ".jsonl" and real.parent.name in slugs
                and real.parent.parent.name == "projects"):
            return real
    roots = [Path(query.environ[k]) for k in ("CLAUDE_CONFIG_DIR",) if query.environ.get(k)]
    if query.environ.get("HOME"):
        roots.append(Path(query.environ["HOME"]) / ".claude")
    return newest([root / "projects" / s for root in roots for s in slugs], (".jsonl",),
                  query.started)


def read_conversation(query: Query) -> list[Entry]:
    """The conversation in Claude Code's transcript (one JSON record a line:
    ``user`` and ``assistant`` messages with their content blocks; a
    subagent's records, ``isSidechain``, and Claude's own meta records are
    not the session's conversation)."""
    from .conversation import json_lines, tail_lines

    path = transcript_of(query)
    return [e for r in json_lines(tail_lines(path) if path is not None else None)
            for e in _entries(r)]


def _entries(record: dict[str, Any]) -> list[Entry]:
    from .conversation import Entry, EntryKind, cut, stamp

    kind = record.get("type")
    message = record.get("message")
    at = stamp(record.get("timestamp"))
    if (kind not in ("user", "assistant") or not isinstance(message, dict) or at is None
            or record.get("isSidechain") or record.get("isMeta")):
        return []
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    out: list[Entry] = []
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        part = block.get("type")
        if part == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            out.append(Entry(EntryKind.PROMPT if kind == "user" else EntryKind.REPLY, at,
                             cut(block["text"]), "transcript"))
        elif part == "tool_use" and kind == "assistant":
            name = str(block.get("name") or "")[:200]
            given_in = block.get("input")
            given: dict[str, Any] = given_in if isinstance(given_in, dict) else {}
            target = next((str(given[k]) for k in TARGET_FIELDS
                           if isinstance(given.get(k), (str, int))), "")
            if name == ASK_TOOL:
                out.append(Entry(EntryKind.QUESTION, at, cut(json.dumps(given.get("questions",
                           given), ensure_ascii=False)), "transcript", tool=name))
            else:
                out.append(Entry(EntryKind.TOOL, at, cut(target or name), "transcript",
                                 tool=name, target=cut(target)))
        elif part == "tool_result" and kind == "user" and record.get("toolUseResult") and \
                isinstance(record["toolUseResult"], dict) and "answers" in record["toolUseResult"]:
            out.append(Entry(EntryKind.ANSWER, at, cut(json.dumps(
                record["toolUseResult"]["answers"], ensure_ascii=False)), "transcript"))
    return out


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
    conversation=read_conversation,
)

__all__ = ["AGENT", "ASK_TOOL", "NAME", "SETTINGS", "SIGNAL_EVENTS", "TARGET_FIELDS",
           "background_events", "project_slug", "read_conversation", "register",
           "registered_in_background", "transcript_of"]
