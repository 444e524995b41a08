"""What the service answers with: typed records a surface shows as they are.

Each surface (CLI, HTTP, MCP) renders the same few shapes, so they are
declared once, apart from the code that fills them in.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..message import Attempt, Message
from ..sessions.registry import SessionRecord


@dataclass(frozen=True)
class Sent:
    """What :meth:`Service.send` did."""

    message: Message
    created: bool  # False: an idempotency key returned the first message
    supervised: bool  # False: no supervisor runs; the message waits for `adopt`


@dataclass(frozen=True)
class Waiting:
    """A message not yet delivered, and why it waits (shown by ``queue``)."""

    message: Message
    waiting_because: str


@dataclass(frozen=True)
class QueueView:
    """One session's queue: in-flight messages first, then pending in
    delivery order; the session record says why nothing moves."""

    session: SessionRecord
    entries: list[Waiting]


@dataclass(frozen=True)
class HistoryEntry:
    """A message and every attempt at it (its evidence)."""

    message: Message
    attempts: list[Attempt]

    @property
    def channel(self) -> str:
        """How the last attempt went in (paste, keys, fallback), or '-'."""
        return self.attempts[-1].channel if self.attempts else "-"


@dataclass(frozen=True)
class SessionView:
    """A session as ``ls`` shows it: its record and how many messages wait."""

    record: SessionRecord
    pending: int
