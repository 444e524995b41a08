"""What each agent's hook events mean to agentwrap, and the JSON each expects back.

Captured from the real CLIs (tests/fixtures/hooks/, how in its README): Claude
Code 2.1.197, Codex 0.169.0, Gemini CLI 0.61.0 and Qwen Code 0.15.10 send one
JSON object on the hook's stdin (``hook_event_name``, ``session_id``, ``cwd``, ...) and read the
hook's stdout; GitHub Copilot CLI 1.0.102 sends camelCase (``sessionId``,
``toolName``, ``toolArgs``; no event name but in its notification, which says
``"Notification"``). Two kinds of event matter here:

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
  a user message before the prompt. OpenCode has no command hooks: agentwrap's
  plugin (agentwrap/sessions/opencode_plugin.js) runs this hook at its plugin
  events with a payload in Claude's names and appends a top-level
  ``additionalContext`` to the tool's result at ``tool.execute.after``.
* **signal** events say what the agent does (see
  :data:`agentwrap.sessions.signals.SIGNAL_STATES`); the hook answers nothing.
* **question** events (Claude, Codex and Qwen ``PermissionRequest``, just before the
  agent opens a permission dialog or AskUserQuestion's) carry the exact
  request; the hook keeps it for the supervisor and, when an answer rule
  decides it, answers in the shape both read (:func:`permission_output`;
  Codex's schema: tests/fixtures/hooks/codex/PermissionRequest.output.jsonschema).

Pure data and functions: nothing here opens the store.
"""

from __future__ import annotations

from typing import Any

CONTEXT = "context"
#: A request the agent is about to ask the person (:mod:`agentwrap.answers.hook_questions`).
QUESTION = "question"
#: A notification event: the signal depends on its ``notification_type``.
NOTIFICATION = "notification"

#: agent -> hook event -> CONTEXT, NOTIFICATION, or the signal it gives.
EVENTS: dict[str, dict[str, str]] = {
    "claude": {
        "SessionStart": CONTEXT,
        "PostToolBatch": CONTEXT,  # once per batch of tool calls (2.1.197 has it)
        "PostToolUse": CONTEXT,  # once per tool call: for versions without PostToolBatch
        "UserPromptSubmit": "prompt_submitted",
        "Stop": "turn_end",
        "Notification": NOTIFICATION,
        "PermissionRequest": QUESTION,  # a permission dialog or AskUserQuestion is to open
    },
    "codex": {
        "SessionStart": CONTEXT,
        "PostToolUse": CONTEXT,
        "UserPromptSubmit": "prompt_submitted",
        "Stop": "turn_end",
        "PermissionRequest": QUESTION,  # its approval dialog is to open
    },
    "gemini": {
        "SessionStart": CONTEXT,
        "AfterTool": CONTEXT,
        "BeforeAgent": "prompt_submitted",
        "AfterAgent": "turn_end",
        "Notification": NOTIFICATION,
    },
    "qwen": {  # Claude's names and shapes (Qwen Code 0.15.10)
        "SessionStart": CONTEXT,
        "PostToolUse": CONTEXT,  # its additionalContext is appended to the tool result
        "UserPromptSubmit": "prompt_submitted",  # also after each tool result: CONTINUATIONS
        "Stop": "turn_end",
        "Notification": NOTIFICATION,
        "PermissionRequest": QUESTION,  # just before its permission dialog opens
    },
    "copilot": {  # its own names (Copilot CLI 1.0.102, a --plugin-dir plugin's hooks)
        "sessionStart": CONTEXT,  # at the first prompt (source "new"), not at launch
        "postToolUse": CONTEXT,  # after a successful tool call; appended to its result
        "userPromptSubmitted": "prompt_submitted",
        "agentStop": "turn_end",  # no reply in it (only transcriptPath): no ACKs from it
        "notification": NOTIFICATION,  # run in the background; notification_type as Claude's
    },
    "opencode": {  # agentwrap's own plugin's names: OpenCode's plugin events (1.18.33)
        "chat.message": "prompt_submitted",  # a person's prompt goes to the model
        "tool.execute.after": CONTEXT,  # the plugin appends it to the tool's result
        "session.idle": "turn_end",  # no reply in it: no ACKs from it
        "permission.asked": "permission_prompt",  # its permission dialog opens
        "question.asked": "permission_prompt",  # its question tool's dialog opens
    },
}

#: Agents that read ``additionalContext`` at the top level of the hook's output
#: only (Copilot ignores ``hookSpecificOutput``; agentwrap's OpenCode plugin
#: reads it there).
FLAT_CONTEXT = frozenset({"copilot", "opencode"})

#: agent -> the prompt event it fires again inside a turn, with an empty
#: ``prompt``, each time a tool result goes back to the model (Qwen Code runs
#: UserPromptSubmit for every request of the turn): not a person's prompt.
CONTINUATIONS = {"qwen": "UserPromptSubmit"}

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
    if kind == CONTEXT and payload.get("agent_id"):
        # Claude fills agent_id in hooks that fire inside a subagent: its context
        # would go to the subagent, never to the session's own model
        return None
    return kind


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
        return {"additionalContext": text}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


__all__ = [
    "CONTEXT", "CONTINUATIONS", "EVENTS", "FLAT_CONTEXT", "MAX_CONTEXT_CHARS", "NOTIFICATION_SIGNALS", "QUESTION", "action",
    "context_output", "permission_output",
]
