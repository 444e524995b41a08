"""Which channel carries a message: one function, :func:`channel_for` (issue 36).

A message reaches an agent by the strongest channel open at that moment
(issue 11): Codex's private app-server (issue 24) takes what a reader may take
whenever its thread is idle, and while a turn runs the priorities ``[delivery]
steer`` names; the agent's hooks (or Aider's read file) hand it to the
*running* turn at the next safe point between tool calls; typing waits for the
agent to be idle and ready, since a block typed while it works becomes a user
turn of its own; a dialog on screen holds every channel; the instruction file is
the last resort (the engine's escalation, after typing failed). The delivery
engine, Codex's app-server part and ``agentwrap queue`` (explaining a waiting
message) all ask :func:`channel_for`, so they say one thing;
``tests/test_channel_choice.py`` holds it as a table. Pure functions: nothing
here opens anything, and a hook's start-up does not pay for the engine.
"""

from __future__ import annotations

import enum
from collections.abc import Collection

from ..message import Kind, Priority
from ..session_options import SessionOptions

#: What a reader that is handed text (not a terminal) may take: a COMMAND is
#: meant to be typed, and a fallback notice is the supervisor's to deliver.
CONSUMABLE_KINDS = frozenset({Kind.CONTENT, Kind.INSTRUCTION})
#: Session channels (the record's ``options.channels``, written at launch by
#: :mod:`agentwrap.sessions.channels`) that reach a running turn, strongest first.
BUSY_CHANNELS = ("hooks", "read-file")
#: Codex's private app-server (its attempts' channel).
APP_SERVER = "app-server"
#: Typed into the terminal (the attempt's channel is the backend's paste: tmux-paste, pty-paste).
TYPING = "typing"


class AgentState(str, enum.Enum):
    """The agent as the choice sees it."""

    IDLE = "idle"  # ready for a turn
    BUSY = "busy"  # a turn runs
    DIALOG = "dialog"  # a question waits for the person


def channel_for(available: Collection[str], state: AgentState, kind: Kind,
                priority: Priority = Priority.NORMAL, *, server_dead: bool = False,
                steer: Collection[Priority] = ()) -> str | None:
    """The channel that takes a message of ``kind`` and ``priority`` now, or None
    (it waits). ``available``: the session's channels (``hooks``, ``read-file``,
    ``mcp``, :data:`APP_SERVER`); ``server_dead``: the app-server was declared
    dead (typing takes over everything); ``steer``: the priorities steered into
    a running turn through the app-server."""
    readable = kind in CONSUMABLE_KINDS
    server = APP_SERVER in available and not server_dead and readable
    if state is AgentState.DIALOG:
        return None
    if state is AgentState.IDLE:
        return APP_SERVER if server else TYPING
    if server and priority in steer:
        return APP_SERVER
    return next((c for c in BUSY_CHANNELS if c in available), None) if readable else None


def busy_channel_of(options: SessionOptions) -> str | None:
    """The channel that reaches the session's agent while it works, if any."""
    chosen = channel_for(options.channels or (), AgentState.BUSY, Kind.INSTRUCTION)
    return chosen if chosen in BUSY_CHANNELS else None


def busy_reason(channel: str) -> str:
    """Why nothing is typed into a busy agent that has ``channel``."""
    return f"agent busy; its {channel} hand messages over between tool calls"


__all__ = ["APP_SERVER", "BUSY_CHANNELS", "CONSUMABLE_KINDS", "TYPING", "AgentState",
           "busy_channel_of", "busy_reason", "channel_for"]
