"""pi (``patterns/pi.toml``): no hooks, no MCP; its record here is its conversation.

pi (@mariozechner/pi-coding-agent 0.x) keeps each session as one JSONL file
under its agent dir (``PI_CODING_AGENT_DIR`` or ``~/.pi/agent``):
``sessions/--<cwd with / made ->--/<time>_<id>.jsonl``, a ``session`` header
naming its ``cwd``, then ``message`` records (``user``, ``assistant`` with
``text`` and ``toolCall`` parts, ``toolResult``). Its start-up context is
typed; its edits are the watcher's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Agent

if TYPE_CHECKING:
    from pathlib import Path

    from .conversation import Entry, Query

NAME = "pi"
HOME_ENV = "PI_CODING_AGENT_DIR"


def session_dirs(query: Query) -> list[Path]:
    """pi's session folders for the session's project only (its own naming:
    ``--`` + the path without its leading ``/``, ``/``, ``\\`` and ``:`` made
    ``-``, + ``--``)."""
    from .conversation import cwds, home_of

    root = home_of(query.environ, HOME_ENV, ".pi/agent")
    if root is None:
        return []
    return [root / "sessions" / ("--" + c.lstrip("/\\").translate(_SEPARATORS) + "--")
            for c in cwds(query)]


_SEPARATORS = str.maketrans({"/": "-", "\\": "-", ":": "-"})


def read_conversation(query: Query) -> list[Entry]:
    """The conversation in pi's session file: the newest of :func:`session_dirs`
    written since the session started (pi has no hooks to name it), whose
    header's ``cwd`` is the project's; ``user`` and ``assistant`` messages'
    ``text`` parts and ``toolCall`` parts, in order (tool results and model
    changes are not the conversation)."""
    from . import conversation as c
    from .conversation import EntryKind, cut, stamp

    path = c.newest(session_dirs(query), (".jsonl",), query.started)
    records = c.json_lines(c.tail_lines(path) if path is not None else None)
    headers = [r.get("cwd") for r in records if r.get("type") == "session"]
    if headers and headers[0] not in c.cwds(query):
        return []  # the folder's name is the project's, its header another's: not read
    out: list[Entry] = []
    for record in records:
        at, message = stamp(record.get("timestamp")), record.get("message")
        if record.get("type") != "message" or at is None or not isinstance(message, dict):
            continue
        role, parts = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            continue
        if isinstance(parts, str):
            parts = [{"type": "text", "text": parts}]
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict):
                continue
            text = part.get("text")
            if part.get("type") == "text" and isinstance(text, str) and text.strip():
                out.append(c.Entry(EntryKind.PROMPT if role == "user" else EntryKind.REPLY, at,
                                   cut(text.strip()), "transcript"))
            elif part.get("type") == "toolCall" and role == "assistant":
                out.append(c.tool_entry(at, part.get("name"), part.get("arguments")))
    return out


AGENT = Agent(name=NAME, conversation=read_conversation)

__all__ = ["AGENT", "HOME_ENV", "NAME", "read_conversation", "session_dirs"]
