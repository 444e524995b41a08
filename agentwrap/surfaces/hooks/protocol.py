"""What each agent's hook events mean to agentwrap, and the JSON each expects back.

Captured from the real CLIs (tests/fixtures/hooks/, how in its README): Claude
Code 2.1.197, Codex 0.169.0, Gemini CLI 0.61.0 and Qwen Code 0.15.10 send one
JSON object on the hook's stdin (``hook_event_name``, ``session_id``, ``cwd``, ...) and read the
hook's stdout; GitHub Copilot CLI 1.0.102 sends camelCase (``sessionId``,
``toolName``, ``toolArgs``; no event name but in its notification, which says
``"Notification"``); Cline CLI 3.0.65 its own shape (``hookName``, ``taskId``,
``agent_id`` in every payload, ``parent_agent_id`` set inside a subagent, the
reply in ``turn.outputText``); Kimi Code 2.1.0 Claude's names and fields, its
``prompt`` a list of content parts. Two kinds of event matter here:

* **context** events let a hook add text to what the model reads next: the
  session start and the safe point between tool calls (Claude ``PostToolBatch``,
  or ``PostToolUse`` where that is what is registered; Codex and Qwen
  ``PostToolUse``; Gemini ``AfterTool``). All four read the same shape,
  ``{"hookSpecificOutput": {"hookEventName": E, "additionalContext": TEXT}}``
  (Claude ignores a top-level ``additionalContext``; Codex's schema requires
  ``hookEventName`` and refuses other keys; Gemini escapes ``<`` and ``>`` in it
  and wraps it in ``<hook_context>``; Qwen escapes them as ``&lt;`` ``&gt;``). Copilot
  reads only a top-level ``{"additionalContext": TEXT}`` (:data:`FLAT_CONTEXT`): at
  ``postToolUse`` it is appended to the tool result, at ``sessionStart`` it becomes
  a user message before the prompt. Cline reads a top-level
  ``{"contextModification": TEXT}`` (or ``context``): after ``PostToolUse`` it
  becomes a user message ``<hook_context source="PostToolUse" ...>`` after the
  tool result. Kimi Code runs its PostToolUse in the background and never reads
  its output (checked: a message handed there never reached the model), so it
  gets signals only and its messages are typed after the turn.
  a user message before the prompt. OpenCode has no command hooks: agentwrap's
  plugin (agentwrap/agents/opencode_plugin.js) runs this hook at its plugin
  events with a payload in Claude's names and appends a top-level
  ``additionalContext`` to the tool's result at ``tool.execute.after``.
* **signal** events say what the agent does (see
  :data:`agentwrap.sessions.signals.SIGNAL_STATES`); the hook answers nothing.
Each agent's part of this is its module's (:mod:`agentwrap.agents`); the tables
here gather them for the hook.

* **question** events (Claude, Codex and Qwen ``PermissionRequest``, just before the
  agent opens a permission dialog or AskUserQuestion's; Copilot's
  ``permissionRequest`` for every request, :data:`TEXT_ONLY_QUESTIONS`) carry the exact
  request; the hook keeps it for the supervisor and, when an answer rule
  decides it, answers in the shape both read (:func:`permission_output`;
  Codex's schema: tests/fixtures/hooks/codex/PermissionRequest.output.jsonschema).

Pure data and functions: nothing here opens the store.
"""

from __future__ import annotations

from typing import Any

from ...agents.all_agents import AGENTS, get
from ...agents.base import CONTEXT, NOTIFICATION, QUESTION

#: agent -> hook event -> CONTEXT, NOTIFICATION, or the signal it gives (each
#: agent's ``events``, :mod:`agentwrap.agents`).
EVENTS: dict[str, dict[str, str]] = {a.name: dict(a.events) for a in AGENTS.values() if a.events}

#: Agents that read the context at the top level of the hook's output only,
#: and under which key (Copilot ignores ``hookSpecificOutput``; Cline reads
#: ``contextModification``; agentwrap's OpenCode plugin reads ``additionalContext``).
FLAT_CONTEXT = {a.name: a.flat_context for a in AGENTS.values() if a.flat_context}

#: The payload field that is set when a hook fires inside a subagent, per agent
#: (default ``agent_id``: Claude fills it only there; Cline names every run's
#: agent in ``agent_id`` and a subagent's parent in ``parent_agent_id``).
SUBAGENT_FIELDS = {a.name: a.subagent_field for a in AGENTS.values()
                   if a.subagent_field != "agent_id"}

