"""Reading the queue: messages, their attempts, and why each one still waits.

Nothing here changes a row. What a reader gets is typed (:mod:`.views`): a
session's queue with the reason each message is not typed yet (worked out
from the session's record: retry back-off, no supervisor, a draft in the
box, the agent busy, or handed at the session start), history with every
attempt as evidence, delivery figures, and a wait for a message's end.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..delivery import handover
from ..delivery.choice import busy_channel_of, busy_reason
from ..detect.states import State, overlay
from ..message import Message
from ..paths import Paths
from ..queue.store import MessageStore, QueueMetrics
from ..sessions.registry import Registry, SessionRecord
from .events import wait_for
from .views import HistoryEntry, QueueView, Waiting


class Reading:
    """Answers about messages and queues, from the store and the registry."""

    def __init__(self, paths: Paths, store: MessageStore, registry: Registry) -> None:
        self.paths = paths
        self.store = store
        self.registry = registry

    def get(self, message_id: str) -> Message:
        """A message by its full id or a unique prefix a person typed (4+ characters)."""
        return self.store.get_by_prefix(message_id)

    def message(self, message_id: str) -> HistoryEntry:
        """One message (id or unique prefix) with every attempt at it: what the
        HTTP API's ``GET /api/messages/{id}`` shows, without paging ``history``."""
        m = self.get(message_id)
        return HistoryEntry(m, self.store.attempts(m.id))


    def _taken_over(self, rec: SessionRecord) -> bool:
        """A page holds the session's keyboard (:mod:`.takeover`)."""
        from ..sessions.live import tmux_socket_of
        from ..terminal.live import takeover_marker

        return takeover_marker(tmux_socket_of(self.paths, rec).parent, rec.name).exists()

    def peek(self, session: str, now: float | None = None) -> QueueView:
        """What waits for ``session``, never consuming anything: in-flight
        messages (with their write-ahead phase), then pending ones in delivery
        order, each with the reason it is not typed yet (retry back-off, no
        supervisor, a draft in the box, the agent busy or waiting)."""
        rec = self.registry.get(session)
        pending = self.store.peek(session)
        flight = self.store.in_flight(session)
        now = time.time() if now is None else now
        taken_over = rec.backend == "tmux" and self.registry.here(rec) and self._taken_over(rec)

        def why(m: Message) -> str:
            if m.next_attempt_at > now:
                return f"retry in {m.next_attempt_at - now:.0f} s ({m.detail})"
            if rec.liveness != "running":
                return "supervisor not running (`agentwrap adopt`)"
            if rec.draft or rec.state is State.DRAFT:
                return "draft in input box"
            if rec.state is State.READY:
                if taken_over:
                    return "a person took over from the dashboard: waits until they give the keyboard back"
                return "due now"
            if rec.state is State.BUSY and (channel := busy_channel_of(rec.options)):
                return busy_reason(channel)
            if overlay(rec.state, rec.state_rule):  # a picker: waits, never fails
                return f"an overlay is open over the input box ({rec.state_reason})"
            return {State.BUSY: "agent busy", State.WAITING_INPUT: "agent is waiting for an answer",
                    State.STARTING: "agent starting", State.EXITED: "agent exited",
                    }.get(rec.state, str(rec.state))

        here = self.registry.local(session)  # the start hook's batches are kept on its host
        at_start = set(handover.started(self.paths.started_batches(here))) if here else set()

        def going(m: Message) -> str:
            if m.batch_id in at_start:
                return "handed at the session start: goes to the model in the first turn"
            return "delivering" + (f" ({m.phase})" if m.phase else "")

        entries = [Waiting(m, going(m)) for m in flight]
        entries += [Waiting(m, why(m)) for m in pending]
        return QueueView(rec, entries)

    def history(self, session: str | None = None, limit: int = 200) -> list[HistoryEntry]:
        """Messages newest first (of one session, or all), each with its attempts.
        An unknown session is an error, not an empty history."""
        if session is not None:
            self.registry.get(session)
        return [HistoryEntry(m, self.store.attempts(m.id))
                for m in self.store.history(session, limit=limit)]

    def metrics(self, session: str | None = None) -> QueueMetrics:
        """Delivery figures from the persisted rows (one session, or all)."""
        return self.store.metrics(session)

    def wait_for_end_state(self, message_id: str, timeout: float,
                           recheck_s: Callable[[], float]) -> Message | None:
        """Block until the message reaches a terminal status; None after ``timeout``.

        Woken by the event bus (the store announces every commit that recorded
        events), so it returns as soon as the supervisor finishes the message;
        it looks again every ``recheck_s()`` seconds in case an announcement was lost.
        Subscribed before the first look, so an end between the two is not missed.
        """
        m = wait_for(self.paths, lambda: self.store.get(message_id),
                     lambda m: m.status.terminal, timeout, recheck_s, self.store)
        return m if m.status.terminal else None
