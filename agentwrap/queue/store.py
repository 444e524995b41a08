"""The queue's storage interface: what every store offers its callers.

:class:`MessageStore` mentions no SQLite type, so another backend can
implement it and drop in without touching the delivery engine, the supervisor
or the command line: PostgreSQL's does (:mod:`.postgres`, shared by several
hosts), with the same operations as SQLite's (:mod:`.sqlstore`). :class:`QueueMetrics` are the delivery figures a store
computes from what it persisted. Every store also keeps the event log
(:mod:`agentwrap.events`): each change appends its events in the same
transaction, and readers ask for the events after an id. The semantics of each operation are those of
:class:`agentwrap.queue.sqlstore.SQLMessageStore`, and tests/test_queue.py
holds both backends to them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import QueueError
from ..events import Event
from ..message import Attempt, Kind, Message, NewMessage, Phase, Priority, Source, Status


@dataclass(frozen=True)
class ChannelMetrics:
    """The figures of one channel (``tmux-paste``, ``hook``, ``mcp``,
    ``fallback-file``, ...): what was tried through it and what it delivered.
    A message counts for the channel of its last attempt (the one that ended it)."""

    attempts: int = 0  # attempts made through this channel, whatever their outcome
    failed_attempts: int = 0  # of those, the ones that did not get the message there
    delivered: int = 0  # messages delivered or acknowledged through it
    first_try: int = 0  # of those, delivered by the message's first attempt
    first_try_rate: float | None = None
    p50_latency_s: float | None = None  # created -> delivered
    p95_latency_s: float | None = None


@dataclass(frozen=True)
class QueueMetrics:
    """Delivery figures computed from the persisted rows (they survive restarts)."""

    by_status: dict[Status, int] = field(default_factory=dict)
    total: int = 0
    attempted: int = 0  # messages with at least one attempt
    succeeded_first_try: int = 0  # delivered/acknowledged with exactly one attempt
    succeeded_after_retry: int = 0  # delivered/acknowledged after more than one
    escalated: int = 0
    failed: int = 0
    mean_attempts: float | None = None  # over finished (terminal) messages
    mean_latency_s: float | None = None  # created -> success
    p95_latency_s: float | None = None  # nearest-rank 95th percentile
    by_channel: dict[str, ChannelMetrics] = field(default_factory=dict)



@dataclass(frozen=True)
class SenderLimit:
    """At most ``count`` messages from one sender (``source:source_id``), to
    every session together, in ``window_s``: checked in the same transaction
    that stores the message, so processes racing each other cannot pass it
    (an agent's MCP servers: one process each)."""

    count: int
    window_s: float
    what: str  # who the sender is, for the refusal ("session 'api'")

class MessageStore(Protocol):
    """Storage interface of the queue. See :class:`SQLiteMessageStore` for semantics."""

    def enqueue(
        self, new: NewMessage, *, kind: Kind = Kind.CONTENT, internal: bool = False,
        sender_limit: SenderLimit | None = None,
    ) -> tuple[Message, bool]: ...
    def enqueue_many(
        self, items: Sequence[tuple[NewMessage, Kind]]
    ) -> list[tuple[Message, bool] | QueueError]: ...
    def get(self, message_id: str) -> Message: ...
    def get_by_prefix(self, prefix: str) -> Message: ...
    def peek(
        self, session: str, now: float | None = None, *, kinds: Collection[Kind] | None = None,
        sources: Collection[Source] | None = None, contains: str | None = None,
        due: bool = False, limit: int | None = None,
        priorities: Collection[Priority] | None = None,
    ) -> list[Message]: ...
    def claim_batch(
        self, session: str, batch_id: str, max_bytes: int, now: float | None = None,
        *, kinds: Collection[Kind] | None = None, sources: Collection[Source] | None = None,
        contains: str | None = None, limit: int | None = None,
        priorities: Collection[Priority] | None = None,
    ) -> list[Message]: ...
    def set_phase(self, batch_id: str, phase: Phase) -> list[Message]: ...
    def in_flight(self, session: str) -> list[Message]: ...
    def record_attempt(self, attempt: Attempt) -> None: ...
    def attempts(self, message_id: str) -> list[Attempt]: ...
    def retry_later(self, batch_id: str, next_attempt_at: float, detail: str) -> int: ...
    def hold(self, batch_id: str, next_attempt_at: float, detail: str) -> int: ...
    def finish(
        self,
        status: Status,
        detail: str = "",
        *,
        message_ids: Sequence[str] | None = None,
        batch_id: str | None = None,
        consumed_through: str | None = None,
    ) -> int: ...
    def cancel(self, message_id: str) -> Message: ...
    def acknowledge(self, message_id: str, detail: str) -> bool: ...
    def flow_started(self, correlation_id: str) -> float | None: ...
    def expire_overdue(self, now: float | None = None) -> int: ...
    def overdue(self, now: float | None = None) -> bool: ...
    def history(
        self, session: str | None, limit: int = 200, statuses: Iterable[Status] | None = None
    ) -> list[Message]: ...
    def pending_count(self, session: str | None = None) -> int: ...
    def metrics(self, session: str | None) -> QueueMetrics: ...
    def events(
        self,
        after: int,
        *,
        session: str | None = None,
        kinds: Iterable[str] | None = None,
        subject: str | None = None,
        limit: int = 1000,
    ) -> list[Event]: ...
    def last_event_id(self) -> int: ...
    def listen(self, wake: Callable[[str], object] | None = None) -> None:
        """Let commits of other hosts wake this host's readers, and with
        ``wake`` its supervisors: called with each session another host gave
        a message or an answer (see the backend)."""
        ...
    def check_integrity(self) -> None: ...
    def close(self) -> None: ...
