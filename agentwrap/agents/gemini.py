"""Gemini CLI (``patterns/gemini.toml``): a system-defaults settings file.

``GEMINI_CLI_SYSTEM_DEFAULTS_PATH`` naming a settings file with ``hooks``
(timeouts in milliseconds) and ``mcpServers``. Gemini reads that file only if
it and every directory above it are root's and not writable by group or
others, so this works only when agentwrap runs as root (the file then goes in
the state dir if that chain is root-private, else in ``/run/agentwrap``);
otherwise Gemini gets nothing and the session's notes say why. A variable the
person set themselves is left alone. Gemini waits for every hook, so only the
events that give what nothing else does are registered: not ``BeforeAgent``,
which held every prompt's request back (:data:`SKIPPED` says the trade). Its
permission requests come only as a ``ToolPermission`` notification
(``details``: text, never an answer). Its conversation is read from its chat
record (``~/.gemini/tmp/<project>/chats/session-*.jsonl``: :func:`read_conversation`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import CONTEXT, NOTIFICATION, SEEN, Agent, StartContext

if TYPE_CHECKING:
    from ..paths import Paths
    from .conversation import Entry, Query
    from .launch import Launch

NAME = "gemini"
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
SKIPPED = ("BeforeAgent",)
DEFAULTS_ENV = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
#: Where a root-owned Gemini settings file goes when the state dir is not root-private.
ROOT_RUN_DIR = Path("/run/agentwrap")


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


def root_run_dir(paths: Paths, session: str) -> Path:
    """The session's dir under :data:`ROOT_RUN_DIR` (a root run whose state dir is not root-private)."""
    digest = hashlib.sha256(str(paths.state_dir).encode()).hexdigest()[:12]
    return ROOT_RUN_DIR / f"{digest}-{session}"


def defaults_dir(paths: Paths, session: str, euid: int | None = None) -> tuple[Path | None, str]:
    """A dir for Gemini's system-defaults file that Gemini will read, or
    (None, why not)."""
    from .launch import launch_dir

    if (os.geteuid() if euid is None else euid) != 0:
        return None, ("Gemini reads a system-defaults file only if root owns it and every dir"
                      " above it; agentwrap does not run as root")
    own = launch_dir(paths, session)
    why = root_private_chain(paths.state_dir)
    if why is None:
        return own, ""
    alt = root_run_dir(paths, session)
    why_run = root_private_chain(ROOT_RUN_DIR.parent)
    if why_run is not None:
        return None, f"no root-private dir for Gemini's settings file ({why}; {why_run})"
    return alt, ""


def register(launch: Launch) -> None:
    """The system-defaults file with agentwrap's hooks and MCP server, if Gemini will read it."""
    from ..paths import private_dir
    from .launch import ALLOWED_MCP_TOOLS, HOOK_TIMEOUT_S, SERVER_NAME, hook_group

    out = launch.out
    if launch.env.get(DEFAULTS_ENV):
        out.notes.append(f"hooks, mcp: not registered for Gemini: {DEFAULTS_ENV} is"
                         " already set (your own system defaults are left alone)")
        return
    folder, why = defaults_dir(launch.paths, launch.session, launch.euid)
    if folder is None:
        out.notes.append(f"hooks, mcp: not registered for Gemini: {why}")
        return
    settings: dict[str, Any] = {}
    if launch.hooks:
        settings["hooksConfig"] = {"enabled": True}
        settings["hooks"] = {
            e: hook_group(launch.command(e, named=False), HOOK_TIMEOUT_S * 1000)
            for e in AGENT.hook_events
        }
    if launch.mcp:
        spec = launch.mcp_spec()
        settings["mcpServers"] = {
            SERVER_NAME: {"command": spec["command"], "args": spec["args"], "env": spec["env"]}
        }
        # the read-only tools run without Gemini's confirmation (send_message still asks)
        settings["tools"] = {"allowed": [f"mcp_{SERVER_NAME}_{t}" for t in ALLOWED_MCP_TOOLS]}
    if not settings:
        return
    if folder.parent == ROOT_RUN_DIR and not out.dry_run:
        private_dir(ROOT_RUN_DIR, repair=True)
    path = launch.write_json(folder / "gemini-system-defaults.json", settings)
    unusable = None if out.dry_run else root_private_chain(path)
    if unusable is not None:  # e.g. a mount made it unusable: say so, register nothing
        out.notes.append(f"hooks, mcp: not registered for Gemini: {unusable}")
        return
    out.files.append(path)
    out.env[DEFAULTS_ENV] = str(path)
    out.channels += [c for c, on in (("hooks", launch.hooks), ("mcp", launch.mcp)) if on]


#: Gemini CLI's own context, the first user message of a chat: not the person's words.
SESSION_CONTEXT = "<session_context>"
#: Its chat records (0.61 writes ``.jsonl``, one record a line; older ones one ``.json``).
CHAT_SUFFIXES = (".jsonl", ".json")
#: The file in a project's temp dir naming the project folder it belongs to.
PROJECT_ROOT_FILE = ".project_root"
#: The tool-call args that name what a call acts on, in order of preference.
TARGET_ARGS = ("command", "file_path", "absolute_path", "dir_path", "path", "pattern", "url",
               "query")


