"""Answering from a one-tap link (:mod:`agentwrap.answers.links`): what a link
would do now, and doing it once.

A link is checked, every time it is opened or tapped, in this order: its
signature and expiry; that its session still runs and asks the very question
it was minted for (another question, or none: ``stale`` / ``closed``); that no
link of its notice was tapped before (``used``); then the person's rules and
the built-in deny-list, which decide before any link: a rule that denies the
question, or a command the deny-list holds (or one that may be cut off),
leaves only Deny to the link (``refused``). Only then is the tap spent in the
store and the answer taken by the one intake every surface uses
(:meth:`AnswerIntake.answer <agentwrap.answers.intake.AnswerIntake.answer>`,
source ``link``), which checks the question once more and wakes the
supervisor to type it with the agent's own keys.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..answers.links import Claim, LinkLedger, holds_back, load_or_create_key, verify
from ..config import AnswerRule
from ..detect.question import Question
from ..errors import AgentwrapError, AnswerLinkRefused
from ..paths import Paths

if TYPE_CHECKING:
    from ..answers.intake import AnswerResult
    from ..answers.store import AnswerStore
    from ..sessions.registry import SessionRecord

SOURCE = "link"


@dataclass(frozen=True)
class LinkView:
    """What a link answers and whether a tap on it would: ``refusal`` says why
    not (None: it would answer)."""

    claim: Claim
    question: Question | None  # the question open now (None: none, or the session is gone)
    refusal: AnswerLinkRefused | None


class Links:
    """Links of one service: checked against its registry, spent in its store."""

    def __init__(self, paths: Paths, resolve: Callable[[str], str],
                 state: Callable[[str], SessionRecord],
                 store: Callable[[], AnswerStore], rules: Callable[[], Sequence[AnswerRule]],
                 intake: Callable[[], object]) -> None:
        self.paths = paths
        self._resolve = resolve
        self._state = state
        self._store = store
        self._rules = rules
        self._intake = intake
        self._ledger: LinkLedger | None = None
        self._key: bytes | None = None
        self._lock = threading.Lock()

    @property
    def key(self) -> bytes:
        if self._key is None:
            self._key = load_or_create_key(self.paths)
        return self._key

    @property
    def ledger(self) -> LinkLedger:
        with self._lock:
            if self._ledger is None:
                self._ledger = LinkLedger(self._store().db)
            return self._ledger

    def look(self, token: str) -> LinkView:
        """What ``token``'s link answers, and why a tap would do nothing (if so);
        :class:`AnswerLinkRefused` for a forged or expired one. Changes nothing."""
        claim = verify(self.key, token)
        try:
            rec = self._state(claim.address)
        except AgentwrapError:
            return LinkView(claim, None, AnswerLinkRefused(
                f"session {claim.address!r} is gone: nothing was answered", reason="closed"))
        question = Question.from_json(rec.question) if rec.question else None
        return LinkView(claim, question, self._refusal(claim, rec, question))

    def _refusal(self, claim: Claim, rec: SessionRecord,
                 question: Question | None) -> AnswerLinkRefused | None:
        if rec.ended is not None:
            return AnswerLinkRefused(f"session {claim.address!r} has ended: nothing was answered",
                                     reason="closed")
        if question is None:
            return AnswerLinkRefused(
                f"session {claim.address!r} asks nothing now (question {claim.question_id} was"
                " answered or closed): nothing was answered", reason="closed")
        if question.id != claim.question_id:
            return AnswerLinkRefused(
                f"question {claim.question_id} is not open: session {claim.address!r} asks"
                f" something else now (question {question.id}): nothing was answered",
                reason="stale", hint="answer the new question from its own notice or the dashboard")
        used = self.ledger.spent(claim)
        if used is not None:
            return _used(used)
        if not claim.deny:
            why = self.holds_back(question, rec)
            if why:
                return AnswerLinkRefused(f"{why}: a link cannot approve it; Deny still works",
                                         reason="refused",
                                         hint="read it in the terminal (`agentwrap attach"
                                         f" {claim.address}`) and answer there if it is safe")
        return None

    def holds_back(self, question: Question, rec: SessionRecord) -> str:
        """Why the person's rules or the deny-list keep a link from picking an
        option of ``question`` ("" when nothing does)."""
        open_for = max(0.0, time.time() - rec.state_since) if rec.state_since else 0.0
        return holds_back(question, rec.profile, rec.cwd, self._rules(), open_for_s=open_for)

    def tap(self, token: str) -> AnswerResult:
        """Answer as ``token``'s link says, once: checked as :meth:`look` does,
        spent in the store, taken by the intake. Raises
        :class:`AnswerLinkRefused` (or the intake's error) and answers nothing
        when a check fails."""
        from ..answers.intake import AnswerIntake

        view = self.look(token)
        if view.refusal is not None:
            raise view.refusal
        claim = view.claim
        if not self.ledger.spend(claim):  # another tap won the race
            used = self.ledger.spent(claim)
            raise _used(used if used is not None else 0.0)
        intake = self._intake()
        assert isinstance(intake, AnswerIntake)
        session = self._resolve(claim.address)
        if claim.deny:
            return intake.answer(session, deny=True, question_id=claim.question_id,
                                 source=SOURCE)
        option: int | str = int(claim.choice) if claim.choice.isdigit() else claim.choice
        return intake.answer(session, option=option, question_id=claim.question_id,
                             source=SOURCE)


def _used(at: float) -> AnswerLinkRefused:
    when = time.strftime("%H:%M:%S", time.localtime(at)) if at else "before"
    return AnswerLinkRefused(f"this question's links were used already (at {when}): nothing"
                             " more was answered", reason="used")
