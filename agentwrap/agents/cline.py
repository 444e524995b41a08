"""Cline CLI (``patterns/cline.toml``): hook executables in a private ``CLINE_DIR``.

3.0.65 runs the executables in ``$CLINE_DIR/hooks`` (``~/.cline/hooks``; also a
workspace's ``.clinerules/hooks``), one per event, named after it;
``--hooks-dir`` only sets a variable nothing reads. So the launch gets a
private ``CLINE_DIR``: a ``hooks/`` of agentwrap's scripts beside links to the
person's own hook files, every other entry of their Cline dir linked, and
``CLINE_DATA_DIR`` at their data dir (providers, sessions: where they always
are). Its payloads are its own shape (``hookName``, ``taskId``, ``agent_id`` in
every payload, ``parent_agent_id`` set inside a subagent, the reply in
``turn.outputText``); it reads a top-level ``contextModification``. Its payloads
carry no prompt: the handoff notes read it from its session history
(:func:`history_prompt`, the record's ``prompt_from_history``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import CONTEXT, TYPED, Agent, StartContext

if TYPE_CHECKING:
    from .conversation import Entry, Query
    from .launch import Launch

NAME = "cline"
DIR_ENV = "CLINE_DIR"
DATA_ENV = "CLINE_DATA_DIR"
#: The extensions Cline 3.0.65 runs a hook file with (a file without one: bash).
HOOK_SUFFIXES = ("", ".sh", ".bash", ".zsh")
#: Cline's session ids (``<ms>_<random>``) and the wrapper of typed input in its history.
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_INPUT = re.compile(r'<user_input(?: [^>]*)?>(.*)</user_input>', re.S)
#: A bigger history is not read at a turn's end (the hook runs in the background, but
#: a model's long session must not cost a hook a huge parse).
MAX_HISTORY = 8 * 1024 * 1024


def cline_dir(env: Mapping[str, str]) -> Path:
    """The person's Cline dir: ``CLINE_DIR`` or ``~/.cline``."""
    from .launch import agent_dir

    return agent_dir(env, DIR_ENV, ".cline")


def sessions_dir(environ: Mapping[str, str]) -> Path:
    """Where Cline CLI 3.0.65 keeps its sessions, as it finds it:
    ``CLINE_SESSION_DATA_DIR``, else ``CLINE_DATA_DIR/sessions``, else
    ``(CLINE_DIR or ~/.cline)/data/sessions`` (the hook runs with Cline's environment)."""
    if environ.get("CLINE_SESSION_DATA_DIR", "").strip():
        return Path(environ["CLINE_SESSION_DATA_DIR"].strip())
    data = environ.get(DATA_ENV, "").strip()
    if data:
        return Path(data) / "sessions"
    home = environ.get(DIR_ENV, "").strip() or str(Path(environ.get("HOME", "~")) / ".cline")
    return Path(home).expanduser() / "data" / "sessions"


def history_prompt(payload: dict[str, Any], environ: Mapping[str, str]) -> str | None:
    """The person's prompt of the turn a Cline payload ends: its TaskStart and
    TaskComplete carry none (and its UserPromptSubmit hook does not run in the
    interactive CLI), but Cline says it in the session's own history,
    ``<sessions>/<root session>/<root session>.messages.json``: the last user
    message that is typed input (``<user_input mode=...>TEXT</user_input>``;
    tool results and hook context are user messages too, never so wrapped)."""
    ctx = payload.get("sessionContext")
    root = ctx.get("rootSessionId") if isinstance(ctx, dict) else None
    if not isinstance(root, str) or not _SESSION_ID.fullmatch(root):
        return None  # it names a path: nothing else gets through
    path = sessions_dir(environ) / root / f"{root}.messages.json"
    try:
        if path.stat().st_size > MAX_HISTORY:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    messages = data.get("messages") if isinstance(data, dict) else None
    for msg in reversed(messages if isinstance(messages, list) else []):
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        parts = msg.get("content")
        for part in parts if isinstance(parts, list) else []:
            text = part.get("text") if isinstance(part, dict) else None
            typed = _INPUT.fullmatch(text.strip()) if isinstance(text, str) else None
            if typed:
                return typed.group(1)
    return None


def register(launch: Launch) -> None:
    """A private ``CLINE_DIR`` whose ``hooks/`` holds agentwrap's hook scripts
    and links to the person's own hook files."""
    from ..paths import private_dir, write_private
    from .launch import link_dir

    out = launch.out
    if not launch.hooks:
        return
    own = cline_dir(launch.env)
    private = launch.folder / PRIVATE_DIR
    theirs: list[Path] = []
    try:
        theirs = sorted(p for p in (own / "hooks").iterdir())
    except OSError:
        pass
    taken = {p.name.lower() for p in theirs}
    if not out.dry_run:
        link_dir(own, private, "hooks")
        private_dir(private / "hooks", repair=True)
        for entry in theirs:
            (private / "hooks" / entry.name).symlink_to(entry)
    for e in AGENT.hook_events:
        # a name of its own beside a hook file of theirs for the same event (both run)
        name = next(e + x for x in HOOK_SUFFIXES if (e + x).lower() not in taken)
        script = private / "hooks" / name
        command = launch.command(e)
        if not out.dry_run:
            write_private(script, f"#!/bin/sh\n{command}\n".encode())
            script.chmod(0o700)
        out.files.append(script)
    out.env[DIR_ENV] = str(private)
    if not launch.env.get(DATA_ENV, "").strip():
        out.env[DATA_ENV] = str(own / "data")  # providers, sessions: where they are
    out.notes.append(f"hooks: through a private CLINE_DIR ({private}): your Cline dir linked,"
                     " agentwrap's hooks beside yours")
    out.channels.insert(0, "hooks")


