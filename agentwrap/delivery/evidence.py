"""What the screen proves about a delivery, and how the engine waits for it.

The engine never trusts that a key or a paste did what it should: it reads
the screen back. This module holds those readings: whether our block (its
token, or the agent's paste placeholder) is in the input box, whether the
box emptied and the block shows above it or the turn went busy (the
submission), whether the agent's ``ACK <token>`` appears *below* the echoed
block (the block's own ACK request must not count; rows the reply wrapped
in are joined: :mod:`.replies`). And the waits between
the readings, which keep the supervisor draining output and obeying "stop",
and which refuse a dying agent's screen as evidence (a dying TUI clears its
input box as if it had taken the text).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from wcwidth import wcwidth

from ..config import DeliveryConfig
from ..detect.profiles import Profile
from ..detect.regions import split_around
from ..detect.states import Signal, State
from ..errors import AgentExited, DeliveryInterrupted
from ..terminal.screen import Snapshot
from . import replies
from .framing import Injection
from .seams import Driver

#: How often a wait looks at the screen again (seconds of the supervisor's pump).
POLL_S = 0.03


class ScreenEvidence:
    """The screen readings of one session's deliveries (its profile's regions)."""

    def __init__(self, cfg: DeliveryConfig, profile: Profile, clock: Callable[[], float]) -> None:
        self.cfg = cfg
        self.profile = profile
        self.clock = clock

    # --- the input box -------------------------------------------------------------------

    def around_input(self, snap: Snapshot) -> tuple[str, str] | None:
        """(input box text, everything else), trying the profile's fallback
        region when the primary one is not on screen."""
        spec = self.profile.input
        parts = split_around(self.profile, snap, spec.input_region)
        if parts is None and spec.input_region_fallback:
            parts = split_around(self.profile, snap, spec.input_region_fallback)
        return parts

    def split(self, snap: Snapshot, inj: Injection) -> tuple[str, str] | None:
        """(input box, everything else) for finding ``inj.mark``.

        Raw text has no token: it is found by the end of its last line with
        whitespace squeezed out (wrapping and padding vary). In a line-based
        program (``last_line`` input) its line is the cursor's, since the last
        line on screen may already be the output of a command it started.
        """
        if not inj.raw:
            return self.around_input(snap)
        if self.profile.input.input_region == "last_line":
            parts = _split_at_cursor(snap)
        else:
            parts = self.around_input(snap)
        return None if parts is None else (_squeeze(parts[0]), _squeeze(parts[1]))

    def in_box(self, sup: Driver, inj: Injection) -> bool | None:
        """Whether our block (its token, or the agent's paste placeholder) is in
        the input box; None when the box is not on screen, which proves nothing."""
        sup.observe()
        snap = sup.snap
        if snap is None:
            return None
        parts = self.split(snap, inj)
        if parts is None:
            return None
        box = parts[0]
        if inj.mark in box:
            return True
        return any(p.search(box) for p in self.profile.input.paste_placeholders)

    def in_box_within(self, sup: Driver, inj: Injection, timeout: float) -> bool | None:
        """True once our block is seen in the input box within ``timeout``;
        else the last look: False (the box shows without it) or None (the box
        is hidden: the block may be behind a dialog)."""
        result: list[bool | None] = []

        def there() -> bool:
            result.append(self.in_box(sup, inj))
            return result[-1] is True

        self.wait_until(sup, timeout, there)
        return result[-1] if result else None

    def box_seen(self, sup: Driver, inj: Injection) -> bool | None:
        """:meth:`in_box`, waiting a moment for the box to be drawn."""
        result: list[bool | None] = []

        def known() -> bool:
            result.append(self.in_box(sup, inj))
            return result[-1] is not None

        self.wait_until(sup, self.cfg.paste_timeout_s, known)
        return result[-1] if result else None

    # --- the submission ------------------------------------------------------------------

    def submitted(self, sup: Driver, inj: Injection) -> str:
        """The evidence that the block left the box for the agent (echoed above
        it, its placeholder above it, or the turn busy); "" if none."""
        snap = sup.snap
        if snap is None:
            return ""
        parts = self.split(snap, inj)
        outside = parts[1] if parts is not None else snap.text()
        if inj.mark in outside:
            return "text echoed above the input" if inj.raw else "block echoed above the input box"
        for p in self.profile.input.paste_placeholders:
            m = p.search(outside)
            if m:
                return f"paste placeholder above the input box: {m.group(0)}"
        if sup.reading.state is State.BUSY:
            return f"agent turned busy ({sup.reading.reason})"
        return ""

    def confirmed(
        self, sup: Driver, inj: Injection, was_busy: bool, found: list[str]
    ) -> bool:
        """After the submit key: is there evidence that the agent took the block?
        Appends the evidence to ``found``."""
        seen = self.in_box(sup, inj)
        reading = sup.reading
        if reading.state is State.UNKNOWN and seen is not True:
            # Still, unexplained, and our block has left the box: the agent took
            # it and opened something the profile does not know (a permission
            # dialog, a menu). Pressing the key again would answer it.
            found.append(f"the agent showed an unrecognised screen after the submit key"
                         f" ({reading.reason})")
            return True
        if reading.state is State.WAITING_INPUT:
            # A dialog after our key: the agent took the message and now asks
            # about what it started (a permission prompt, aider's "Create new
            # file?"). Never "unconfirmed": a retry's Enter would answer it.
            found.append(f"agent opened a dialog after the submit key ({reading.reason})")
            return True
        if (
            seen is True
            and not was_busy
            and reading.state is State.BUSY
            and reading.signal is not Signal.QUIET
        ):
            # Some agents (Aider) leave the submitted text where it was typed
            # and show a busy marker under it: busy by a rule, right after our
            # key and not before it, is the submission.
            found.append(f"agent turned busy ({reading.reason})")
            return True
        if seen is not False:  # still ours, or cannot tell yet
            return False
        ev = self.submitted(sup, inj)
        if ev:
            found.append(ev)
        return bool(ev)

    # --- the ACK -------------------------------------------------------------------------

    def find_ack(self, sup: Driver, inj: Injection, patterns: list[re.Pattern[str]]) -> str:
        """The reply text that acknowledges ``inj`` ("" if none): outside the
        input box, only below our own echoed block (whose 'Reply "ACK <token>"'
        line must not count), with the rows the TUI or the terminal wrapped
        joined (:mod:`.replies`)."""
        snap = sup.snap
        if snap is None:
            return ""
        parts = self.around_input(snap)
        outside = parts[1] if parts is not None else snap.text()
        return replies.find_ack(outside.split("\n"), inj.token, patterns, snap.cols)

    # --- waiting -------------------------------------------------------------------------

    def wait_until(self, sup: Driver, timeout: float, cond: Callable[[], bool]) -> bool:
        """Poll ``cond`` until it holds or ``timeout`` passes, while the
        supervisor keeps draining output and watching for "stop".

        Evidence from the screen of a dead agent proves nothing (a dying TUI
        clears its input box as if it had taken the text), so a condition that
        holds only counts while the agent is still alive.
        """
        deadline = self.clock() + timeout
        while True:
            if cond():
                if not sup.term.alive():
                    raise AgentExited("the agent exited during delivery")
                return True
            if sup.reading.state is State.EXITED:
                raise AgentExited("the agent exited during delivery")
            if sup.stopping:
                raise DeliveryInterrupted("the supervisor is stopping")
            if self.clock() >= deadline:
                return False
            sup.pump(POLL_S)

    def pause(self, sup: Driver, seconds: float) -> None:
        """Let ``seconds`` pass with the supervisor still draining output."""
        deadline = self.clock() + seconds
        while (left := deadline - self.clock()) > 0:
            if sup.stopping:
                raise DeliveryInterrupted("the supervisor is stopping")
            sup.pump(left)


def screen_tail(sup: Driver) -> str:
    """The screen's last non-blank lines: the evidence of a failed attempt."""
    if sup.snap is None:
        return ""
    lines = [x for x in sup.snap.lines if x.strip()]
    return "\n".join(lines[-8:])


def _squeeze(text: str) -> str:
    """``text`` without whitespace: wrapping, padding and prompts' spacing vary."""
    return "".join(text.split())


def _split_at_cursor(snap: Snapshot) -> tuple[str, str] | None:
    """(the cursor's line up to the cursor, with the rows just above it that a
    long line wrapped from; every row above those), or None if the cursor is
    off screen. A raw text is typed where the cursor is, and ends just left of
    it until the program takes it (a shell moves the cursor to the next line)."""
    row, col = snap.cursor
    if not 0 <= row < len(snap.lines):
        return None
    lines = snap.lines
    start = row
    while start > 0 and row - start < _RAW_WRAP_ROWS and _width(lines[start - 1]) >= snap.cols - 1:
        start -= 1  # a full row above: the line wrapped into the next one
    box = "\n".join([*lines[start:row], _cells(lines[row], col)])
    return box, "\n".join(lines[:start])


_RAW_WRAP_ROWS = 8  # at most this many wrapped rows above the cursor's belong to its line


def _width(line: str) -> int:
    return sum(max(wcwidth(ch), 0) for ch in line)


def _cells(line: str, width: int) -> str:
    """The start of ``line`` that fills ``width`` terminal cells (wide characters: 2)."""
    used = 0
    for i, ch in enumerate(line):
        used += max(wcwidth(ch), 0)
        if used > width:
            return line[:i]
    return line


__all__ = ["POLL_S", "ScreenEvidence", "screen_tail"]
