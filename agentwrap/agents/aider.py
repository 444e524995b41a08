"""Aider (``patterns/aider.toml``): no hooks; its ``--read`` file is its native channel.

What Aider gets is the profile's ``[channels] read_file`` option
(:mod:`agentwrap.delivery.read_channel`, registered for any profile that names
one by :func:`agentwrap.sessions.channels.plan`), and its turn end is the
profile's ``[channels] turn_end`` option (:mod:`agentwrap.sessions.turn_end`:
its notifications command marks a file), so its record here is its name and
its conversation reader: its start-up context is typed, and its edits are the
watcher's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Agent

if TYPE_CHECKING:
    from pathlib import Path

    from .conversation import Entry, Query

NAME = "aider"

# --- its conversation (issue 42) ------------------------------------------------------

#: Its chat log and its prompts' log, as their option names and default file names.
CHAT = ("chat-history-file", ".aider.chat.history.md")
INPUT = ("input-history-file", ".aider.input.history")
#: A chat's first line in the log (the local time it started).
STARTED = "# aider chat started at "
#: A line of what Aider said of its own (``> Applied edit to FILE``: an edit it made).
EDIT = "> Applied edit to "


def history_file(query: Query, option: tuple[str, str]) -> Path | None:
    """Where Aider 0.86 writes that log for the session's project: ``AIDER_<OPTION>``
    of the environment, else the option in a ``.aider.conf.yml`` (the project's
    over the home's, as Aider loads them), else the default name in the project."""
    from pathlib import Path

    from .conversation import read_whole

    key, default = option
    env = query.environ.get("AIDER_" + key.upper().replace("-", "_"), "").strip()
    if env:
        return Path(query.cwd, env)
    said = ""
    for folder in (query.environ.get("HOME", ""), query.cwd):
        raw = read_whole(Path(folder) / ".aider.conf.yml", 1 << 20) if folder else None
        for line in (raw or b"").decode("utf-8", "replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                said = value.strip().strip("'\"")
    if said:
        return Path(query.cwd, said)
    return Path(query.cwd, default) if query.cwd else None


def _local(text: str) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.strip()).timestamp()  # Aider writes local time
    except ValueError:
        return None


def read_conversation(query: Query) -> list[Entry]:
    """The conversation in Aider's chat log (markdown: ``#### `` lines are the
    prompt, ``> `` lines Aider's own output, the rest the model's reply), of
    the last chat started since the session did; each prompt at the time its
    input log gives it (the chat log keeps no times but a chat's start), a
    reply just after its prompt, ``> Applied edit to FILE`` an edit."""
    from . import conversation as c

    chat = history_file(query, CHAT)
    data = c.tail_bytes(chat) if chat is not None else None
    if data is None:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(STARTED)]
    begun = _local(lines[starts[-1]][len(STARTED):]) if starts else None
    if begun is None or begun < int(query.started) - 1:
        return []  # the last chat is another session's (or started before this one)
    return _entries(lines[starts[-1] + 1:], begun, _prompt_times(query, begun))


def _prompt_times(query: Query, since: float) -> list[float]:
    from . import conversation as c

    path = history_file(query, INPUT)
    data = c.tail_bytes(path) if path is not None else None
    times = [_local(line[2:]) for line in (data or b"").decode("utf-8", "replace").splitlines()
             if line.startswith("# ")]
    return [t for t in times if t is not None and t >= since]


def _entries(lines: list[str], begun: float, times: list[float]) -> list[Entry]:
    from .conversation import Entry, EntryKind, cut

    out: list[Entry] = []
    prompt: list[str] = []
    reply: list[str] = []
    at = begun

    def close_reply() -> None:
        nonlocal at
        text = "\n".join(reply).strip()
        reply.clear()
        if text:
            at += 0.001
            out.append(Entry(EntryKind.REPLY, at, cut(text), "transcript"))

    for line in lines:
        if line.startswith("####"):
            close_reply()
            prompt.append(line[5:].rstrip())
            continue
        if prompt:
            asked = sum(e.kind is EntryKind.PROMPT for e in out)
            at = max(at + 0.001, times[asked] if asked < len(times) else at)
            out.append(Entry(EntryKind.PROMPT, at, cut("\n".join(prompt).strip()), "transcript"))
            prompt.clear()
        if line.startswith(EDIT):
            close_reply()
            target = line[len(EDIT):].strip()
            at += 0.001
            out.append(Entry(EntryKind.TOOL, at, cut(target), "transcript", tool="edit",
                             target=cut(target)))
        elif line.startswith(">"):
            close_reply()
        else:
            reply.append(line)
    close_reply()
    return out


AGENT = Agent(name=NAME, conversation=read_conversation)

__all__ = ["AGENT", "CHAT", "EDIT", "INPUT", "NAME", "STARTED", "history_file",
           "read_conversation"]