#: Agents whose permission hook fires for every request, before the agent decides
#: whether to ask at all: Copilot CLI 1.0.102 runs ``permissionRequest`` before its
#: own rules (a read-only ``cat`` it runs unasked sends the same payload as a
#: ``touch`` it asks about; only the ``notification`` hook, ``permission_prompt``,
#: says a dialog opened). Their hook keeps the exact request for the supervisor,
#: which uses it only for a dialog that is on screen, and says nothing else: no
#: signal (no dialog may follow) and no rule's answer (an ``allow`` would also
#: override the person's own Copilot rules, ``--deny-tool`` included, which run
#: after the hook; a ``deny`` would refuse what Copilot would run unasked).
TEXT_ONLY_QUESTIONS = frozenset(a.name for a in AGENTS.values() if a.text_only_questions)

#: agent -> the turn-end payload's field naming its transcript, for agents whose
#: turn-end hook carries no reply (Copilot): the reply is read from that file
#: (:mod:`.transcript`).
TRANSCRIPT_FIELDS = {a.name: a.transcript_field for a in AGENTS.values() if a.transcript_field}

#: agent -> the prompt event it fires again inside a turn, with an empty
#: ``prompt``, each time a tool result goes back to the model (Qwen Code runs
#: UserPromptSubmit for every request of the turn): not a person's prompt.
CONTINUATIONS = {a.name: a.continuation for a in AGENTS.values() if a.continuation}

#: ``notification_type`` -> signal (other notifications are ignored).
NOTIFICATION_SIGNALS = {
    "permission_prompt": "permission_prompt",  # Claude
    "idle_prompt": "idle_prompt",  # Claude
    "ToolPermission": "permission_prompt",  # Gemini
}

#: Longest ``additionalContext`` agentwrap hands over (Claude Code moves a
#: value over 10,000 characters to a file and shows a preview instead).
MAX_CONTEXT_CHARS = 9_500


def action(agent: str, event: str, payload: dict[str, Any]) -> str | None:
    """CONTEXT, a signal name, or None (an event agentwrap does nothing with,
    or a payload that names another event than the one registered)."""
    kind = EVENTS.get(agent, {}).get(event)
    if kind is None:
        return None
    named = payload.get("hook_event_name")
    if named is not None and str(named).lower() != event.lower():
        return None  # (Copilot's notification names itself "Notification")
    if kind == NOTIFICATION:
        return NOTIFICATION_SIGNALS.get(str(payload.get("notification_type", "")))
    if CONTINUATIONS.get(agent) == event and not str(payload.get("prompt") or "").strip():
        return None  # a tool result on its way back to the model, inside the turn
    if kind == CONTEXT and payload.get(SUBAGENT_FIELDS.get(agent, "agent_id")):
        # a hook fired inside a subagent: its context would go to the
        # subagent, never to the session's own model
        return None
    return kind


def normalised(agent: str, payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with what agentwrap reads where the others put it: Cline's
    reply (``turn.outputText``) as ``last_assistant_message``, so a turn's end
    finds its ACKs and the handoff notes its last reply; Kimi's prompt (a list
    of content parts) as its text, so the notes count and keep it."""
    spec = get(agent)
    return payload if spec is None else spec.normalise(payload)


def permission_output(event: str, behavior: str, message: str = "") -> dict[str, Any]:
    """A ``PermissionRequest`` answer: ``behavior`` "allow" or "deny" (with
    ``message``, which the model reads). Claude Code and Codex read the same
    shape; Codex refuses any other key (and fails closed on ``updatedInput``,
    ``updatedPermissions`` or ``interrupt``), so none is sent."""
    decision: dict[str, Any] = {"behavior": behavior}
    if behavior == "deny" and message:
        decision["message"] = message
    return {"hookSpecificOutput": {"hookEventName": event, "decision": decision}}


def context_output(event: str, text: str, agent: str = "") -> dict[str, Any]:
    """The answer that hands ``text`` to the model, in the shape ``agent`` reads."""
    if agent in FLAT_CONTEXT:
        return {FLAT_CONTEXT[agent]: text}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


__all__ = [
    "CONTEXT", "CONTINUATIONS", "EVENTS", "FLAT_CONTEXT", "MAX_CONTEXT_CHARS", "NOTIFICATION_SIGNALS", "QUESTION",
    "SUBAGENT_FIELDS", "TEXT_ONLY_QUESTIONS", "TRANSCRIPT_FIELDS",
    "action", "context_output", "normalised", "permission_output",
]
