"""Typing an answer into the dialog a waiting agent shows, and proving it closed.

:meth:`Service.answer <agentwrap.service.Service.answer>` checked the answer
against the question the registry held and stored it as pending. On its next
turn the supervisor hands it to :class:`Answerer`, which:

1. reads the **live** screen again: unless the agent still waits with the very
   same question (same id), the answer is ``stale`` and nothing is typed;
2. presses the agent's own keys: for a numbered option, Up/Down from the
   option under the cursor to the one chosen, then reads the screen again
   until the cursor is seen on it (a few tries), and only then Enter; for a
   y/n prompt (options with a key letter and no number, Aider) the letter and
   Enter; for ``deny`` the dialog's ``deny_keys``; for free text (only where
   the profile declares ``free_text = "option"``) the option that asks for
   text, Enter, the text, Enter;
3. verifies: the dialog closed (the state leaves ``waiting_input`` or the agent
   asks something else) within ``verify_s`` -> ``applied``; else ``failed``
   with the screen's last lines as evidence.

The question id is checked again right before Enter, so a dialog that changed
under the cursor (the agent moved on) gets no Enter meant for another one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..audit import AuditLog
from ..detect.profiles import Dialog, Profile
from ..detect.question import Question
from ..detect.states import State
from ..errors import AgentwrapError
from ..paths import Paths
from ..queue.answers import APPLIED, FAILED, STALE, Answer, AnswerStore
from .seams import AnswerDriver

log = logging.getLogger("agentwrap.answering")

POLL_S = 0.03
KEY_GAP_S = 0.02  # between two key presses: a TUI reads each as its own event


class _Outcome(Exception):
    """Ends an answer early with its status and detail."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class Answerer:
    """Applies a session's pending answers on the supervisor's turns."""

    def __init__(
        self, store: AnswerStore, profile: Profile, session: str, audit: AuditLog, *,
        verify_s: float = 5.0, cursor_s: float = 2.0, max_age_s: float = 120.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.profile = profile
        self.session = session
        self.audit = audit
        self.verify_s = verify_s  # the dialog must close within this
        self.cursor_s = cursor_s  # the cursor must be seen on the option within this (per try)
        self.max_age_s = max_age_s  # an answer nobody applied for this long is not typed
        self.clock = clock

    @classmethod
    def for_session(cls, paths: Paths, profile: Profile, session: str) -> Answerer:
        return cls(AnswerStore(paths.db_path, events_dir=paths.events_dir), profile, session,
                   AuditLog(paths.audit_log))

    def close(self) -> None:
        self.store.close()

    def abandon(self, reason: str) -> int:
        """The agent is gone: every pending answer fails."""
        pending = self.store.pending(self.session)
        for a in pending:
            self._conclude(a, FAILED, reason)
        return len(pending)

    def step(self, sup: AnswerDriver) -> None:
        """Apply every pending answer, oldest first (cheap when there is none)."""
        for a in self.store.pending(self.session):
            if sup.stopping:
                return
            try:
                if self.clock() - a.created > self.max_age_s:
                    raise _Outcome(FAILED, f"not applied within {self.max_age_s:.0f} s of the"
                                   " request (no supervisor turn); nothing was typed")
                self._apply(sup, a)
            except _Outcome as out:
                self._conclude(a, out.status, out.detail)
            except AgentwrapError as exc:  # the backend failed, the agent exited
                self._conclude(a, FAILED, f"{type(exc).__name__}: {exc.message}")

    def _conclude(self, a: Answer, status: str, detail: str) -> None:
        if self.store.conclude(a.id, status, detail):
            log.info("answer %s to question %s: %s (%s)", a.id, a.question_id, status, detail)
            self.audit.write(event=f"answer_{status}", session=self.session, answer=a.id,
                             question=a.question_id, how=str(a.answer.get("how", "")))

    # --- one answer ----------------------------------------------------------------------

    def _live(self, sup: AnswerDriver, a: Answer, *, look: bool = True) -> Question:
        """The question on screen now; raises stale unless it is the one answered."""
        reading = sup.observe() if look else sup.reading
        q = sup.detector.question
        if reading.state is not State.WAITING_INPUT or q is None:
            raise _Outcome(STALE, f"the agent no longer asks question {a.question_id} (it is"
                           f" {reading.state}: {reading.reason}); nothing was typed")
        if q.id != a.question_id:
            raise _Outcome(STALE, f"the agent asks something else now (question {q.id}, not"
                           f" {a.question_id}); nothing was typed")
        return q

    def _dialog(self, q: Question) -> Dialog:
        dialog = next((d for d in self.profile.dialogs if d.name == q.dialog), None)
        if dialog is None:
            raise _Outcome(FAILED, f"profile {self.profile.name!r} has no dialog {q.dialog!r}")
        return dialog

    def _apply(self, sup: AnswerDriver, a: Answer) -> None:
        q = self._live(sup, a)
        dialog = self._dialog(q)
        how = a.answer.get("how")
        if how == "deny":
            self._keys(sup, dialog.deny_keys)
            typed = "+".join(dialog.deny_keys)
        elif how == "option" and a.answer.get("number") is not None:
            number = int(a.answer["number"])
            self._move_to(sup, a, number)
            self._live(sup, a)  # still the same question, right before Enter
            sup.term.send_key("Enter")
            typed = f"option {number} ({a.answer.get('label')}): arrows + Enter"
        elif how == "option" and a.answer.get("key"):
            key = str(a.answer["key"])
            if len(key) != 1 or not key.isalpha():
                raise _Outcome(FAILED, f"option key {key!r} is not one letter")
            sup.term.send_text(key)
            self._pause(sup, KEY_GAP_S * 2)
            sup.term.send_key("Enter")
            typed = f"{key!r} + Enter ({a.answer.get('label')})"
        elif how == "text" and dialog.free_text == "option":
            typed = self._free_text(sup, a, q)
        else:
            raise _Outcome(FAILED, f"cannot type answer {dict(a.answer)!r} into dialog"
                           f" {dialog.name!r}")
        self._verify(sup, a, typed)

    def _keys(self, sup: AnswerDriver, keys: tuple[str, ...]) -> None:
        for i, key in enumerate(keys):
            if i:
                self._pause(sup, KEY_GAP_S * 2)
            sup.term.send_key(key)

    def _move_to(self, sup: AnswerDriver, a: Answer, number: int) -> None:
        """Arrows from the option under the cursor to ``number``, until the screen shows it."""
        for _ in range(3):
            q = self._live(sup, a)
            if q.highlighted is None:
                raise _Outcome(FAILED, "no cursor seen on the options; nothing was pressed")
            if q.highlighted == number:
                return
            key = "Down" if number > q.highlighted else "Up"
            for _ in range(abs(number - q.highlighted)):
                sup.term.send_key(key)
                self._pause(sup, KEY_GAP_S)
            deadline = time.monotonic() + self.cursor_s
            while time.monotonic() < deadline:
                q = self._live(sup, a)
                if q.highlighted == number:
                    return
                sup.pump(POLL_S)
        raise _Outcome(FAILED, f"the cursor did not reach option {number} (it is on"
                       f" {q.highlighted}); Enter was not pressed")

    def _free_text(self, sup: AnswerDriver, a: Answer, q: Question) -> str:
        number = a.answer.get("number")
        text = str(a.answer.get("text", ""))
        if number is None or not text:
            raise _Outcome(FAILED, "a free-text answer without its option or text")
        self._move_to(sup, a, int(number))
        self._live(sup, a)
        sup.term.send_key("Enter")  # opens the text field
        if not self._wait(sup, lambda: self._question_gone(sup, a)):
            raise _Outcome(FAILED, "picking the free-text option did not open a text field:"
                           f" {self._tail(sup)}")
        sup.term.send_text(text)
        if not self._wait(sup, lambda: self._shows(sup, text)):
            raise _Outcome(FAILED, f"the text did not show up; Enter was not pressed: "
                           f"{self._tail(sup)}")
        sup.term.send_key("Enter")
        return f"option {number} + Enter, {len(text)} characters of text + Enter"

    def _shows(self, sup: AnswerDriver, text: str) -> bool:
        sup.observe()
        return sup.snap is not None and text in sup.snap.text()

    def _question_gone(self, sup: AnswerDriver, a: Answer) -> bool:
        reading = sup.observe()
        q = sup.detector.question
        return reading.state is not State.WAITING_INPUT or q is None or q.id != a.question_id

    def _verify(self, sup: AnswerDriver, a: Answer, typed: str) -> None:
        # Gone on two looks in a row: a frame caught half-redrawn (the dialog's
        # options not drawn yet) must not pass for a closed dialog.
        seen = [0]

        def closed() -> bool:
            seen[0] = seen[0] + 1 if self._question_gone(sup, a) else 0
            return seen[0] >= 2

        if self._wait(sup, closed, self.verify_s):
            q = sup.detector.question
            now = f"{sup.reading.state}" + (f", asking {q.id}" if q is not None else "")
            raise _Outcome(APPLIED, f"typed {typed}; the dialog closed (now {now})")
        raise _Outcome(FAILED, f"typed {typed}, but question {a.question_id} is still open after"
                       f" {self.verify_s:.0f} s: {self._tail(sup)}")

    def _wait(self, sup: AnswerDriver, cond: Callable[[], bool], timeout: float = 2.0) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if cond():
                return True
            if time.monotonic() >= deadline or sup.reading.state is State.EXITED:
                return False
            sup.pump(POLL_S)

    def _pause(self, sup: AnswerDriver, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            sup.pump(left)

    def _tail(self, sup: AnswerDriver) -> str:
        if sup.snap is None:
            return "(no screen)"
        lines = [line.rstrip() for line in sup.snap.text().splitlines() if line.strip()]
        return " | ".join(lines[-4:])[-300:]

