"""Which channel carries a session's messages while its agent works.

A message reaches an agent by the strongest channel open at that moment
(issue 11): the agent's hooks (or Aider's read file) hand it to the *running*
turn at the next safe point between tool calls; typing waits for the agent to
be idle and ready, since a block typed while it works becomes a user turn of
its own; the instruction file is the last resort. The delivery engine decides
with these functions, and ``agentwrap queue`` explains a waiting message with
the same words, so both say one thing. Pure functions: nothing here opens
anything, and a hook's start-up does not pay for the engine.
"""

from __future__ import annotations

from ..session_options import SessionOptions

#: Session channels (the record's ``options.channels``, written at launch by
#: :mod:`agentwrap.sessions.channels`) that reach a running turn, strongest first.
BUSY_CHANNELS = ("hooks", "read-file")


def busy_channel_of(options: SessionOptions) -> str | None:
    """The channel that reaches the session's agent while it works, if any."""
    return next((c for c in BUSY_CHANNELS if options.has(c)), None)


def busy_reason(channel: str) -> str:
    """Why nothing is typed into a busy agent that has ``channel``."""
    return f"agent busy; its {channel} hand messages over between tool calls"


__all__ = ["BUSY_CHANNELS", "busy_channel_of", "busy_reason"]
