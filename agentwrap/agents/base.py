"""What agentwrap knows of one agent CLI, in one place: the :class:`Agent` record.

Modelled on pre-commit's ``lang_base.py``: every agent is a module of
:mod:`agentwrap.agents` holding one :class:`Agent` (its ``AGENT``), and the
table in :mod:`agentwrap.agents.all_agents` is the only place that lists
them. Callers look an agent up there (:func:`~agentwrap.agents.all_agents.get`)
and read its fields; no caller names an agent (``tests/test_agents_table.py``
scans for that). The fields are the answers to the questions the rest of the
code asks of an agent:

* its launch registration (``register``: the hooks, the MCP server, the files
  a launch writes; :mod:`agentwrap.sessions.channels` calls it);
* its hook events and what each means (``hook_events``, ``events``, and the
  payload's quirks: ``flat_context``, ``subagent_field``, ``transcript_field``,
  ``continuation``, ``normalise``: :mod:`agentwrap.surfaces.hooks.protocol`);
* how a hook's request reads as a question (``tool_names``, ``one_tool``,
  ``every_request``, ``notification_details``: :mod:`agentwrap.answers.hook_questions`);
* the files its edit tools touched (``edit_tools``, ``patch_edits``:
  :mod:`agentwrap.feedback.edit_hook`) and whether its hooks report its edits
  at all (``edits_by_hook``: :mod:`agentwrap.feedback.companion`);
* how its start-up context reaches the model (``start_context``);
* its native channel, a server of its own (``native``: :mod:`agentwrap.sessions.native`).
* where its conversation is read (``conversation``: :mod:`agentwrap.agents.conversation`).

Pure data and stdlib only: a hook process imports this table, so nothing here
imports more than :mod:`dataclasses` (a ``register`` function imports
:mod:`agentwrap.agents.launch` when it runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from ..paths import Paths
    from .conversation import ConversationReader
    from .launch import Launch

#: A hook event that lets a hook add text to what the model reads next.
CONTEXT = "context"
#: A request the agent is about to ask the person (:mod:`agentwrap.answers.hook_questions`).
QUESTION = "question"
#: A notification event: the signal depends on its ``notification_type``.
NOTIFICATION = "notification"


@dataclass(frozen=True)
class StartContext:
    """How an agent's start-up context (the previous session's handoff, what was
    queued before it started) reaches the model, and what proves it did.

    ``channel``: ``hook``: the session-start hook's output, which the agent puts
    in the request of the first prompt: counted delivered at the first hook that
    shows a turn (:mod:`agentwrap.continuity.hooks`); ``typed``: queued as startup
    context and typed once the agent is ready, with an ACK asked (proven by the
    ACK, like any message). ``proof``: for ``hook``, where it was seen in the
    model's request on the real CLI; for ``typed``, why not the hook."""

    channel: str
    proof: str


SEEN = ("seen in the first prompt's request (model server log): tests/e2e/"
        "test_startup_receipts.py, test_delivery_real.py::test_startup_context_reaches_model_once")
TYPED = "typed once ready, ACK asked"
#: The start-up context of an agent without hooks (or with them turned off).
NO_HOOKS = StartContext("typed", f"{TYPED}: no hooks")


def _same(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


@dataclass(frozen=True)
class Agent:
    """One agent CLI as agentwrap's code sees it (see the module doc).

    ``name`` is the ``[channels] hooks``/``mcp`` value of its profile
    (``patterns/<name>.toml``) and the ``AGENT`` word of ``agentwrap hook AGENT
    EVENT``."""

    name: str
    #: Events registered at launch, in order: between tool calls, then the state signals.
    hook_events: tuple[str, ...] = ()
    #: hook event -> CONTEXT, QUESTION, NOTIFICATION, or the signal it gives.
    events: Mapping[str, str] = field(default_factory=dict)
    #: The top-level key of a hook's output the agent reads its context from
    #: (None: Claude's ``hookSpecificOutput.additionalContext``).
    flat_context: str | None = None
    #: The payload field that is set when a hook fires inside a subagent.
    subagent_field: str = "agent_id"
    #: Its permission hook fires for every request, asked or not: text only
    #: (no signal, no rule's answer; :data:`agentwrap.surfaces.hooks.protocol.TEXT_ONLY_QUESTIONS`).
    text_only_questions: bool = False
    #: The turn-end payload's field naming its transcript (its turn end carries no reply).
    transcript_field: str | None = None
    #: The prompt event it fires again inside a turn, with an empty prompt.
    continuation: str | None = None
    #: ``payload`` with what agentwrap reads where the others put it.
    normalise: Callable[[dict[str, Any]], dict[str, Any]] = _same
    #: ``(payload, environ)``: its turn-end payload has no prompt, so the handoff notes
    #: read it from the agent's own history (None: the payloads carry it).
    prompt_from_history: Callable[[dict[str, Any], Mapping[str, str]], str | None] | None = None
    #: Its hooks run the command with a POSIX shell (``sh -c``): the command sets its
    #: variables with the shell's assignments, not an ``env`` exec.
    shell_hooks: bool = True
    #: The tool a hook names -> as the profile's dialog names it (None: no questions by hook).
    tool_names: Mapping[str, str] | None = None
    #: Its permission dialog gives this one tool name for every request.
    one_tool: str | None = None
    #: Its latest hook request may be a call no dialog followed.
    every_request: bool = False
    #: Questions come as a notification's ``details``: ``details.type`` -> (the tool
    #: its dialog names, the field that holds what the screen shows after it).
    notification_details: Mapping[str, tuple[str, str]] | None = None
    #: The edit tools -> the tool_input fields naming the file ((): the paths are in a patch).
    edit_tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: A patch (``*** Begin Patch``) in any tool's input is an edit (Codex's shell runs apply_patch).
    patch_edits: bool = False
    #: Its hooks report its edits (else the watcher's changes trigger the ``edit`` sources).
    edits_by_hook: bool = False
    #: How its start-up context reaches the model (issue 35).
    start_context: StartContext = NO_HOOKS
    #: Its native channel: the dotted module of a server of its own agentwrap runs it
    #: on and reads as data (issue 24: Codex's app-server), whose ``CHANNEL`` is a
    #: :class:`agentwrap.sessions.native.NativeChannel`; loaded only for its launches.
    native: str | None = None
    #: What a launch registers (hooks, MCP, files): ``register(launch)``; None: nothing.
    register: Callable[[Launch], None] | None = None
    #: ``(paths, session, event)``: this launch registered the event's hook to run in
    #: the background (the agent ignores what it prints); None: it never does.
    in_background: Callable[[Paths, str, str], bool] | None = None
    #: ``(paths, session)``: a dir of the launch's files outside the launch dir, removed
    #: with it when the session ends (Gemini's root-run dir).
    outside_dir: Callable[[Paths, str], Path] | None = None
    #: Reads the session's conversation from the agent's own source (its
    #: transcript: :mod:`agentwrap.agents.conversation`); None: what its hooks
    #: said at a turn's end and the screen are all there is.
    conversation: ConversationReader | None = None


__all__ = ["CONTEXT", "NOTIFICATION", "NO_HOOKS", "QUESTION", "SEEN", "TYPED", "Agent",
           "StartContext"]
