"""The data of the message queue: what a message is and how it ends.

A message is accepted once (stored durably), then moves ``pending`` ->
``delivering`` (a supervisor claimed it for a batch) and ends in exactly one
terminal status. Attempts record every try with its evidence, so ``history``
can say what happened long after the fact.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class Priority(enum.IntEnum):
    """Higher goes first. Startup context is its own class, ahead of all."""

    LOW = 0
    NORMAL = 1
    HIGH = 2
    CRITICAL = 3
    STARTUP = 4

    @classmethod
    def parse(cls, text: str) -> Priority:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(p.name.lower() for p in cls)
            raise ValueError(f"unknown priority {text!r} (one of: {names})") from None

    def __str__(self) -> str:
        return self.name.lower()


class Source(str, enum.Enum):
    WEBHOOK = "webhook"
    SCHEDULER = "scheduler"
    FILESYSTEM = "filesystem"
    HOOK = "hook"  # a check run by an agent's own hook after its edit (agentwrap.feedback)
    AGENT = "agent"
    APPLET = "applet"
    MONITORING = "monitoring"
    USER = "user"
    CHAT = "chat"  # a chat the person configured (agentwrap chat telegram)
    SYSTEM = "system"

    def __str__(self) -> str:
        return self.value


class Kind(str, enum.Enum):
    """What a message is to agentwrap itself; senders cannot choose it.

    Anything agentwrap must act on (a fallback notice whose delivery removes
    the instruction-file section) is marked here, in a column only internal
    callers of :meth:`MessageStore.enqueue` may set, never in the sender's
    metadata.
    """

    CONTENT = "content"  # what senders send: text for the agent, nothing more
    # The person's own words (a source the user's config counts as theirs,
    # ``[trust] instruction_sources``, "user" by default): typed as what the
    # user says, not quoted as data. Sanitised and neutralised all the same.
    # Only the application service creates it, from the sender's source.
    INSTRUCTION = "instruction"
    # Typed as is, without the quoting block: a shell command, a REPL's input,
    # an agent's own command. Only the application service creates it, and
    # only for sources the user's config trusts with raw input.
    COMMAND = "command"
    FALLBACK_NOTICE = "fallback_notice"  # "context was written to CLAUDE.md"

    def __str__(self) -> str:
        return self.value


class Status(str, enum.Enum):
    PENDING = "pending"
    DELIVERING = "delivering"  # claimed by a supervisor for a batch; not terminal
    ACKNOWLEDGED = "acknowledged"
    DELIVERED = "delivered"
    ESCALATED = "escalated"
    EXPIRED = "expired"
    EVICTED = "evicted"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self not in (Status.PENDING, Status.DELIVERING)

    def __str__(self) -> str:
        return self.value


TERMINAL_STATUSES = frozenset(s for s in Status if s.terminal)

#: What each kind of message is framed as, in words a person reads (history, the page).
FRAMINGS = {
    Kind.CONTENT: "quoted as data",
    Kind.INSTRUCTION: "the user's own words",
    Kind.COMMAND: "typed as is",
    Kind.FALLBACK_NOTICE: "agentwrap's notice",
}


class Phase(str, enum.Enum):
    """Write-ahead phase of an in-flight batch, so a restarted supervisor knows
    whether text may already be in the agent's input box (never type twice)."""

    CLAIMED = "claimed"  # nothing typed yet
    PASTING = "pasting"  # paste sent (or about to be); may be in the box
    SUBMITTING = "submitting"  # submit key sent (or about to be)
    SUBMITTED = "submitted"  # submission confirmed; waiting for ACK if asked

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class NewMessage:
    """What a producer hands to :meth:`MessageStore.enqueue`."""

    session: str
    content: str
    source: Source = Source.USER
    source_id: str = ""
    priority: Priority = Priority.NORMAL
    ttl_s: float | None = None  # None: the configured default
    metadata: dict[str, Any] = field(default_factory=dict)
    correlation_id: str | None = None
    depth: int = 0
    idempotency_key: str | None = None
    require_ack: bool | None = None  # None: the session's config decides


@dataclass(frozen=True)
class Message:
    id: str
    session: str
    content: str
    source: Source
    source_id: str
    priority: Priority
    created: float
    expires: float
    metadata: dict[str, Any]
    correlation_id: str | None
    depth: int
    idempotency_key: str | None
    require_ack: bool | None
    status: Status
    attempts: int
    updated: float
    finished: float | None  # when it reached a terminal status
    detail: str  # why it is in its status ("acknowledged: ACK 3f9c2a1b", "evicted by ...")
    batch_id: str | None
    phase: Phase | None
    next_attempt_at: float  # not tried again before this (backoff); created for new ones
    kind: Kind = Kind.CONTENT  # set by agentwrap only (enqueue(..., internal=True))

    @property
    def from_user(self) -> bool:
        """The person's own words (see :attr:`Kind.INSTRUCTION`), not data."""
        return self.kind is Kind.INSTRUCTION

    @property
    def framing(self) -> str:
        """How the message reaches the agent, as ``history`` and the page say it."""
        return FRAMINGS[self.kind]

    @property
    def label(self) -> str:
        """The ``[source:source_id]`` prefix used when the message is typed."""
        return f"[{self.source}:{self.source_id}]" if self.source_id else f"[{self.source}]"


