"""What the agent's own hooks tell the handoff record, and the session-start handoff.

``agentwrap hook`` (:mod:`agentwrap.surfaces.hooks.handler`) calls :func:`on_hook`
once per run. Two jobs, both cheap (json and a rename; nothing of the store):

* **notes**: the payloads carry what the screen cannot tell reliably: the
  person's prompt (Claude/Codex ``UserPromptSubmit``; Gemini's ``AfterAgent``
  carries it too, its ``BeforeAgent`` is not registered: ``prompt``; an agent
  whose payloads carry none reads it at its turn's end from its own history:
  the agent record's ``prompt_from_history``), the agent's reply at a turn's end (``last_assistant_message``,
  ``prompt_response``), the tool calls (``PostToolUse``/``PostToolBatch``/
  ``AfterTool``) and the transcript's path. They go into a small notes file
  per session that the supervisor folds into the record (:mod:`.collect`).
* **session start**: at ``SessionStart`` (``source: startup``) the handoff
  prepared by ``agentwrap run`` is returned once, for the hook's
  ``additionalContext``. It reaches the model with the session's first
  prompt (no agent starts a turn for it), so it counts as *delivered* (audit
  ``continuity_delivered``, channel ``hook``) at the first hook that shows a
  turn (the prompt's; a tool call's or the turn end's should that be missed),
  not when handed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..agents.all_agents import get
from ..audit import AuditLog
from ..paths import Paths, check_session_name, private_dir, write_private

PROMPT_SIGNAL = "prompt_submitted"
TURN_END_SIGNAL = "turn_end"
CONTEXT = "context"
#: Hook actions that mean a model turn has run since the start (the prompt's;
#: a tool call's or a turn end's should that one be missed): the context the
#: session start handed over has then reached the model.
TURN_SIGNS = frozenset({PROMPT_SIGNAL, TURN_END_SIGNAL, CONTEXT, "question"})
#: The session-start events (Copilot CLI names its own ``sessionStart``) and
#: the ``source`` of a new session's start (Copilot says ``new``, also after
#: ``/clear``; the others ``startup``, then ``resume``, ``clear``, ``compact``).
START_EVENTS = frozenset({"SessionStart", "sessionStart"})
START_SOURCES = (None, "startup", "new")
#: The events that carry tool calls, per agent.
TOOL_EVENTS = ("PostToolUse", "PostToolBatch", "AfterTool")
REPLY_FIELDS = ("last_assistant_message", "prompt_response")
#: Most characters of a prompt or reply noted (the record keeps less).
MAX_NOTE_CHARS = 8000
MAX_TOOLS = 20
#: A prompt that is agentwrap's own handoff (typed) is not the session's goal.
HANDOFF_MARK = "[agentwrap: handoff from the previous session"


def notes_file(paths: Paths, session: str) -> Path:
    return paths.state_dir / "continuity" / "notes" / f"{check_session_name(session)}.json"


def handoff_file(paths: Paths, session: str) -> Path:
    """The handoff prepared for ``session`` (same place as ContinuityStore's)."""
    return paths.state_dir / "continuity" / "handoff" / f"{check_session_name(session)}.json"


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: dict[str, Any]) -> None:
    private_dir(path.parent, repair=True)
    write_private(path, json.dumps(data, ensure_ascii=False).encode("utf-8"))


def _target(tool_input: Any) -> str:
    if not isinstance(tool_input, dict):
        return ""
    for key in ("command", "file_path", "path", "absolute_path", "pattern", "url"):
        value = tool_input.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value:
            return value[:300]
    return ""


def _failed(response: Any) -> bool | None:
    if isinstance(response, dict):
        if response.get("is_error") or response.get("error"):
            return False
        code = response.get("exit_code", response.get("exitCode"))
        if isinstance(code, int):
            return code == 0
    return None


