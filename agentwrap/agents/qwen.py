"""Qwen Code (``patterns/qwen.toml``): a private ``QWEN_HOME``, the MCP server on argv.

0.15.10 runs the hooks of the person's settings.json and of a trusted
project's ``.qwen/settings.json`` only (not those of its system or
system-defaults files, which it merges for everything else), and takes no
hook from its command line. So the launch gets a private ``QWEN_HOME``: a copy
of the person's settings.json with agentwrap's hooks added to theirs (timeouts
in milliseconds; the signal ones ``async``: :data:`SIGNAL_EVENTS`), every
other entry of their Qwen dir linked (credentials, memory, extensions,
skills), and ``QWEN_RUNTIME_DIR`` at their Qwen dir so sessions and logs stay
where they were. Settings Qwen writes during the session (``/model``,
``/theme``) go to the copy and are not kept (the notes say so); without a
settings.json of theirs yet (first run: onboarding writes it) or with
``disableAllHooks``, no hook is registered. The MCP server goes on the command
line (``--mcp-config FILE``, added to the servers of its settings; the
read-only tools ``--allowed-tools``), with or without that copy. Qwen 0.15.10
offers every MCP tool to the model only through its ``tool_search``. No
SessionStart: its interactive UI runs it and throws its output away, so its
start-up context is typed. Its conversation is read from its chat record
(``<runtime>/projects/<slug>/chats/<session>.jsonl``: :func:`read_conversation`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .base import CONTEXT, NOTIFICATION, QUESTION, TYPED, Agent, StartContext

if TYPE_CHECKING:
    from pathlib import Path

    from .conversation import Entry, Query
    from .launch import Launch

NAME = "qwen"
#: Qwen Code's events whose hook only reports a state, registered ``"async": true``
#: from ``async_hooks_since`` (issue 27: 0.15.10 runs such a hook in the
#: background, its output kept for the next turn; ours prints nothing). Qwen
#: waits for every other hook, and runs ``UserPromptSubmit`` before each
#: request of a turn, the tool results' too (``continuation``): every tool step
#: waited for two hook processes, the hand-over's and that one.
#: ``PostToolUse`` (the hand-over) and ``PermissionRequest`` (a rule's answer)
#: are waited for.
SIGNAL_EVENTS = frozenset({"UserPromptSubmit", "Stop", "Notification"})
HOME_ENV = "QWEN_HOME"
RUNTIME_ENV = "QWEN_RUNTIME_DIR"
MCP_FLAG = "--mcp-config"
ALLOW_FLAG = "--allowed-tools"


def qwen_dir(env: Mapping[str, str]) -> Path:
    """The person's Qwen dir: ``QWEN_HOME`` (``~`` and relative paths as Qwen
    resolves them) or ``~/.qwen``."""
    from .launch import agent_dir

    return agent_dir(env, HOME_ENV, ".qwen")


def register(launch: Launch) -> None:
    """The MCP server on argv; the hooks in a private ``QWEN_HOME``'s settings.json."""
    from .launch import HOOK_TIMEOUT_S, hook_group, link_dir

    out = launch.out
    if launch.mcp:
        _mcp(launch)
    if not launch.hooks:
        return
    background = SIGNAL_EVENTS if launch.runs_async_hooks() else frozenset()
    own = qwen_dir(launch.env)
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
    for e in AGENT.hook_events:
        theirs_e = had.get(e)
        before: list[Any] = theirs_e if isinstance(theirs_e, list) else []
        merged[e] = [*before, *hook_group(launch.command(e), HOOK_TIMEOUT_S * 1000,
                                          e in background)]
    settings["hooks"] = merged
    private = launch.folder / "qwen-home"
    if not out.dry_run:
        link_dir(own, private, "settings.json")  # what Qwen reads and writes there is theirs
    launch.write_json(private / "settings.json", settings)
    out.files.append(private / "settings.json")
    out.env[HOME_ENV] = str(private)
    runtime = settings.get("advanced", {}).get("runtimeOutputDir") \
        if isinstance(settings.get("advanced"), dict) else None
    if not launch.env.get(RUNTIME_ENV) and not runtime:
        out.env[RUNTIME_ENV] = str(own)  # sessions and logs where they always go
    out.notes.append(f"hooks: through a private QWEN_HOME ({private}): your settings.json"
                     " with agentwrap's hooks; settings changed in this session are not kept")
    out.channels.insert(0, "hooks")


