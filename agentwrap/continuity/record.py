"""The handoff record: what one session in a project did, as far as agentwrap saw.

One record per launch, rewritten as the session goes (see :mod:`.store`), so a
session that crashes or is killed with SIGKILL still leaves the last one
written. Every text field came from an agent, a person or a webhook and is
hostile: it is kept as plain data here and made safe only where it is shown
(:mod:`.render`).

Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: Bumped when a field changes meaning; older records are still read (unknown keys dropped).
VERSION = 1
#: Most tool calls, checks and messages kept per record (the newest win).
MAX_ITEMS = 20
#: Longest text kept per field (a reply, a goal): the record stays small to rewrite.
MAX_FIELD_CHARS = 4000


@dataclass
class ToolNote:
    """A tool call the agent made (from its hooks): ``tool`` and what it acted on."""

    tool: str
    target: str = ""  # a command line or a file path
    at: float = 0.0
    ok: bool | None = None  # None: the result was not seen


@dataclass
class CheckNote:
    """A check that ran (a feedback source's command, from the audit log):
    its ``name``, whether it passed, a short ``summary`` of its output."""

    name: str
    ok: bool | None = None
    summary: str = ""
    at: float = 0.0


@dataclass
class MessageNote:
    """A queued message for the session: who sent it, its status, its first words."""

    id: str
    source: str
    status: str
    preview: str = ""
    at: float = 0.0


@dataclass
class HandoffRecord:
    """What the next session in ``project`` should know about this one."""

    project: str  # the project's real path: the record's key
    session: str
    agent: str  # the profile's name
    started: float
    updated: float = 0.0
    ended: float | None = None
    state: str = "starting"  # the agent's last state seen (busy, ready, waiting_input, ...)
    end_state: str = "running"  # "exited", or "crashed" (read back with its writer gone)
    exit_code: int | None = None
    writer_pid: int | None = None  # the process keeping the record: gone and not ended = crashed
    goal: str = ""  # the first prompt of the session
    prompts: int = 0
    git_base: str = ""  # HEAD when the session started
    git_branch: str = ""
    git_untracked: list[str] = field(default_factory=list)  # untracked at the start: not "changed"
    files_changed: list[str] = field(default_factory=list)
    tools: list[ToolNote] = field(default_factory=list)
    checks: list[CheckNote] = field(default_factory=list)
    delivered: list[MessageNote] = field(default_factory=list)
    # delivered with an ACK asked that never came (the agent exited first): it may
    # not have read them, so the next session hears of them apart from ``delivered``
    unacknowledged: list[MessageNote] = field(default_factory=list)
    pending: list[MessageNote] = field(default_factory=list)
    last_reply: str = ""
    reply_source: str = ""  # "hook" (the agent's own turn-end payload) or "screen"
    transcript_path: str = ""
    handoff_from: str = ""  # the record id this session was handed at its start
    version: int = VERSION

    @property
    def id(self) -> str:
        """Unique per launch and sortable by start time."""
        return f"{int(self.started * 1000):013d}-{self.session}"

    @property
    def substantial(self) -> bool:
        """Anything worth handing over (a session started and quit at once is not)."""
        return bool(self.goal or self.files_changed or self.tools or self.checks
                    or self.delivered or self.unacknowledged or self.pending or self.last_reply)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HandoffRecord:
        known = {f.name for f in fields(cls)}
        args = {k: v for k, v in data.items() if k in known}
        args["tools"] = [_item(ToolNote, t) for t in data.get("tools") or []]
        args["checks"] = [_item(CheckNote, c) for c in data.get("checks") or []]
        args["delivered"] = [_item(MessageNote, m) for m in data.get("delivered") or []]
        args["unacknowledged"] = [_item(MessageNote, m)
                                  for m in data.get("unacknowledged") or []]
        args["pending"] = [_item(MessageNote, m) for m in data.get("pending") or []]
        args["files_changed"] = [str(f) for f in data.get("files_changed") or []]
        args["git_untracked"] = [str(f) for f in data.get("git_untracked") or []]
        return cls(**args)


def _item(cls: Any, data: Any) -> Any:
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in dict(data).items() if k in known})


def clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """``text`` cut to ``limit`` characters, keeping the end (a reply's last words
    matter most)."""
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def newest(items: list[Any], limit: int = MAX_ITEMS) -> list[Any]:
    return items[-limit:]


__all__ = [
    "MAX_FIELD_CHARS", "MAX_ITEMS", "VERSION", "CheckNote", "HandoffRecord", "MessageNote",
    "ToolNote", "clip", "newest",
]