def chat_dirs(query: Query) -> list[Path]:
    """Gemini's chat folders for the session's project only:
    ``<home>/.gemini/tmp/<id>/chats`` (``GEMINI_CLI_HOME`` or ``HOME``), where
    ``<id>`` is the SHA-256 of the project folder (older versions) or the short
    name ``projects.json`` gives it (0.61), and then only when that folder's
    :data:`PROJECT_ROOT_FILE` names the project (Gemini's own ownership check:
    a name ``projects.json`` gives another project's folder is not read)."""
    from .conversation import cwds, home_of, read_whole

    home = home_of(query.environ, "GEMINI_CLI_HOME", "")
    if home is None:
        return []
    root = home / ".gemini"
    mine = cwds(query)
    out = [root / "tmp" / hashlib.sha256(c.encode()).hexdigest() / "chats" for c in mine]
    try:
        names = json.loads(read_whole(root / "projects.json", 1 << 20) or b"{}").get("projects")
    except (ValueError, AttributeError):
        names = None
    for c in mine:
        name = names.get(c) if isinstance(names, dict) else None
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,200}", name) \
                or name in (".", ".."):
            continue
        owner = read_whole(root / "tmp" / name / PROJECT_ROOT_FILE, 4096)
        if owner is not None and owner.decode("utf-8", "replace").strip() in mine:
            out.append(root / "tmp" / name / "chats")
    return list(dict.fromkeys(out))


def chat_of(query: Query) -> Path | None:
    """The session's chat record: the one its hooks named, if it is in one of
    :func:`chat_dirs`; else the newest there written since the session started."""
    from .conversation import hinted_in, newest

    folders = chat_dirs(query)
    return hinted_in(query.hinted, folders, CHAT_SUFFIXES) or newest(
        folders, CHAT_SUFFIXES, query.started)


def read_conversation(query: Query) -> list[Entry]:
    """The conversation in Gemini CLI's chat record: its ``user`` and
    ``gemini`` messages, in order (a message written again under its id, as
    0.61 does when its tool calls end, replaces the first; a ``$set`` of
    ``messages`` gives messages too), the tool calls of a ``gemini`` message
    with their command or path. A ``.json`` record (one document) is read
    whole or not at all (:func:`~agentwrap.agents.conversation.read_whole`)."""
    from .conversation import json_lines, read_whole, tail_lines

    path = chat_of(query)
    if path is None:
        return []
    if path.name.endswith(".jsonl"):
        records = json_lines(tail_lines(path))
    else:
        try:
            doc = json.loads(read_whole(path) or b"{}")
        except ValueError:
            doc = None
        records = [doc] if isinstance(doc, dict) else []
    messages: dict[str, dict[str, Any]] = {}
    for record in records:
        listed = record.get("messages")
        if not isinstance(listed, list):
            put = record.get("$set")
            listed = put.get("messages") if isinstance(put, dict) else None
        for m in [*(listed if isinstance(listed, list) else []), record]:
            if isinstance(m, dict) and m.get("type") in ("user", "gemini"):
                messages[str(m.get("id") or len(messages))] = m
    return [e for m in messages.values() for e in _entries(m)]


def _entries(m: dict[str, Any]) -> list[Entry]:
    from .conversation import Entry, EntryKind, cut, stamp

    at = stamp(m.get("timestamp"))
    if at is None:
        return []
    content = m.get("content")
    parts = [{"text": content}] if isinstance(content, str) else content
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)] \
        if isinstance(parts, list) else []
    text = "".join(texts).strip()
    out: list[Entry] = []
    if m["type"] == "user":
        if text and not text.startswith(SESSION_CONTEXT):
            out.append(Entry(EntryKind.PROMPT, at, cut(text), "transcript"))
        return out
    if text:
        out.append(Entry(EntryKind.REPLY, at, cut(text), "transcript"))
    calls = m.get("toolCalls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        name = str(call.get("name") or "")[:200]
        args = call.get("args")
        given: dict[str, Any] = args if isinstance(args, dict) else {}
        target = next((str(given[k]) for k in TARGET_ARGS
                       if isinstance(given.get(k), (str, int))), "")
        out.append(Entry(EntryKind.TOOL, at, cut(target or name), "transcript", tool=name,
                         target=cut(target)))  # when the model called it
    return out


AGENT = Agent(
    name=NAME,
    hook_events=("SessionStart", "AfterTool", "AfterAgent", "Notification"),  # not SKIPPED
    events={
        "SessionStart": CONTEXT,
        "AfterTool": CONTEXT,
        "BeforeAgent": "prompt_submitted",
        "AfterAgent": "turn_end",
        "Notification": NOTIFICATION,
    },
    # its confirmation's ``details.type`` -> the tool its dialog names, and the
    # field that holds what the screen shows after it
    notification_details={"exec": ("Shell", "command"), "edit": ("Edit", "filePath")},
    edit_tools={"write_file": ("file_path", "absolute_path"),
                "replace": ("file_path", "absolute_path")},
    edits_by_hook=True,
    start_context=StartContext("hook", SEEN),
    register=register,
    outside_dir=root_run_dir,
    conversation=read_conversation,
)

__all__ = ["AGENT", "CHAT_SUFFIXES", "DEFAULTS_ENV", "NAME", "PROJECT_ROOT_FILE", "ROOT_RUN_DIR",
           "SESSION_CONTEXT", "SKIPPED", "TARGET_ARGS", "chat_dirs", "chat_of", "defaults_dir",
           "read_conversation", "register", "root_private_chain", "root_run_dir"]