def normalise(payload: dict[str, Any]) -> dict[str, Any]:
    """Its reply (``turn.outputText``) as ``last_assistant_message``, so a turn's end
    finds its ACKs and the handoff notes its last reply."""
    turn = payload.get("turn")
    reply = turn.get("outputText") if isinstance(turn, dict) else None
    if isinstance(reply, str) and "last_assistant_message" not in payload:
        return {**payload, "last_assistant_message": reply}
    return payload


# --- its conversation (issue 42) ------------------------------------------------------

#: The private Cline dir a launch with hooks makes, in its launch dir (:func:`register`).
PRIVATE_DIR = "cline-dir"


def session_dirs(query: Query) -> list[Path]:
    """Cline's session folders (``<sessions>/<id>/``, its history
    ``<id>.messages.json``) of the session's project only: those whose ``<id>.json`` names it as ``cwd``, in
    the person's sessions dir (:func:`sessions_dir`, the launch's data dir
    being theirs) and the launch's private one. None without a home."""
    from .conversation import cwds, read_whole

    if not any(query.environ.get(k, "").strip() for k in
               ("HOME", DIR_ENV, DATA_ENV, "CLINE_SESSION_DATA_DIR")):
        roots = []
    else:
        roots = [sessions_dir(query.environ)]
    if query.launch_dir:
        roots.append(Path(query.launch_dir) / PRIVATE_DIR / "data" / "sessions")
    wanted = set(cwds(query))
    out: list[Path] = []
    for root in dict.fromkeys(roots):
        try:
            found = [p for p in root.iterdir()
                     if _SESSION_ID.fullmatch(p.name) and not p.is_symlink()]
        except OSError:
            continue
        for folder in found:
            try:
                about = json.loads(read_whole(folder / f"{folder.name}.json", 1 << 20) or b"{}")
            except ValueError:
                continue
            if isinstance(about, dict) and about.get("cwd") in wanted:
                out.append(folder)
    return out


def read_conversation(query: Query) -> list[Entry]:
    """The conversation in Cline CLI's session history (3.0.65: one JSON
    document, ``messages`` of ``user``/``assistant`` content blocks): the
    newest of :func:`session_dirs` written since the session started; the
    person's typed input (``<user_input>``-wrapped text: tool results and hook
    context are user messages too), the model's text and ``tool_use`` blocks."""
    from . import conversation as c
    from .conversation import EntryKind, cut

    path = c.newest(session_dirs(query), (".messages.json",), query.started)
    raw = c.read_whole(path) if path is not None else None
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError:
        return []
    messages = doc.get("messages") if isinstance(doc, dict) else None
    out: list[Entry] = []
    for m in messages if isinstance(messages, list) else []:
        at, role = m.get("ts") if isinstance(m, dict) else None, m.get("role") if isinstance(
            m, dict) else None
        blocks = m.get("content") if isinstance(m, dict) else None
        if not isinstance(at, int | float) or role not in ("user", "assistant"):
            continue
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            text = block.get("text")
            if block.get("type") == "text" and isinstance(text, str):
                typed = _INPUT.search(text) if role == "user" else None
                words = (typed.group(1) if typed else "" if role == "user" else text).strip()
                if words:
                    out.append(c.Entry(EntryKind.PROMPT if role == "user" else EntryKind.REPLY,
                                       at / 1000, cut(words), "transcript"))
            elif block.get("type") == "tool_use" and role == "assistant":
                given = block.get("input")
                many = given.get("commands") if isinstance(given, dict) else None
                out.append(c.tool_entry(at / 1000, block.get("name"), given, "; ".join(
                    str(x) for x in many) if isinstance(many, list) else None))
    return out


AGENT = Agent(
    name=NAME,
    hook_events=("PostToolUse", "TaskStart", "TaskComplete", "SessionShutdown"),
    events={  # its own names (Cline CLI 3.0.65, executables in a private CLINE_DIR/hooks)
        "TaskStart": "prompt_submitted",  # each prompt starts a run (in the background)
        "PostToolUse": CONTEXT,  # waited for; contextModification follows the tool result
        "TaskComplete": "turn_end",  # reply in turn.outputText (in the background)
        # a turn cancelled with Esc ends in this one (3.0.65 runs no TaskCancel then)
        "SessionShutdown": "turn_end",
    },
    flat_context="contextModification",
    # Cline names every run's agent in agent_id, a subagent's parent in parent_agent_id
    subagent_field="parent_agent_id",
    normalise=normalise,
    prompt_from_history=history_prompt,
    start_context=StartContext("typed", f"{TYPED}: Cline 3.0.65 has no session-start hook"),
    register=register,
    conversation=read_conversation,
)

__all__ = ["AGENT", "DATA_ENV", "DIR_ENV", "HOOK_SUFFIXES", "MAX_HISTORY", "NAME", "PRIVATE_DIR",
           "cline_dir", "history_prompt", "normalise", "read_conversation", "register",
           "session_dirs", "sessions_dir"]
