"""The agent's reply at a turn's end, read from its transcript file.

Claude Code, Codex and Qwen Code put the turn's last reply in their turn-end
hook's payload (``last_assistant_message``), Gemini CLI too (``prompt_response``);
GitHub Copilot CLI 1.0.102's ``agentStop`` names only its transcript
(``transcriptPath``: the session's ``events.jsonl``, one JSON event a line).
The events are in order there (``assistant.message``, ``assistant.turn_end``,
then ``hook.start`` of agentStop with the payload's ``timestamp``), but written a
moment after they happen: on the real CLI the hook's first read often found the
reply not there yet. So the file is read again (every :data:`POLL_S`, at most
:data:`WAIT_S`) until it shows the hook's own start, and the reply is what
comes before it (a later turn's words are not this turn's).

The reply is what the model said since the person's last message: the
``content`` of every ``assistant.message`` after the last ``user.message``
(a tool loop says something between tool calls too, and an ACK may come in any
of them). Tool results and hook context are other events, so the words that
*ask* for an ACK (``Reply "ACK <token>"``, handed over inside a tool result)
are never taken for one. Only the file's tail is read (:data:`MAX_TAIL`): a
turn's reply is at its end, and a long session's transcript is not read whole
at every turn's end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

#: Most of a transcript read, from its end.
MAX_TAIL = 2 * 1024 * 1024
#: Most of the reply kept (the ACK is searched in it).
MAX_REPLY = 20_000
#: How long a turn-end hook waits for its own start to show in the file, and how
#: often it looks.
WAIT_S = 2.0
POLL_S = 0.05


def reply_from(path: str, stop_at: object = None, wait_s: float = 0.0) -> str:
    """The model's words since the last user message in the transcript at
    ``path`` (Copilot CLI's ``events.jsonl``); "" when there is none, or the
    file is not a readable regular file. ``stop_at``: the turn-end payload's
    ``timestamp``: Copilot writes its events to the file a moment after they
    happen (the hook can run before the reply is on disk), so the file is read
    again, for at most ``wait_s``, until it shows that hook's own start; the
    reply is what comes before it."""
    deadline = time.monotonic() + wait_s
    while True:
        lines = _tail(path)
        if lines is None:
            return ""
        reply, seen = _reply(lines, stop_at)
        if seen or stop_at is None or time.monotonic() >= deadline:
            return reply
        time.sleep(POLL_S)


def _reply(lines: list[bytes], stop_at: object) -> tuple[str, bool]:
    """(the reply, whether the turn-end hook's start was seen)."""
    said: list[str] = []
    seen = stop_at is None
    for line in reversed(lines):
        event = _event(line)
        if event is None:
            continue
        kind = event.get("type")
        data = event.get("data")
        if not seen:
            if kind == "hook.start" and isinstance(data, Mapping) and _stamp(data) == stop_at:
                seen = True
            continue
        if kind == "user.message":
            break
        if kind == "assistant.message" and isinstance(data, Mapping):
            content = data.get("content")
            if isinstance(content, str) and content:
                said.append(content)
    if not seen:  # not written yet: what is there
        return _reply(lines, None)[0], False
    return "\n".join(reversed(said))[-MAX_REPLY:], True


def _stamp(data: Mapping[str, object]) -> object:
    hook_input = data.get("input")
    if data.get("hookType") != "agentStop" or not isinstance(hook_input, Mapping):
        return None
    return hook_input.get("timestamp")


def _tail(path: str) -> list[bytes] | None:
    """The lines of the file's last :data:`MAX_TAIL` bytes (whole lines only)."""
    from ...agents.conversation import tail_lines

    return tail_lines(path, MAX_TAIL, MAX_TAIL)


def _event(line: bytes) -> Mapping[str, object] | None:
    if not line.strip():
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


__all__ = ["MAX_TAIL", "WAIT_S", "reply_from"]
