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
  plugin (agentwrap/sessions/opencode_plugin.js) runs this hook at its plugin
  events with a payload in Claude's names and appends a top-level
  ``additionalContext`` to the tool's result at ``tool.execute.after``.
* **signal** events say what the agent does (see
  :data:`agentwrap.sessions.signals.SIGNAL_STATES`); the hook answers nothing.
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
        "agentStop": "turn_end",  # no reply in it: read from its transcriptPath
        "notification": NOTIFICATION,  # run in the background; notification_type as Claude's
        "permissionRequest": QUESTION,  # every request, asked or not: TEXT_ONLY_QUESTIONS
    },
    "cline": {  # its own names (Cline CLI 3.0.65, executables in a private CLINE_DIR/hooks)
        "TaskStart": "prompt_submitted",  # each prompt starts a run (in the background)
        "PostToolUse": CONTEXT,  # waited for; contextModification follows the tool result
        "TaskComplete": "turn_end",  # reply in turn.outputText (in the background)
        # a turn cancelled with Esc ends in this one (3.0.65 runs no TaskCancel then)
        "SessionShutdown": "turn_end",
    },
    "kimi": {  # Claude's names and fields (Kimi Code 2.1.0, [[hooks]] in a private config.toml)
        "UserPromptSubmit": "prompt_submitted",  # waited for; the person's prompts only
        "Stop": "turn_end",  # waited for; no reply text in it
        "PermissionRequest": "permission_prompt",  # in the background, as its dialog opens
        "Interrupt": "turn_end",  # the turn was cancelled (Esc)
    },
    "opencode": {  # agentwrap's own plugin's names: OpenCode's plugin events (1.18.33)
        "chat.message": "prompt_submitted",  # a person's prompt goes to the model
        "tool.execute.after": CONTEXT,  # the plugin appends it to the tool's result
        "session.idle": "turn_end",  # no reply in it: no ACKs from it
        "permission.asked": "permission_prompt",  # its permission dialog opens
        "question.asked": "permission_prompt",  # its question tool's dialog opens
    },
}

#: Agents that read the context at the top level of the hook's output only,
#: and under which key (Copilot ignores ``hookSpecificOutput``; Cline reads
#: ``contextModification``; agentwrap's OpenCode plugin reads ``additionalContext``).
FLAT_CONTEXT = {"copilot": "additionalContext", "cline": "contextModification",
                "opencode": "additionalContext"}

#: The payload field that is set when a hook fires inside a subagent, per agent
#: (default ``agent_id``: Claude fills it only there; Cline names every run's
#: agent in ``agent_id`` and a subagent's parent in ``parent_agent_id``).
SUBAGENT_FIELDS = {"cline": "parent_agent_id"}

#: Agents whose permission hook fires for every request, before the agent decides
#: whether to ask at all: Copilot CLI 1.0.102 runs ``permissionRequest`` before its
#: own rules (a read-only ``cat`` it runs unasked sends the same payload as a
#: ``touch`` it asks about; only the ``notification`` hook, ``permission_prompt``,
#: says a dialog opened). Their hook keeps the exact request for the supervisor,
#: which uses it only for a dialog that is on screen, and says nothing else: no
#: signal (no dialog may follow) and no rule's answer (an ``allow`` would also
#: override the person's own Copilot rules, ``--deny-tool`` included, which run
#: after the hook; a ``deny`` would refuse what Copilot would run unasked).
TEXT_ONLY_QUESTIONS = frozenset({"copilot"})

#: agent -> the turn-end payload's field naming its transcript, for agents whose
#: turn-end hook carries no reply (Copilot): the reply is read from that file
#: (:mod:`.transcript`).
TRANSCRIPT_FIELDS = {"copilot": "transcriptPath"}

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
    prompt = payload.get("prompt")
    if agent == "kimi" and isinstance(prompt, list):
        text = "".join(str(p.get("text") or "") for p in prompt
                       if isinstance(p, dict) and p.get("type") == "text")
        return {**payload, "prompt": text}
    if agent == "cline":
        turn = payload.get("turn")
        reply = turn.get("outputText") if isinstance(turn, dict) else None
        if isinstance(reply, str) and "last_assistant_message" not in payload:
            return {**payload, "last_assistant_message": reply}
    return payload


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
