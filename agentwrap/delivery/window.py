"""The typing window: may the engine type into the agent now, and if not, why.

Typing is safe only when the agent is ready (or busy, for high/critical
messages, when the profile says it takes input while busy), no dialog is
open, the input box holds no draft, the person has not typed for
``typing_grace_ms``, and the agent's start-up is complete (its SessionStart
hook, which hands the queue over as startup context, has run: typing before
it would race it). A session with a channel that reaches the running turn
(its hooks, Aider's read file) is never typed into while the agent works:
typed text would become a user turn of its own.

A block the engine may have typed already (held in the box, or found in
flight by a restarted supervisor) waits for the box to be visible again
(:meth:`TypingWindow.press_reason`): a dialog hides it, and a hidden box
proves neither that the block is in it nor that it is not.

A window shut for ``readiness_timeout_s`` (or ``busy_channel_timeout_s``
while such a channel has the agent busy) makes a failed attempt; failed
attempts come back after the configured backoff. An overlay the person opened
(a picker, a menu: ``Reading.overlay``) shuts it without a failure: the batch
waits for it to close; so does a page holding the keyboard (a take-over,
however long since its last key), and the batch goes in once it is given back. Both clocks are here; what
an attempt *did* is the engine's.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import DeliveryConfig
from ..detect.profiles import Profile
from ..detect.states import State
from ..message import Phase, Priority
from .choice import busy_reason
from .seams import Driver

TAKEN_OVER = "a person took over from the dashboard: waits until they give the keyboard back"


class TypingWindow:
    """When typing into one session's agent is safe."""

    def __init__(
        self,
        cfg: DeliveryConfig,
        profile: Profile,
        *,
        busy_channel: str | None = None,
        awaits_start_hook: Callable[[], bool] = lambda: False,
    ) -> None:
        self.cfg = cfg
        self.profile = profile
        # A channel that reaches the agent's running turn between tool calls
        # (its hooks): while the agent works, that channel is the stronger one,
        # so nothing is typed then (typed text becomes a user turn of its own),
        # and a long busy spell is not a failed attempt until busy_channel_timeout_s.
        self.busy_channel = busy_channel
        # True while the agent's SessionStart hook, which hands the queue over
        # as startup context, has yet to run: typing then would race it
        self.awaits_start_hook = awaits_start_hook
        self._blocked_since: float | None = None

    def reason(self, sup: Driver, priority: Priority) -> str | None:
        """None when typing is safe now, else why not (shown by `agentwrap queue`)."""
        reading = sup.reading
        if reading.state is State.EXITED:
            return "agent exited"
        hidden = _box_hidden(sup)
        if hidden is not None:
            return hidden
        if self.awaits_start_hook():
            return "waiting for the agent's start-up (its SessionStart hook has not run yet)"
        if reading.state is State.DRAFT or sup.detector.draft:
            return "draft in input box"
        if self.person_typing(sup):
            return "person is typing"
        if sup.term.held():
            return TAKEN_OVER
        if reading.state is State.READY:
            return None
        if reading.state is State.BUSY and self.busy_channel:
            return busy_reason(self.busy_channel)
        if (
            reading.state is State.BUSY
            and self.profile.input.accepts_input_while_busy
            and priority >= Priority.HIGH
        ):
            return None
        return "agent busy" if reading.state is State.BUSY else "agent starting"

    def person_typing(self, sup: Driver) -> bool:
        """The person typed less than ``typing_grace_ms`` ago (when the backend can tell)."""
        idle = sup.term.user_idle_s()
        return idle is not None and idle * 1000 < self.cfg.typing_grace_ms

    def resume_reason(self, sup: Driver, phase: Phase, priority: Priority) -> str | None:
        """Why a parked batch may not take its next step now (None: it may).
        Claimed: nothing typed yet, so it waits for the typing window like a
        new batch. Pasting or submitting: the block may be in the box, which
        must be visible (:meth:`press_reason`). Submitted: its next step (the
        ACK) types nothing. An exited agent: none (the session's end settles
        the batch, :meth:`DeliveryEngine.abandon`)."""
        if sup.reading.state is State.EXITED:
            return "agent exited"
        if phase is Phase.CLAIMED:
            return self.reason(sup, priority)
        if phase is Phase.SUBMITTED:
            return None
        return self.press_reason(sup)

    def press_reason(self, sup: Driver) -> str | None:
        """None when the engine may take the next step of a block it may have
        typed already (look for it in the input box, press the submit key for
        it), else why not: never while a dialog or a screen the profile cannot
        read hides the box (a key would answer the dialog, and a hidden box
        proves neither that the block is there nor that it is not), nor on a
        start-up screen, nor while the person types."""
        hidden = _box_hidden(sup)
        if hidden is not None:
            return hidden
        if sup.reading.state is State.STARTING:
            return "agent starting"
        if self.person_typing(sup):
            return "person is typing"
        if sup.term.held():
            return TAKEN_OVER
        return None

    # --- how long it stays shut ------------------------------------------------------------

    def opened(self) -> None:
        """The window is open (or nothing waits for it): no shut spell runs."""
        self._blocked_since = None

    def shut_too_long(self, sup: Driver, now: float) -> bool:
        """The window is shut at ``now``: True once it has been shut for the
        readiness timeout (the spell then starts over), which fails an attempt.
        Never while an overlay is open (a picker or menu the person opened over
        the input box: the agent is idle and the box comes back when it is
        closed): that is a wait, not a failure, and after three of them the
        message would be written into the instruction file while the agent
        waits for nothing but the person. The message's TTL still ends it.
        A page's take-over (:meth:`~agentwrap.terminal.base.Terminal.held`) is
        the same wait: the person holds the keyboard, however long they think."""
        if sup.reading.overlay or sup.term.held():
            self._blocked_since = None
            return False
        limit = self.cfg.readiness_timeout_s
        if self.busy_channel and sup.reading.state is State.BUSY:
            limit = max(limit, self.cfg.busy_channel_timeout_s)
        if self._blocked_since is None:
            self._blocked_since = now
        elif now - self._blocked_since >= limit:
            self._blocked_since = None
            return True
        return False

    def backoff(self, attempts: int) -> float:
        """The wait before the next attempt of messages that failed ``attempts``
        times before this failure (the configured steps, the last one repeating)."""
        steps = self.cfg.backoff_s
        return steps[min(attempts, len(steps) - 1)] if steps else 1.0


def _box_hidden(sup: Driver) -> str | None:
    """Why the input box is hidden (a dialog, a screen the profile cannot
    read), or None: nothing is typed then, and nothing concluded from the box."""
    reading = sup.reading
    if reading.state is State.WAITING_INPUT:
        return f"agent is waiting for an answer ({reading.reason})"
    if reading.overlay:
        return f"an overlay is open over the input box ({reading.reason})"
    if reading.state is State.UNKNOWN:
        return f"agent state unknown ({reading.reason})"
    return None


__all__ = ["TypingWindow"]
