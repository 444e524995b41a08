"""Typing an answer into the dialog a waiting agent shows, and proving it closed.

:meth:`Service.answer <agentwrap.service.Service.answer>` checked the answer
against the question the registry held and stored it as pending. On its next
turn the supervisor hands it to :class:`Answerer`, which:

1. reads the **live** screen again: unless the agent still waits with the very
   same question (same id), the answer is ``stale`` and nothing is typed;
2. presses the agent's own keys: for a numbered option, Up/Down from the
   option under the cursor to the one chosen (Left/Right for buttons side by
   side; where only colour marks the cursor, as in OpenCode, it is the one
   option drawn on a background of its own), then reads the screen again
   until the cursor is seen on it (a few tries), and only then Enter; for a
   y/n prompt (options with a key letter and no number, Aider) the letter and
   Enter; for ``deny`` the dialog's ``deny_keys``; for free text (only where
   the profile declares ``free_text = "option"``) the option that asks for
   text, Enter, the text, Enter; for a multi-select question (``options``)
   the dialog's ``toggle_key`` on each option whose box is not as wanted,
   seeing the box change before going on, then ``next_key``; for every question
   of a dialog shown as tabs (``answers``) first a look at every tab (``prev_key``
   back to the first, ``next_key`` through them) so that each answer is matched
   to the options its tab shows before anything is picked, then the same
   again answering each tab, and on the review tab its ``submit_option``
   (the key sequence is in ``patterns/claude.toml``);
Keys a dialog may drop are retried only where the screen proves they were not
taken: before its first key the answerer waits out the dialog's ``settle_ms``
(measured from when the dialog was first seen; Claude Code 2.1.332 ignores Tab
for about 0.2 s after AskUserQuestion appears), and a key that should switch
tabs is pressed again (up to :data:`KEY_TRIES` times) when the dialog shows the
same tab for ``cursor_s`` after it; the arrows are re-counted from the cursor
seen, and a box is toggled again only when it is still not as wanted.

3. verifies: the dialog closed (the state leaves ``waiting_input`` or the agent
   asks something else) within ``verify_s`` -> ``applied``; else ``failed``
   with the screen's last lines as evidence.

A question read from neither the screen nor a hook (:data:`TYPED_SOURCES`:
Codex's app-server asks its approvals as requests) is never typed: after step 1
its answer is a reply to the request, through the session's :class:`Replies`
(the agent's own server; this layer names none). Without one it fails and
nothing is typed.

The question id is checked again right before Enter, so a dialog that changed
under the cursor (the agent moved on) gets no Enter meant for another one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from ..audit import AuditLog
from ..delivery.seams import AnswerDriver
from ..detect.profiles import Dialog, Profile
from ..detect.question import Item, Question, free_text_option, pick
from ..detect.states import State
from ..errors import AgentwrapError, InvalidAnswer
from ..terminal.screen import Snapshot
from ..terminal.styles import Row
from .actions import (
    AnswerAction,
    AnswerStatus,
    DenyAnswer,
    OptionAnswer,
    OptionsAnswer,
    TabsAnswer,
    TextAnswer,
)
from .store import Answer, AnswerStore

log = logging.getLogger("agentwrap.answering")

POLL_S = 0.03
KEY_GAP_S = 0.02  # between two key presses: a TUI reads each as its own event
STEADY_S = 0.3  # the dialog unchanged this long: keys that change nothing have been read
KEY_TRIES = 3  # presses of a key whose effect the screen did not show (a dropped key)


#: Where a question is read that keys answer: the screen, or a hook whose dialog
#: is on the screen. A question from anywhere else is its source's to answer.
TYPED_SOURCES = frozenset({"screen", "hook"})


class Replies(Protocol):
    """A server of the agent's own that asked a question as a request (Codex's
    app-server): answered by a reply to that request, never by keys."""

    def answer(self, question: Question, answer: AnswerAction, wait: Callable[[float], None],
               verify_s: float) -> tuple[AnswerStatus, str]:
        """Reply ``answer``; its outcome and detail. ``wait(s)`` lets the supervisor go on."""
        ...


class _Outcome(Exception):
    """Ends an answer early with its status and detail."""

    def __init__(self, status: AnswerStatus, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class Answerer:
    """Applies a session's pending answers on the supervisor's turns."""

    def __init__(
        self, store: AnswerStore, profile: Profile, session: str, audit: AuditLog, *,
        verify_s: float = 5.0, cursor_s: float = 2.0, max_age_s: float = 120.0,
        clock: Callable[[], float] = time.time, server: Replies | None = None,
    ) -> None:
        self.store = store
        self.server = server  # the agent's own server: its questions are answered by a reply
        self.profile = profile
        self.session = session
        self.audit = audit
        self.verify_s = verify_s  # the dialog must close within this
        self.cursor_s = cursor_s  # the cursor must be seen on the option within this (per try)
        self.max_age_s = max_age_s  # an answer nobody applied for this long is not typed
        self.clock = clock
        # True while keys are typed: the supervisor neither tells the person about
        # nor applies answer rules to the screens an answer goes through (the next
        # tab of a dialog of several questions is no new question to them)
        self.applying = False

    def close(self) -> None:
        self.store.close()

    def abandon(self, reason: str) -> int:
        """The agent is gone: every pending answer fails."""
        pending = self.store.pending(self.session)
        for a in pending:
            self._conclude(a, AnswerStatus.FAILED, reason)
        return len(pending)

    def step(self, sup: AnswerDriver) -> None:
        """Apply every pending answer, oldest first (cheap when there is none)."""
        for a in self.store.pending(self.session):
            if sup.stopping:
                return
            try:
                if self.clock() - a.created > self.max_age_s:
                    raise _Outcome(AnswerStatus.FAILED, f"not applied within {self.max_age_s:.0f} s of the"
                                   " request (no supervisor turn); nothing was typed")
                self.applying = True
                self._apply(sup, a)
            except _Outcome as out:
                self._conclude(a, out.status, out.detail)
            except AgentwrapError as exc:  # the backend failed, the agent exited
                self._conclude(a, AnswerStatus.FAILED, f"{type(exc).__name__}: {exc.message}")
            finally:
                self.applying = False

    def _conclude(self, a: Answer, status: AnswerStatus, detail: str) -> None:
        if self.store.conclude(a.id, status, detail):
            log.info("answer %s to question %s: %s (%s)", a.id, a.question_id, status, detail)
            self.audit.write(event=f"answer_{status}", session=self.session, answer=a.id,
                             question=a.question_id, how=a.answer.how)

    # --- one answer ----------------------------------------------------------------------

    def _live(self, sup: AnswerDriver, a: Answer, *, look: bool = True) -> Question:
        """The question on screen now; raises stale unless it is the one answered."""
        reading = sup.observe() if look else sup.reading
        q = sup.detector.question
        if reading.state is not State.WAITING_INPUT or q is None:
            raise _Outcome(AnswerStatus.STALE, f"the agent no longer asks question {a.question_id} (it is"
                           f" {reading.state}: {reading.reason}); nothing was typed")
        if q.id != a.question_id:
            raise _Outcome(AnswerStatus.STALE, f"the agent asks something else now (question {q.id}, not"
                           f" {a.question_id}); nothing was typed")
        return q

    def _dialog(self, q: Question) -> Dialog:
        dialog = next((d for d in self.profile.dialogs if d.name == q.dialog), None)
        if dialog is None:
            raise _Outcome(AnswerStatus.FAILED, f"profile {self.profile.name!r} has no dialog {q.dialog!r}")
        return dialog

    def _apply(self, sup: AnswerDriver, a: Answer) -> None:
        q = self._live(sup, a)
        if q.source not in TYPED_SOURCES:  # never typed: the reply closes the TUI's dialog
            if self.server is None:
                raise _Outcome(AnswerStatus.FAILED, f"the question came from {q.source}, which"
                               " this supervisor does not read; nothing was typed")
            raise _Outcome(*self.server.answer(q, a.answer, lambda s: self._pause(sup, s),
                                               self.verify_s))
        dialog = self._dialog(q)
        if self._settle(sup, dialog):
            q = self._live(sup, a)
        act = a.answer
        if isinstance(act, DenyAnswer):
            self._keys(sup, dialog.deny_keys)
            typed = "+".join(dialog.deny_keys)
        elif isinstance(act, OptionAnswer) and act.number is not None:
            number = act.number
            self._move_to(sup, a, number)
            self._live(sup, a)  # still the same question, right before Enter
            sup.term.send_key("Enter")
            typed = f"option {number} ({act.label}): arrows + Enter"
        elif isinstance(act, OptionAnswer) and act.key:
            key = act.key
            if len(key) != 1 or not key.isalpha():
                raise _Outcome(AnswerStatus.FAILED, f"option key {key!r} is not one letter")
            sup.term.send_text(key)
            typed = f"{key!r} ({act.label})"
            if dialog.key_enter:
                self._pause(sup, KEY_GAP_S * 2)
                sup.term.send_key("Enter")
                typed = f"{key!r} + Enter ({act.label})"
        elif isinstance(act, TextAnswer) and dialog.free_text == "option":
            typed = self._free_text(sup, a, act)
        elif isinstance(act, OptionsAnswer) and dialog.toggle_key and dialog.next_key:
            self._options_here(sup, a, act, q, dialog)
            return
        elif isinstance(act, TabsAnswer) and dialog.toggle_key and dialog.next_key \
                and dialog.prev_key:
            self._every_tab(sup, a, act, q, dialog)
            return
        else:
            raise _Outcome(AnswerStatus.FAILED, f"cannot type answer {act.to_json()!r} into"
                           f" dialog {dialog.name!r}")
        self._verify(sup, a, typed)

    def _settle(self, sup: AnswerDriver, dialog: Dialog) -> bool:
        """Wait until the dialog has been on screen for its ``settle_ms`` (keys
        sooner may be lost); True when it waited (look at the screen again)."""
        since = sup.detector.dialog_since
        if not dialog.settle_ms or since is None:
            return False
        left = since + dialog.settle_ms / 1000 - time.monotonic()
        if left <= 0:
            return False
        self._pause(sup, left)
        return True

    def _keys(self, sup: AnswerDriver, keys: tuple[str, ...]) -> None:
        for i, key in enumerate(keys):
            if i:
                self._pause(sup, KEY_GAP_S * 2)
            sup.term.send_key(key)

    def _move_to(self, sup: AnswerDriver, a: Answer, number: int,
                 look: Callable[[], Question] | None = None) -> None:
        """Arrows from the option under the cursor to ``number``, until the screen shows it.
        ``look``: the question on screen now (default: the one answered, else stale)."""
        look = look or (lambda: self._live(sup, a))
        here: int | None = None
        for _ in range(3):
            q = look()
            here = _cursor_on(q, sup.snap)
            if here is None:
                raise _Outcome(AnswerStatus.FAILED, "no cursor seen on the options; nothing was pressed")
            if here == number:
                return
            forward, back = ("Right", "Left") if _in_a_row(q, sup.snap) else ("Down", "Up")
            key = forward if number > here else back
            for _ in range(abs(number - here)):
                sup.term.send_key(key)
                self._pause(sup, KEY_GAP_S)
            deadline = time.monotonic() + self.cursor_s
            while time.monotonic() < deadline:
                q = look()
                if _cursor_on(q, sup.snap) == number:
                    return
                sup.pump(POLL_S)
        raise _Outcome(AnswerStatus.FAILED, f"the cursor did not reach option {number} (it is on"
                       f" {here}); Enter was not pressed")

    def _free_text(self, sup: AnswerDriver, a: Answer, act: TextAnswer) -> str:
        number, text = act.number, act.text
        if number is None or not text:
            raise _Outcome(AnswerStatus.FAILED, "a free-text answer without its option or text")
        self._move_to(sup, a, int(number))
        self._live(sup, a)
        sup.term.send_key("Enter")  # opens the text field
        if not self._wait(sup, lambda: self._question_gone(sup, a)):
            raise _Outcome(AnswerStatus.FAILED, "picking the free-text option did not open a text field:"
                           f" {self._tail(sup)}")
        sup.term.send_text(text)
        if not self._wait(sup, lambda: self._shows(sup, text)):
            raise _Outcome(AnswerStatus.FAILED, f"the text did not show up; Enter was not pressed: "
                           f"{self._tail(sup)}")
        sup.term.send_key("Enter")
        return f"option {number} + Enter, {len(text)} characters of text + Enter"

    # --- multi-select, and several questions as tabs --------------------------------------

    def _options_here(self, sup: AnswerDriver, a: Answer, act: OptionsAnswer, q: Question,
                      dialog: Dialog) -> None:
        """Tick exactly ``numbers`` on the multi-select question open, then go on
        (``next_key``); a question shown alone is then submitted on the review."""
        numbers = set(act.numbers)
        self._tick(sup, a, lambda: self._live(sup, a), numbers, dialog)
        typed = (f"options {sorted(numbers)} ticked ({dialog.toggle_key} on each box that"
                 f" differed), {dialog.next_key}")
        self._live(sup, a)
        if len(q.tabs) <= 1 and dialog.submit_option:  # one question: the review is next
            review = self._next_tab(sup, a, q, dialog, typed, key=dialog.next_key)
            if not self._is_review(review, dialog):
                raise _Outcome(AnswerStatus.FAILED, f"typed {typed}, but no review followed:"
                               f" {self._tail(sup)}")
            self._submit(sup, a, review, dialog, typed)
            self._verify(sup, a, f"{typed}; {dialog.submit_option} + Enter",
                         question_id=review.id)
            return
        sup.term.send_key(dialog.next_key)
        self._verify(sup, a, typed)

    def _every_tab(self, sup: AnswerDriver, a: Answer, act: TabsAnswer, q: Question,
                   dialog: Dialog) -> None:
        """Answer every tab of the dialog, then submit on its review tab."""
        tabs = q.tabs
        given = {x.tab: list(x.values) for x in act.answers}
        if act.tabs != tabs or sorted(given) != list(range(len(tabs))):
            raise _Outcome(AnswerStatus.STALE, f"the dialog's questions are {list(tabs)} now,"
                           f" not {list(act.tabs)}; nothing was typed")
        # 1. look at every tab: each answer matched to the options it shows
        first = self._first_tab(sup, a, q, dialog, "")
        plan: list[tuple[str, Item, list[int]]] = []
        here = first
        for i, header in enumerate(tabs):
            if self._is_review(here, dialog):
                raise _Outcome(AnswerStatus.FAILED, f"the review came after {i} of {len(tabs)} questions;"
                               " nothing was answered")
            item = here.questions[0]
            plan.append((here.id, item, self._resolve(item, given[i], header)))
            here = self._next_tab(sup, a, here, dialog, "", key=dialog.next_key)
        if not self._is_review(here, dialog):
            raise _Outcome(AnswerStatus.FAILED, "no review tab after the last question; nothing was"
                           f" answered: {self._tail(sup)}")
        # 2. back to the first tab, and answer each
        here = self._first_tab(sup, a, here, dialog, "")
        done: list[str] = []
        for (qid, item, numbers), header in zip(plan, tabs, strict=True):
            typed = "; ".join(done) or "nothing"
            if here.id != qid:
                raise _Outcome(AnswerStatus.FAILED, f"question {header!r} changed on screen after {typed}")
            look = self._tab_look(sup, a, here.id, dialog, typed)
            if item.multiSelect:
                self._tick(sup, a, look, set(numbers), dialog)
                key = dialog.next_key
                done.append(f"{header}: {numbers} ticked ({dialog.toggle_key} on each box that"
                            f" differed), {key}")
            else:  # Enter answers a single-select tab and goes on by itself
                self._move_to(sup, a, numbers[0], look)
                look()
                key = "Enter"
                done.append(f"{header}: option {numbers[0]} + Enter")
            here = self._next_tab(sup, a, here, dialog, "; ".join(done), key=key)
        typed = "; ".join(done)
        if not self._is_review(here, dialog):
            raise _Outcome(AnswerStatus.FAILED, f"typed {typed}, but no review tab followed:"
                           f" {self._tail(sup)}")
        self._submit(sup, a, here, dialog, typed)
        self._verify(sup, a, f"{typed}; {dialog.submit_option} + Enter", question_id=here.id)

    def _resolve(self, item: Item, values: list[str], header: str) -> list[int]:
        """The option numbers ``values`` name on this tab, or failed (nothing answered)."""
        try:
            chosen = [pick(item.options, v)[0] for v in values]
        except InvalidAnswer as exc:
            raise _Outcome(AnswerStatus.FAILED, f"question {header!r}: {exc.message}; nothing was"
                           " answered") from None
        if not item.multiSelect and len(chosen) != 1:
            raise _Outcome(AnswerStatus.FAILED, f"question {header!r} takes one option, not {len(chosen)};"
                           " nothing was answered")
        for o in chosen:
            if o.number is None or free_text_option(Item(item.question, options=(o,))) or (
                    item.multiSelect and o.checked is None):
                raise _Outcome(AnswerStatus.FAILED, f"question {header!r}: {o.label!r} cannot be picked"
                               " from here; nothing was answered")
        return sorted({o.number for o in chosen if o.number is not None})

    def _is_review(self, q: Question, dialog: Dialog) -> bool:
        return any(o.label == dialog.submit_option for o in q.questions[0].options)

    def _in_dialog(self, sup: AnswerDriver, a: Answer, dialog: Dialog, tabs: tuple[str, ...],
                   typed: str) -> Question:
        """The question on screen, still a tab of the same dialog; else stale (nothing
        typed yet) or failed (part of the answer was typed)."""
        reading = sup.observe()
        q = sup.detector.question
        if reading.state is State.WAITING_INPUT and q is not None and q.dialog == dialog.name \
                and q.tabs == tabs:
            return q
        now = f"{reading.state}" + (f", asking {q.id}" if q is not None else "")
        if typed:
            raise _Outcome(AnswerStatus.FAILED, f"typed {typed}, then the dialog went away (now {now})")
        raise _Outcome(AnswerStatus.STALE, f"the dialog of question {a.question_id} went away (now {now});"
                       " nothing was answered")

    def _tab_look(self, sup: AnswerDriver, a: Answer, qid: str, dialog: Dialog,
                  typed: str) -> Callable[[], Question]:
        """A look that insists on one tab (question ``qid``) of the dialog."""
        asked = a.answer.tabs if isinstance(a.answer, TabsAnswer) else ()
        tabs = self._in_dialog(sup, a, dialog, asked or
                               (sup.detector.question.tabs if sup.detector.question else ()),
                               typed).tabs

        def look() -> Question:
            q = self._in_dialog(sup, a, dialog, tabs, typed)
            if q.id != qid:
                raise _Outcome(AnswerStatus.FAILED, f"typed {typed or 'nothing'}, then the question on"
                               f" screen changed ({q.id}, not {qid})")
            return q

        return look

    def _tick(self, sup: AnswerDriver, a: Answer, look: Callable[[], Question],
              numbers: set[int], dialog: Dialog) -> None:
        """Make exactly ``numbers`` ticked: the toggle key on each box that differs,
        each change seen on screen before the next."""
        for option in look().questions[0].options:
            if option.checked is None or option.number is None:
                continue
            want = option.number in numbers
            if option.checked == want:
                continue
            self._move_to(sup, a, option.number, look)
            look()
            sup.term.send_key(dialog.toggle_key)
            n = option.number

            def marked(n: int = n, want: bool = want) -> bool:
                box = next((o for o in look().questions[0].options if o.number == n), None)
                return box is not None and box.checked == want

            if not self._wait(sup, marked, self.cursor_s):
                raise _Outcome(AnswerStatus.FAILED, f"pressed {dialog.toggle_key} on option {n}, but its box"
                               f" did not become {'ticked' if want else 'empty'}:"
                               f" {self._tail(sup)}")

    def _next_tab(self, sup: AnswerDriver, a: Answer, q: Question, dialog: Dialog, typed: str,
                  *, key: str) -> Question:
        """Press ``key`` and wait for the next tab of the same dialog (another
        question id) to show. The dialog's ``next_key`` only moves between tabs:
        while the same tab stays on screen ``cursor_s`` after it, it was dropped
        and is pressed again (:data:`KEY_TRIES` in all). Any other key (Enter,
        which answers the tab) is pressed once: a second one could answer the
        next tab."""
        seen: list[Question] = []

        def moved() -> bool:
            now = self._in_dialog(sup, a, dialog, q.tabs, typed)
            if now.id != q.id:
                seen.append(now)
                return True
            return False

        tries = KEY_TRIES if key == dialog.next_key else 1
        for _ in range(tries):
            sup.term.send_key(key)
            if self._wait(sup, moved, self.cursor_s if tries > 1 else self.cursor_s * 2):
                return seen[-1]
        raise _Outcome(AnswerStatus.FAILED, f"typed {typed or 'nothing'}, but the dialog did not move"
                       f" on from question {q.id} ({key} pressed {tries}"
                       f" time{'s' if tries > 1 else ''}): {self._tail(sup)}")

    def _first_tab(self, sup: AnswerDriver, a: Answer, q: Question, dialog: Dialog,
                   typed: str) -> Question:
        """``prev_key`` once per tab: from anywhere, the first question (the key does
        nothing there), then the screen held still for a few looks."""
        for i in range(len(q.tabs)):
            if i:
                self._pause(sup, KEY_GAP_S)
            sup.term.send_key(dialog.prev_key)
        last: list[str] = []
        steady = time.monotonic()

        def still() -> bool:
            nonlocal steady
            now = self._in_dialog(sup, a, dialog, q.tabs, typed)
            if not last or last[-1] != now.id:
                last.append(now.id)
                steady = time.monotonic()
            return time.monotonic() - steady >= STEADY_S

        if not self._wait(sup, still, self.cursor_s * 2):
            raise _Outcome(AnswerStatus.FAILED, f"the dialog kept changing after {dialog.prev_key}:"
                           f" {self._tail(sup)}")
        here = self._in_dialog(sup, a, dialog, q.tabs, typed)
        if self._is_review(here, dialog):
            raise _Outcome(AnswerStatus.FAILED, f"{dialog.prev_key} did not leave the review tab")
        return here

    def _submit(self, sup: AnswerDriver, a: Answer, review: Question, dialog: Dialog,
                typed: str) -> None:
        """On the review tab, the submit option + Enter."""
        option = next((o for o in review.questions[0].options
                       if o.label == dialog.submit_option), None)
        if option is None or option.number is None:
            raise _Outcome(AnswerStatus.FAILED, f"typed {typed}, but no {dialog.submit_option!r} on the"
                           f" review: {self._tail(sup)}")
        look = self._tab_look(sup, a, review.id, dialog, typed)
        self._move_to(sup, a, option.number, look)
        look()
        sup.term.send_key("Enter")

    def _shows(self, sup: AnswerDriver, text: str) -> bool:
        sup.observe()
        return sup.snap is not None and text in sup.snap.text()

    def _question_gone(self, sup: AnswerDriver, a: Answer, question_id: str | None = None) -> bool:
        reading = sup.observe()
        q = sup.detector.question
        return reading.state is not State.WAITING_INPUT or q is None \
            or q.id != (question_id or a.question_id)

    def _verify(self, sup: AnswerDriver, a: Answer, typed: str,
                question_id: str | None = None) -> None:
        # Gone on two looks in a row: a frame caught half-redrawn (the dialog's
        # options not drawn yet) must not pass for a closed dialog.
        seen = [0]

        def closed() -> bool:
            seen[0] = seen[0] + 1 if self._question_gone(sup, a, question_id) else 0
            return seen[0] >= 2

        if self._wait(sup, closed, self.verify_s):
            q = sup.detector.question
            now = f"{sup.reading.state}" + (f", asking {q.id}" if q is not None else "")
            raise _Outcome(AnswerStatus.APPLIED, f"typed {typed}; the dialog closed (now {now})")
        raise _Outcome(AnswerStatus.FAILED, f"typed {typed}, but question {question_id or a.question_id} is"
                       " still open after"
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


def _cursor_on(q: Question, snap: Snapshot | None) -> int | None:
    """The option under the cursor: as the question read it, else (a dialog that
    marks it only in colour, OpenCode's buttons) the one option whose label is
    drawn on a background none of the others has. None when that is not one
    option: then nothing may be pressed."""
    if q.highlighted is not None:
        return q.highlighted
    if snap is None or not q.questions or len(q.questions[0].options) < 3:
        return None  # of two differing backgrounds, which is the cursor's cannot be told
    rows = snap.styled_rows()
    backgrounds = [_label_background(rows, o.label) for o in q.questions[0].options]
    if any(bg is _MISSING for bg in backgrounds):
        return None
    odd = [i for i, bg in enumerate(backgrounds) if backgrounds.count(bg) == 1]
    return odd[0] + 1 if len(odd) == 1 else None


_MISSING = object()


def _in_a_row(q: Question, snap: Snapshot | None) -> bool:
    """The options are buttons side by side on one line (OpenCode's permission
    dialog): the cursor moves with Left/Right there, not Up/Down."""
    labels = [o.label for o in q.questions[0].options] if q.questions else []
    if snap is None or len(labels) < 2:
        return False
    return any(all(label in line for label in labels) for line in snap.lines)


def _label_background(rows: tuple[Row, ...], label: str) -> object:
    """The background of the lowest run that holds ``label`` whole, else _MISSING."""
    for row in reversed(rows):
        for run in row:
            if run.text.strip() == label:
                return run.style.bg
    return _MISSING