def _mcp(launch: Launch) -> None:
    """``--mcp-config FILE``: Qwen Code adds its servers to those of its settings for
    this launch (with or without a settings.json of the person's); the read-only
    tools ``--allowed-tools=mcp__agentwrap__TOOL,...`` (one word: what follows is
    the agent's own arguments, never more tool names)."""
    from ..paths import private_dir
    from .launch import ALLOWED_MCP_TOOLS, SERVER_NAME

    out = launch.out
    if not out.dry_run:
        private_dir(launch.folder, repair=True)
    spec = launch.mcp_spec()
    entry = {"command": spec["command"], "args": spec["args"], "env": spec["env"]}
    path = launch.write_json(launch.folder / "qwen-mcp.json",
                             {"mcpServers": {SERVER_NAME: entry}})
    out.files.append(path)
    allowed = ",".join(f"mcp__{SERVER_NAME}__{t}" for t in ALLOWED_MCP_TOOLS)
    out.argv += [f"{ALLOW_FLAG}={allowed}", MCP_FLAG, str(path)]
    out.channels.append("mcp")


#: The tool-call args that name what a call acts on, in order of preference.
TARGET_ARGS = ("command", "file_path", "absolute_path", "path", "pattern", "url", "query")


def chat_dirs(query: Query) -> list[Path]:
    """Qwen Code's chat folders for the session's project only:
    ``<runtime>/projects/<slug of the project>/chats`` (0.15.10), the runtime
    dir being ``QWEN_RUNTIME_DIR`` (a launch with hooks sets it to the
    person's Qwen dir) or the person's Qwen dir (``QWEN_HOME`` or ``~/.qwen``)."""
    from .conversation import cwds, home_of, slug

    roots = [r for r in (home_of(query.environ, RUNTIME_ENV, ""),
                         home_of(query.environ, HOME_ENV, ".qwen")) if r is not None]
    if not query.environ.get(RUNTIME_ENV):
        roots = roots[1:]
    return list(dict.fromkeys(r / "projects" / slug(c) / "chats"
                              for r in roots for c in cwds(query)))


def read_conversation(query: Query) -> list[Entry]:
    """The conversation in Qwen Code's chat record (``<session id>.jsonl``, one
    record a line, Gemini's message shape: ``user`` and ``assistant`` records
    with ``message.parts``; ``tool_result`` and ``system`` records are not
    the conversation): the one its hooks named if it is in :func:`chat_dirs`,
    else the newest there written since the session started."""
    from . import conversation as c
    from .conversation import EntryKind, cut, stamp

    folders = chat_dirs(query)
    path = c.hinted_in(query.hinted, folders, (".jsonl",)) or c.newest(
        folders, (".jsonl",), query.started)
    out: list[Entry] = []
    for record in c.json_lines(c.tail_lines(path) if path is not None else None):
        kind, at, message = record.get("type"), stamp(record.get("timestamp")), record.get("message")
        if kind not in ("user", "assistant") or at is None or not isinstance(message, dict):
            continue
        parts = message.get("parts")
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict):
                continue
            text, call = part.get("text"), part.get("functionCall")
            if isinstance(text, str) and text.strip() and not part.get("thought"):
                out.append(c.Entry(EntryKind.PROMPT if kind == "user" else EntryKind.REPLY, at,
                                 cut(text.strip()), "transcript"))
            elif isinstance(call, dict) and kind == "assistant":
                name = str(call.get("name") or "")[:200]
                args = call.get("args")
                given: dict[str, Any] = args if isinstance(args, dict) else {}
                target = next((str(given[k]) for k in TARGET_ARGS
                               if isinstance(given.get(k), (str, int))), "")
                out.append(c.Entry(EntryKind.TOOL, at, cut(target or name), "transcript",
                                   tool=name, target=cut(target)))
    return out


AGENT = Agent(
    name=NAME,
    # no SessionStart: Qwen Code 0.15.10's interactive UI runs it and throws its
    # output away (start_context: the start-up context is typed there)
    hook_events=("PostToolUse", "UserPromptSubmit", "Stop", "Notification", "PermissionRequest"),
    events={  # Claude's names and shapes (Qwen Code 0.15.10)
        "SessionStart": CONTEXT,
        "PostToolUse": CONTEXT,  # its additionalContext is appended to the tool result
        "UserPromptSubmit": "prompt_submitted",  # also after each tool result: continuation
        "Stop": "turn_end",
        "Notification": NOTIFICATION,
        "PermissionRequest": QUESTION,  # just before its permission dialog opens
    },
    continuation="UserPromptSubmit",
    tool_names={"run_shell_command": "Shell"},  # its shell dialog (the others not seen yet)
    start_context=StartContext("typed", f"{TYPED}: Qwen Code 0.15.10's interactive UI runs"
                               " SessionStart and discards its output (model server log: never"
                               " in a request), so it is not registered"),
    register=register,
    conversation=read_conversation,
)

__all__ = ["AGENT", "ALLOW_FLAG", "HOME_ENV", "MCP_FLAG", "NAME", "RUNTIME_ENV", "SIGNAL_EVENTS",
           "TARGET_ARGS", "chat_dirs", "qwen_dir", "read_conversation", "register"]
