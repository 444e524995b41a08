"""Waiting for a batch's ACK: a state of the delivery, not a loop.

A submitted batch that asked for an ACK is acknowledged when the agent's reply
below the echoed block carries ``ACK <token>`` (one of the configured
patterns), or when another channel found it in the agent's whole reply and
ended the batch in the store (:meth:`AckWait.settled`); it is delivered but
not acknowledged when the agent exits first,
and the attempt fails (``no_ack``) when the agent has been quiet for
``ack_timeout_s`` without it, or never went quiet at all before a hard stop.
The engine looks once per supervisor turn (:meth:`AckWait.look`), never in a
loop that holds the supervisor: meanwhile it drains the agent's output,
notices the agent exit and obeys "stop".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..detect.states import State
from ..message import AttemptOutcome, Message, Status
from ..queue.store import MessageStore
from .evidence import ScreenEvidence, screen_tail
from .framing import Injection
from .outcome import Outcome
from .seams import Driver

#: How often an awaited ACK is looked for in the store (another channel's).
STORE_LOOK_S = 0.5


@dataclass
class AckWait:
    """A submitted batch whose ACK is awaited."""

    inj: Injection
    batch: list[Message]
    started: float  # when this attempt began (for its Attempt record)
    channel: str
    submitted: str  # the evidence of submission
    patterns: list[re.Pattern[str]]
    hard_stop: float
    quiet_since: float | None = None
    store_look_at: float = 0.0  # when to look whether another channel acknowledged it

    @classmethod
    def begin(cls, inj: Injection, batch: list[Message], started: float, channel: str,
              submitted: str, patterns: Sequence[str], *, hard_stop: float) -> AckWait:
        """The wait for ``inj``'s token, with each pattern's ``{token}`` filled in."""
        compiled = [re.compile(p.replace("{token}", re.escape(inj.token)), re.IGNORECASE)
                    for p in patterns]
        return cls(inj, batch, started, channel, submitted, compiled, hard_stop)

    def settled(self, store: MessageStore, session: str, now: float) -> Outcome | None:
        """The ACK came through another channel (the turn-end hook read it in
        the agent's whole reply, the agent called MCP's acknowledge): nothing
        of the batch is in flight any more. Looked at every :data:`STORE_LOOK_S`."""
        if now < self.store_look_at:
            return None
        self.store_look_at = now + STORE_LOOK_S
        if any(m.batch_id == self.inj.token for m in store.in_flight(session)):
            return None
        ended = [store.get(mid) for mid in self.inj.message_ids]
        acked = [m for m in ended if m.status is Status.ACKNOWLEDGED]
        if acked:
            return Outcome(True, AttemptOutcome.ACKNOWLEDGED, f"{self.submitted}; {acked[0].detail}")
        return Outcome(True, AttemptOutcome.DELIVERED, f"{self.submitted}; ended meanwhile: {ended[0].detail}")

    def look(self, sup: Driver, evidence: ScreenEvidence, ack_timeout_s: float,
             now: float) -> Outcome | None:
        """One look at the screen: the attempt's outcome once the wait has
        ended (acknowledged, not acknowledged, agent gone), else None."""
        reading = sup.reading
        found = evidence.find_ack(sup, self.inj, self.patterns)
        if found:
            return Outcome(True, AttemptOutcome.ACKNOWLEDGED, found)
        if reading.state is State.EXITED:
            # It was submitted (that was proven before the wait began): the
            # message reached the agent, which died before it could answer.
            # (The same words as DeliveryEngine.abandon()'s, which may see the exit first.)
            return Outcome(
                True, AttemptOutcome.DELIVERED, f"{self.submitted}; not acknowledged: the agent exited first"
            )
        if reading.state in (State.READY, State.DRAFT, State.UNKNOWN):
            self.quiet_since = self.quiet_since or now
            if now - self.quiet_since >= ack_timeout_s:
                return Outcome(False, AttemptOutcome.NO_ACK, screen_tail(sup))
        else:
            self.quiet_since = None
        if now >= self.hard_stop:
            return Outcome(False, AttemptOutcome.NO_ACK, "agent never went quiet: " + screen_tail(sup))
        return None
