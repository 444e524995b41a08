"""What one delivery attempt came to: the result every part of the engine
(the submit, the ACK wait, the escalation) hands on, with its evidence."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    ok: bool
    outcome: str  # submitted | acknowledged | delivered | paste_not_seen | submit_not_confirmed | no_ack | no_window | agent_exited | error
    evidence: str


__all__ = ["Outcome"]
