"""Acting on the answer policy: the one place where a rule's decision has effects.

:func:`agentwrap.answers.rules.decide` says, purely, what the user's
``[[answer_rules]]`` make of a question. The supervisor calls
:meth:`AutoAnswer.update` each time it has published what it sees (so the
registry holds the question the answer is checked against), and here, once
per question:

* an answer is taken through :class:`~agentwrap.answers.intake.AnswerIntake`
  (the rules of ``agentwrap answer``; source ``policy``), audited
  (``policy_answered`` with the rule) and announced to the person like a question
  (tmux status line, desktop); its ``session.answered`` events say ``by: policy``;
* a question the rules leave to the person, or one the built-in deny-list
  vetoed, is audited (``policy_held``) and the reason goes with the telling;
* an answer the intake refuses (a label the question does not have) is audited
  (``policy_failed``) and the person is told as if there were no rule.

Nothing is ever answered because time passed, unless a rule has ``after_s``,
or ``[answers] on_timeout = "deny"`` with ``timeout_s`` (per agent in
``[profiles.NAME.answers]``, per session ``run --on-timeout`` / ``--answer-timeout``,
which the supervisor puts over the config's): then a question nobody answered within
``timeout_s`` is denied, once, through the same intake as any answer (source
``policy``, rule :data:`ON_TIMEOUT`, audited ``policy_answered``), unless an
``ask`` rule of the person's matches it (nobody but the person answers those).
A deny is never vetoed by the deny-list: it runs nothing.
Such a rule must fire when its time comes, not when the supervisor next happens
to look (a settled screen is looked at only every ``idle_tick_s``, 10 s): so
:meth:`AutoAnswer.due` tells the supervisor when the next ``after_s`` of the
open question falls due, and it looks then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..audit import AuditLog
from ..config import AnswerRule, AnswersConfig
from ..detect.question import Question
from ..errors import AgentwrapError
from .actions import AnswerAction, AnswerStatus, OptionAnswer, OptionsAnswer
from .denylist import Where
from .intake import AnswerIntake
from .rules import Decision, decide
from .store import AnswerStore
from .telling import summary

log = logging.getLogger("agentwrap.policy")

ON_TIMEOUT = "on_timeout"  # the rule an answer on timeout is recorded with
NO_TIMEOUT = AnswersConfig()  # questions stay open until someone answers


class AutoAnswer:
    """The policy of one session."""

    def __init__(
        self, session: str, agent: str,
        rules: Sequence[AnswerRule] | Callable[[], Sequence[AnswerRule]], intake: AnswerIntake,
        answers: AnswerStore, audit: AuditLog, *, announce: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic, project: str = "",
        on_timeout: AnswersConfig = NO_TIMEOUT,
    ) -> None:
        self.session = session
        # the session's folder: the deny-list holds what deletes or moves outside it
        self.where = Where.of(project) if project else None
        self.agent = agent
        # the rules as they are now (a callable: read again when the config changes)
        self._rules = rules if callable(rules) else (lambda fixed=tuple(rules): fixed)
        self.intake = intake
        self.answers = answers
        self.audit = audit
        self.announce = announce
        self.clock = clock
        self._open: str | None = None  # the question decided about
        self._opened_at = 0.0
        self._looked_at = 0.0  # when the rules were last read for the open question
        self._done = False
        self._answer_id: str | None = None
        self.note = ""  # why the open question was not answered automatically
        self.on_timeout = on_timeout
        self._timeout_done = False  # on_timeout was applied (or declined) for the open question
        self.decisions: list[Decision] = []  # for tests and the log

    def update(self, question: Question | None) -> bool:
        """The question published now (None: none open). True while the policy's
        own answer to it is pending or applied: nobody needs to be told it waits."""
        if question is None or question.id != self._open:
            self._open = question.id if question else None
            self._opened_at = self.clock()
            self._done, self._answer_id, self.note = False, None, ""
            self._timeout_done = False
        if question is None:
            return False
        if self._answer_id is not None:
            try:
                status = self.answers.get(self._answer_id).status
            except (KeyError, AgentwrapError):
                return False
            return status in (AnswerStatus.PENDING, AnswerStatus.APPLIED)
        rules = self.rules
        if rules and not self._done:
            self._looked_at = self.clock()
            decision = decide(question, self.agent, rules,
                              open_for_s=self._looked_at - self._opened_at, where=self.where)
            if decision is None:
                self._done = not _timed(rules)  # a rule with after_s may match later
            else:
                self._done = True
                self.decisions.append(decision)
                if not decision.holds:
                    return self._answer(question, decision)
                self.note = decision.reason
                log.info("question %s left to the person: %s", question.id, decision.reason)
                self.audit.write(event="policy_held", session=self.session,
                                 question=question.id, rule=decision.rule,
                                 vetoed=decision.vetoed, reason=decision.reason,
                                 command=question.command or "")
        return self._timed_out(question, rules)

    def _timed_out(self, q: Question, rules: Sequence[AnswerRule]) -> bool:
        """``[answers] on_timeout = "deny"``: the question has been open ``timeout_s``."""
        cfg = self.on_timeout
        if cfg.on_timeout != "deny" or cfg.timeout_s <= 0 or self._timeout_done:
            return False
        self._looked_at = now = self.clock()
        if now - self._opened_at < cfg.timeout_s:
            return False
        self._timeout_done = True
        asked = decide(q, self.agent, [r for r in rules if r.ask], open_for_s=float("inf"),
                       where=self.where)
        if asked is not None:  # the person's own deny-list: nobody else answers it
            log.info("question %s not denied on timeout: %s", q.id, asked.reason)
            self.audit.write(event="policy_held", session=self.session, question=q.id,
                             rule=ON_TIMEOUT, vetoed="", reason=asked.reason,
                             command=q.command or "")
            return False
        decision = Decision(ON_TIMEOUT, {"deny": True},
                            f"nobody answered in {cfg.timeout_s:g} s: deny ({ON_TIMEOUT})")
        self.decisions.append(decision)
        return self._answer(q, decision)

    @property
    def rules(self) -> tuple[AnswerRule, ...]:
        """The rules as they are now."""
        return tuple(self._rules())

    def due(self) -> float | None:
        """When (on :attr:`clock`) a rule's ``after_s`` next falls due for the open
        question, if the rules are still to be read again then; None: nothing to wait for."""
        if self._open is None or self._answer_id is not None:
            return None
        times = [] if self._done else [self._opened_at + r.after_s for r in self.rules
                                       if r.after_s > 0]
        cfg = self.on_timeout
        if cfg.on_timeout == "deny" and cfg.timeout_s > 0 and not self._timeout_done:
            times.append(self._opened_at + cfg.timeout_s)
        later = [t for t in times if t > self._looked_at]
        return min(later) if later else None

    def _answer(self, q: Question, decision: Decision) -> bool:
        assert decision.answer is not None
        args: dict[str, Any] = dict(decision.answer)
        try:
            result = self.intake.answer(self.session, question_id=q.id, source="policy",
                                        rule=decision.rule, **args)
        except AgentwrapError as exc:
            self.note = f"rule {decision.rule!r} could not answer: {exc.message}"
            log.warning("question %s: %s", q.id, self.note)
            self.audit.write(event="policy_failed", session=self.session, question=q.id,
                             rule=decision.rule, error=type(exc).__name__, reason=exc.message)
            return False
        self._answer_id = result.answer.id
        how = _shown(result.answer.answer)
        log.info("question %s answered by rule %r: %s", q.id, decision.rule, how)
        self.audit.write(event="policy_answered", session=self.session, question=q.id,
                         answer=result.answer.id, rule=decision.rule, how=how,
                         command=q.command or "")
        if self.announce is not None:
            try:
                self.announce(f"agentwrap: {self.session}: answered {how} by rule"
                              f" {decision.rule!r}: {summary(q)}")
            except (OSError, AgentwrapError) as exc:  # a courtesy, never a failure
                log.debug("announcement failed: %s", exc)
        return True


def _timed(rules: Sequence[AnswerRule]) -> bool:
    return any(r.after_s > 0 for r in rules)


def _shown(answer: AnswerAction) -> str:
    """A rule's answer in the audit line and the announcement: "option 2 (Yes)"."""
    if isinstance(answer, OptionAnswer):
        return f"option {answer.number or answer.option} ({answer.label})"
    if isinstance(answer, OptionsAnswer):  # a rule's option on a multi-select question
        return f"options {list(answer.numbers)} ({', '.join(answer.labels)})"
    return answer.how
