"""Taking an answer to the question a waiting agent shows: the one place for its rules.

Answers come from many places: ``agentwrap answer``, the HTTP API (both through
:meth:`Service.answer <agentwrap.service.Service.answer>`), a file dropped in
the session's answer folder and an answer rule of the user's policy (both
taken inside the session's supervisor, which sits below the service). Every one
of them is checked here, against the question the registry holds, stored as
pending in the answers table (with its ``session.answered`` event) and audited,
and the session's supervisor is woken to type it
(:mod:`agentwrap.delivery.answering`). A rule lives in one place, so a file
or a policy can never get an answer through that the CLI would refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..audit import AuditLog
from ..detect.neutralise import live_tokens
from ..detect.profiles import Profile
from ..detect.question import Option, Question, free_text_option
from ..errors import InvalidAnswer, NoOpenQuestion, SessionNotRunning, StaleAnswer
from ..paths import Paths
from ..queue.answers import Answer, AnswerStore
from ..queue.sanitize import check_text, sanitize
from .registry import Registry
from .wake import notify

#: A free-text answer: one line of at most this many characters ...
MAX_ANSWER_CHARS = 1000
#: ... that starts with none of these (an agent reads them as its own syntax
#: at the start of its input: commands, shell mode, mentions, skills, ...).
ANSWER_LEAD_REFUSED = frozenset("/!@#$%&*~`\\:;|<>=+-?.^")


@dataclass(frozen=True)
class AnswerResult:
    """What :meth:`AnswerIntake.answer` stored: the pending answer, the question it
    answers, and whether a supervisor runs to type it."""

    answer: Answer
    question: Question
    supervised: bool


class AnswerIntake:
    """Checks and stores answers for every session of one state dir."""

    def __init__(
        self, paths: Paths, registry: Registry, answers: Callable[[], AnswerStore],
        audit: AuditLog, profile: Callable[[str], Profile],
    ) -> None:
        self.paths = paths
        self.registry = registry
        self._answers = answers  # opened on first use: most commands never need it
        self.audit = audit
        self._profile = profile

    def answer(
        self, session: str, *, option: int | str | None = None, options: list[int] | None = None,
        text: str | None = None, deny: bool = False, question_id: str | None = None,
        source: str = "cli", rule: str | None = None,
    ) -> AnswerResult:
        """Store an answer to the question ``session``'s agent shows, and wake its
        supervisor, which types it with the agent's own keys only while the same
        question is open.

        Exactly one of ``option`` (its number as shown, or its label: exact, then
        a case-insensitive unique prefix), ``options`` (multi-select: not yet),
        ``text`` (free text, where the question and the profile take it) or
        ``deny``. ``question_id``: the question this answers; another one open
        is :class:`StaleAnswer`. ``rule``: the policy rule that chose it (source
        ``policy``), kept in the audit line. Nothing is stored when a check
        fails; an accepted answer leaves an audit line (never the text).
        """
        rec = self.registry.get(session)
        if rec.ended is not None:
            raise SessionNotRunning(f"session {session!r} has ended; nobody asks anything")
        given = [option is not None, options is not None, text is not None, bool(deny)]
        if sum(given) != 1:
            raise InvalidAnswer("give exactly one of: an option, options, text, deny",
                                hint="e.g. `agentwrap answer NAME --option 1`")
        if rec.state != "waiting_input" or rec.question is None:
            why = (f"is {rec.state} ({rec.state_reason})" if rec.state != "waiting_input"
                   else f"waits ({rec.state_reason}), but no question was read off its screen")
            raise NoOpenQuestion(f"session {session!r} {why}: there is no open question to answer",
                                 hint="answer in the terminal (`agentwrap attach NAME`) if it"
                                 " waits for something agentwrap cannot read" if rec.question
                                 is None and rec.state == "waiting_input" else None)
        question = Question.from_json(rec.question)
        if question_id is not None and question_id != question.id:
            asked = question.questions[0].question if question.questions else question.title
            raise StaleAnswer(
                f"question {question_id} is not open: the agent asks something else now"
                f" (question {question.id}: {asked!r})")
        profile = self._profile(rec.profile)
        dialog = next((d for d in profile.dialogs if d.name == question.dialog), None)
        if len(question.questions) != 1:
            raise InvalidAnswer("questions in several parts are answered in the terminal for now",
                                hint=f"`agentwrap attach {session}`")
        item = question.questions[0]
        payload: dict[str, Any]
        if options is not None or (item.multiSelect and option is not None):
            raise InvalidAnswer("multi-select answers come next; answer this one in the terminal",
                                hint=f"`agentwrap attach {session}`")
        if deny:
            payload = {"how": "deny"}
        elif option is not None:
            chosen, position = pick(item.options, option)
            payload = {"how": "option", "option": position, "number": chosen.number,
                       "label": chosen.label}
            if chosen.number is None:
                if not chosen.key or len(chosen.key) != 1:
                    raise InvalidAnswer(f"option {chosen.label!r} has no number or key to type")
                payload["key"] = chosen.key
        else:
            assert text is not None
            text = answer_text(text, profile)
            free = free_text_option(item)
            if not question.free_text_allowed or free is None:
                raise InvalidAnswer("this question takes no free text: pick one of its options",
                                    hint="`agentwrap state NAME` lists them")
            if dialog is None or dialog.free_text != "option" or free.number is None:
                raise InvalidAnswer(
                    f"typing free text into {profile.name}'s {question.dialog!r} dialog is not"
                    " supported yet: answer it in the terminal, or pick an option",
                    hint=f"`agentwrap attach {session}`")
            payload = {"how": "text", "text": text, "option": item.options.index(free) + 1,
                       "number": free.number, "label": free.label}
        stored = self._answers().request(session, question.id, payload, source, rule=rule)
        extra = {"rule": rule} if rule is not None else {}
        self.audit.write(event="answer_requested", session=session, answer=stored.id,
                         question=question.id, how=payload["how"], source=source,
                         bytes=len((text or "").encode("utf-8")), **extra)
        notify(self.paths, session)
        return AnswerResult(stored, question, supervised=rec.liveness != "stale")


def pick(options: tuple[Option, ...], wanted: int | str) -> tuple[Option, int]:
    """The option a person named, and its 1-based position: a number as shown
    (for options shown without numbers, their position), else a label: exact,
    then case-insensitive, then a case-insensitive unique prefix."""
    shown = ", ".join(f"{o.number or i}. {o.label}" for i, o in enumerate(options, start=1))
    if isinstance(wanted, str) and wanted.strip().isdigit():
        wanted = int(wanted.strip())
    if isinstance(wanted, int) and not isinstance(wanted, bool):
        for i, o in enumerate(options, start=1):
            if (o.number if o.number is not None else i) == wanted:
                return o, i
        raise InvalidAnswer(f"the question has no option {wanted} (options: {shown})")
    if not isinstance(wanted, str) or not wanted.strip():
        raise InvalidAnswer(f"an option is a number or a label, not {wanted!r}")
    check_text(wanted)
    name = wanted.strip()
    for exact in ([(o, i) for i, o in enumerate(options, start=1) if o.label == name],
                  [(o, i) for i, o in enumerate(options, start=1)
                   if o.label.casefold() == name.casefold()]):
        if len(exact) == 1:
            return exact[0]
    prefix = [(o, i) for i, o in enumerate(options, start=1)
              if o.label.casefold().startswith(name.casefold())]
    if len(prefix) == 1:
        return prefix[0]
    if prefix:
        raise InvalidAnswer(f"{name!r} could be any of: {', '.join(o.label for o, _ in prefix)}",
                            hint="type more of the label, or its number")
    raise InvalidAnswer(f"the question has no option {name!r} (options: {shown})")


def answer_text(text: str, profile: Profile) -> str:
    """Free text fit to type into a dialog on its own: one plain line that
    the agent cannot read as its own syntax. Refused otherwise, never changed."""
    check_text(text)
    if sanitize(text).text != text or "\n" in text or "\t" in text:
        raise InvalidAnswer("answer text holds control characters, escape sequences or"
                            " line breaks; it must be one line of plain text")
    text = text.strip()
    if not text:
        raise InvalidAnswer("answer text is empty")
    if len(text) > MAX_ANSWER_CHARS:
        raise InvalidAnswer(f"answer text is {len(text)} characters; at most"
                            f" {MAX_ANSWER_CHARS}")
    if text[0] in ANSWER_LEAD_REFUSED:
        raise InvalidAnswer(f"answer text must not start with {text[0]!r}: the agent could"
                            " read it as its own syntax (a command, shell mode, a mention)",
                            hint="start with a word")
    live = live_tokens(text, profile.syntax)
    if live:
        raise InvalidAnswer(f"answer text holds {live[0].text!r}, which {profile.name} reads"
                            f" as a {live[0].rule.name}", hint="rephrase without it")
    return text
