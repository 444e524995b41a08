"""The parts of Codex's app-server protocol agentwrap reads, as typed data.

The server's messages are JSON objects with many fields that change between
releases (docs/codex-app-server.md, verified on 0.169.0); agentwrap reads only
the few it acts on, so each parser here takes what it needs and ignores the
rest. A message without a field agentwrap relies on raises
:class:`~agentwrap.errors.AppServerError` naming it, rather than acting on a
guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import AppServerError

#: Server requests that ask the person to approve something (a command, an edit, a
#: permission) or to answer (a question, an MCP elicitation); the TUI shows a
#: dialog for each while agentwrap may answer it.
APPROVAL_METHODS: tuple[str, ...] = (
    "item/commandExecution/requestApproval",
    "item/fileChange/requestApproval",
    "item/permissions/requestApproval",
    "item/tool/requestUserInput",
    "mcpServer/elicitation/request",
)

JSON = dict[str, Any]


def _str(params: Mapping[str, Any], key: str, what: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise AppServerError(f"Codex app-server: {what} without a string {key!r}")
    return value


def _opt_str(params: Mapping[str, Any], key: str) -> str | None:
    value = params.get(key)
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Notification:
    """A message from the server that needs no answer (``thread/status/changed``,
    ``turn/completed``, ``item/agentMessage/delta``...)."""

    method: str
    params: JSON


@dataclass(frozen=True)
class ThreadStatus:
    """``thread/status/changed``: sent to every connection, subscribed or not, so
    it is the one state signal a late client never misses. ``flags`` are the
    active flags (``waitingOnApproval``, ``waitingOnUserInput``)."""

    thread_id: str
    kind: str  # "active", "idle", "notLoaded", "systemError"
    flags: tuple[str, ...]

    @property
    def busy(self) -> bool:
        return self.kind == "active"


def thread_status(params: Mapping[str, Any]) -> ThreadStatus:
    """The status carried by a ``thread/status/changed`` notification."""
    status = params.get("status")
    if not isinstance(status, dict):
        raise AppServerError("Codex app-server: thread/status/changed without a status")
    flags = status.get("activeFlags") or []
    return ThreadStatus(
        thread_id=_str(params, "threadId", "thread/status/changed"),
        kind=_str(status, "type", "thread status"),
        flags=tuple(str(f) for f in flags),
    )


@dataclass(frozen=True)
class ApprovalRequest:
    """A server request the person (or agentwrap) must answer. ``command`` and
    ``cwd`` are what Codex will run, exactly (``/bin/bash -lc '...'``);
    ``actions`` are the commands as the model wrote them (``touch x``);
    ``decisions`` are the answers Codex offers, as their names."""

    request_id: int | str
    method: str
    thread_id: str
    turn_id: str | None
    item_id: str | None
    command: str | None
    cwd: str | None
    reason: str | None
    actions: tuple[str, ...]
    decisions: tuple[str, ...]
    params: JSON


def approval_request(request_id: int | str, method: str, params: JSON) -> ApprovalRequest:
    """The request as agentwrap reads it; ``method`` must be one of
    :data:`APPROVAL_METHODS`."""
    if method not in APPROVAL_METHODS:
        raise AppServerError(f"Codex app-server: {method!r} is not an approval request")
    actions = tuple(
        a["command"]
        for a in params.get("commandActions") or []
        if isinstance(a, dict) and isinstance(a.get("command"), str)
    )
    decisions = tuple(
        d if isinstance(d, str) else next(iter(d), "")
        for d in params.get("availableDecisions") or []
        if isinstance(d, (str, dict))
    )
    return ApprovalRequest(
        request_id=request_id,
        method=method,
        thread_id=_str(params, "threadId", method),
        turn_id=_opt_str(params, "turnId"),
        item_id=_opt_str(params, "itemId"),
        command=_opt_str(params, "command"),
        cwd=_opt_str(params, "cwd"),
        reason=_opt_str(params, "reason"),
        actions=actions,
        decisions=decisions,
        params=params,
    )


@dataclass(frozen=True)
class UserMessage:
    """A user message item of the thread: ``client_id`` is the
    ``clientUserMessageId`` its sender gave (agentwrap gives its attempt's id), the
    key that recognises after a crash whether a message reached Codex."""

    item_id: str
    turn_id: str | None
    client_id: str | None
    text: str


@dataclass(frozen=True)
class AgentMessage:
    """A completed agent message item: what the model said (an ACK is read here)."""

    item_id: str
    turn_id: str | None
    text: str


def _item_text(item: Mapping[str, Any]) -> str:
    parts = item.get("content") or []
    return "".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def user_message(item: Mapping[str, Any], turn_id: str | None) -> UserMessage | None:
    """The item as a :class:`UserMessage`, or None when it is another kind."""
    if item.get("type") != "userMessage":
        return None
    return UserMessage(
        item_id=_str(item, "id", "userMessage item"),
        turn_id=turn_id,
        client_id=_opt_str(item, "clientId"),
        text=_item_text(item),
    )


def agent_message(item: Mapping[str, Any], turn_id: str | None) -> AgentMessage | None:
    """The item as an :class:`AgentMessage`, or None when it is another kind."""
    if item.get("type") != "agentMessage":
        return None
    text = item.get("text")
    return AgentMessage(
        item_id=_str(item, "id", "agentMessage item"),
        turn_id=turn_id,
        text=text if isinstance(text, str) else "",
    )


def turn_in_progress(result: Mapping[str, Any] | None) -> str | None:
    """The id of the running turn in a ``thread/turns/list`` answer (newest
    first), or None when the newest turn has ended (or there is none). A client
    that did not start the turn (the person typed it in the TUI) hears no
    ``turn/started``: this is how it learns the id ``turn/steer`` expects."""
    for turn in (result or {}).get("data") or []:
        if isinstance(turn, dict) and isinstance(turn.get("id"), str):
            return turn["id"] if turn.get("status") == "inProgress" else None
    return None


def text_input(text: str) -> list[JSON]:
    """``input`` of turn/start, turn/steer and thread/queue/add for plain text.
    ``text_elements`` stays empty: no mention or skill chip is made of it (the
    text reaches the model as given; agent syntax is neutralised before)."""
    return [{"type": "text", "text": text, "text_elements": []}]
