"""Agent states and the reading the detector produces."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class State(str, enum.Enum):
    STARTING = "starting"
    READY = "ready"
    BUSY = "busy"
    WAITING_INPUT = "waiting_input"
    DRAFT = "draft"
    UNKNOWN = "unknown"  # the screen is still and no rule explains it
    EXITED = "exited"

    def __str__(self) -> str:
        return self.value


class Signal(str, enum.Enum):
    """Which kind of evidence decided a state, strongest first."""

    PROCESS = "process"
    HOOK = "hook"  # the agent's own hook said it (agentwrap hook: turn end, prompt submit, ...)
    STRUCTURED = "structured"
    TITLE = "title"
    SCREEN = "screen"
    QUIET = "quiet"

    def __str__(self) -> str:
        return self.value


def overlay(state: State, rule: str) -> bool:
    """The verdict ``state`` decided by ``rule`` is an overlay (see
    :attr:`Reading.overlay`): also for a verdict as the registry keeps it."""
    return state is State.UNKNOWN and (rule == "overlay" or rule.startswith("overlay:"))


@dataclass(frozen=True)
class Reading:
    """One verdict of the detector, with the evidence that decided it."""

    state: State
    signal: Signal
    rule: str
    reason: str
    quiet_ms: int
    at: float

    @property
    def overlay(self) -> bool:
        """A picker, menu or help screen is open over the input box (a profile's
        ``[[overlays]]``, or the agent idle with no box on screen): not ready,
        asks nothing, and closes when the person closes it."""
        return overlay(self.state, self.rule)

    def explain(self, profile: str) -> str:
        return f"{self.state} ({profile}: {self.reason}; quiet {self.quiet_ms} ms)"