def tool_calls(event: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls a payload reports: name, target, ok (None: not known)."""
    calls = payload.get("tool_calls") if event == "PostToolBatch" else [payload]
    out: list[dict[str, Any]] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict) or not isinstance(call.get("tool_name"), str):
            continue
        out.append({"tool": call["tool_name"][:80], "target": _target(call.get("tool_input")),
                    "at": time.time(), "ok": _failed(call.get("tool_response"))})
    return out


def note(paths: Paths, session: str, event: str, todo: str, payload: dict[str, Any]) -> None:
    """Fold what this payload says into the session's notes file."""
    path = notes_file(paths, session)
    if not path.parent.parent.is_dir():  # no continuity for this state dir: nothing to keep
        return
    notes = read_json(path)
    changed = False
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and transcript and notes.get("transcript_path") != transcript:
        notes["transcript_path"] = transcript[:1000]
        changed = True
    prompt = payload.get("prompt")
    # The prompt's own hook counts it. A turn's end that carries its prompt
    # (Gemini's AfterAgent: its BeforeAgent is not registered, to spare the
    # prompt a hook the agent waits for) counts it when no prompt hook did.
    opened = bool(notes.get("prompt_open"))
    if todo == TURN_END_SIGNAL and opened:
        notes["prompt_open"] = False
        changed = True
    counts = todo == PROMPT_SIGNAL or (todo == TURN_END_SIGNAL and not opened)
    if counts and isinstance(prompt, str) and prompt.strip() and HANDOFF_MARK not in prompt:
        notes["prompts"] = int(notes.get("prompts") or 0) + 1
        notes.setdefault("goal", prompt[:MAX_NOTE_CHARS])
        notes["prompt_open"] = todo == PROMPT_SIGNAL
        changed = True
    if todo == TURN_END_SIGNAL:
        for name in REPLY_FIELDS:
            reply = payload.get(name)
            if isinstance(reply, str) and reply.strip():
                notes["last_reply"] = reply[-MAX_NOTE_CHARS:]
                changed = True
                break
    if todo == CONTEXT and event in TOOL_EVENTS:
        calls = tool_calls(event, payload)
        if calls:
            notes["tools"] = [*(notes.get("tools") or []), *calls][-MAX_TOOLS:]
            changed = True
    if changed:
        notes["at"] = time.time()
        write_json(path, notes)


def session_start(paths: Paths, session: str, payload: dict[str, Any]) -> str:
    """The prepared handoff, once, at the agent's start ("" otherwise)."""
    if payload.get("source") not in START_SOURCES:
        return ""  # resume, clear, compact: not a new session's start
    path = handoff_file(paths, session)
    data = read_json(path)
    text = data.get("text")
    if data.get("channel") != "hook" or data.get("handed_at") or not isinstance(text, str):
        return ""
    data["handed_at"] = time.time()
    write_json(path, data)
    AuditLog(paths.audit_log).write(event="continuity_handed", session=session, channel="hook",
                                    record=data.get("record"), size=len(text.encode("utf-8")))
    return text


def first_prompt(paths: Paths, session: str) -> None:
    """A handoff handed at the start has now gone to the model in the first turn."""
    path = handoff_file(paths, session)
    data = read_json(path)
    if data.get("channel") != "hook" or not data.get("handed_at") or data.get("delivered_at"):
        return
    data["delivered_at"] = time.time()
    write_json(path, data)
    AuditLog(paths.audit_log).write(event="continuity_delivered", session=session,
                                    channel="hook", record=data.get("record"))


def on_hook(paths: Paths, session: str, agent: str, event: str, todo: str,
            payload: dict[str, Any], environ: Mapping[str, str] | None = None) -> str | None:
    """The handler's one call: notes always; at a session start, the handoff
    text to hand over ("" for none), else None (the handler goes on as usual).
    ``environ``: the agent's environment (default: this hook process's), where
    an agent's own history is found (``prompt_from_history``). Never raises: continuity must not disturb a hook."""
    try:
        if event in START_EVENTS:
            return session_start(paths, session, payload)
        spec = get(agent)
        read_prompt = spec.prompt_from_history if spec is not None else None
        if read_prompt is not None and todo == TURN_END_SIGNAL and "prompt" not in payload:
            payload = {**payload, "prompt": read_prompt(payload, os.environ if environ is None
                                                        else environ)}
        note(paths, session, event, todo, payload)
        if todo in TURN_SIGNS:
            first_prompt(paths, session)
    except Exception as exc:  # noqa: BLE001 - a hook never fails the agent
        try:
            line = f"continuity: {agent} {event}: {type(exc).__name__}: {exc}\n"
            fd = os.open(paths.supervisor_log(session), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                         0o600)
            try:
                os.write(fd, line.encode("utf-8", "replace"))
            finally:
                os.close(fd)
        except (OSError, ValueError):
            pass
        return "" if event in START_EVENTS else None
    return None


__all__ = ["HANDOFF_MARK", "START_EVENTS", "START_SOURCES", "TURN_SIGNS", "handoff_file",
           "notes_file", "on_hook", "read_json", "session_start", "tool_calls"]