@dataclass(frozen=True)
class Attempt:
    message_id: str
    batch_id: str
    number: int  # 1-based attempt count for the message
    started: float
    finished: float | None
    channel: str  # "tmux-paste" | "pty-paste" | "fallback-file" | "hook" | "mcp"
    outcome: str  # an AttemptOutcome (a stored word: old rows read as str)
    evidence: str  # the screen lines / pattern that proved (or disproved) it


class AttemptOutcome(str, enum.Enum):
    """What one attempt of one message came to, on every channel (typed, a hook,
    MCP, Aider's read file, Codex's app-server, the fallback file): the one list
    of the words the ``attempts`` table's ``outcome`` holds (issue 36). The
    values are the stored strings, unchanged: an old store reads as before, and
    a member compares equal to its word (``str`` subclass)."""

    SUBMITTED = "submitted"  # typed and its submission seen (no ACK asked yet, or awaited)
    AWAITING_ACK = "awaiting_ack"  # submitted; the ACK is awaited on later turns (not stored)
    ACKNOWLEDGED = "acknowledged"  # its ACK came
    DELIVERED = "delivered"  # delivered, no ACK asked (or a reader took it)
    #: The outcome of the attempt that ends a message ``delivered`` although the ACK
    #: asked of it never came (the agent exited while it was awaited, or the session
    #: ended): the typed mark senders are told by (:func:`acknowledged`), so no
    #: surface parses the detail's words.
    UNACKNOWLEDGED = "unacknowledged"
    PASTE_NOT_SEEN = "paste_not_seen"  # the block never showed in the input box
    SUBMIT_NOT_CONFIRMED = "submit_not_confirmed"  # pasted; the submit not proven
    NO_ACK = "no_ack"  # submitted; the ACK asked never came in time
    NO_WINDOW = "no_window"  # never a moment to type within the readiness timeout
    AGENT_EXITED = "agent_exited"  # the agent went away during the attempt
    ERROR = "error"  # the attempt raised (or every message of the batch expired)
    HANDED = "handed"  # given to a reader (a hook, the app-server); its end comes later
    NOT_HANDED = "not_handed"  # a reader's hand-over failed: back to the queue
    WRITTEN = "written"  # in Aider's read file; read or not is told later
    NOT_READ = "not_read"  # Aider did not read the file before its turn ended: typed instead
    #: The outcome of the attempt row that records an escalated message's section
    #: removed from the instruction file once the agent read it: what happened
    #: after the message ended, not a try to deliver it (metrics never count it).
    SECTION_REMOVED = "section_removed"

    def __str__(self) -> str:
        return self.value


UNACKNOWLEDGED = AttemptOutcome.UNACKNOWLEDGED
SECTION_REMOVED = AttemptOutcome.SECTION_REMOVED


def acknowledged(status: Status, attempts: Sequence[Attempt]) -> bool | None:
    """Whether the ACK asked of a message came: True once acknowledged, False
    for one delivered whose last attempt is :data:`UNACKNOWLEDGED`, None
    otherwise (no ACK asked, not delivered, or an ACK that may still come:
    one handed over through a hook, MCP or a read file is acknowledged later)."""
    if status is Status.ACKNOWLEDGED:
        return True
    if status is Status.DELIVERED and attempts and attempts[-1].outcome == UNACKNOWLEDGED:
        return False
    return None


def end_outcome(status: Status, attempts: Sequence[Attempt]) -> str:
    """The end as a sender reads it: the status, but :data:`UNACKNOWLEDGED` for
    a message delivered whose ACK never came (its status stays ``delivered``)."""
    return UNACKNOWLEDGED if acknowledged(status, attempts) is False else status.value


@dataclass(frozen=True)
class QueueLimits:
    max_pending_per_session: int = 50
    max_pending_total: int = 1000
    rate_per_minute: int = 10  # per (session, source)
    max_content_bytes: int = 10 * 1024
    max_metadata_bytes: int = 16 * 1024  # serialized JSON
    max_metadata_depth: int = 8  # nested lists/objects, the top object counting as 1
    max_metadata_keys: int = 256  # keys of all objects together
    max_metadata_key_chars: int = 128
    default_ttl_s: float = 300.0
    max_ttl_s: float = 3600.0
