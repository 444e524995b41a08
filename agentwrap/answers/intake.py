"""Taking an answer to the question a waiting agent shows: the one place for its rules.

Answers come from many places: ``agentwrap answer``, the HTTP API (both through
:meth:`Service.answer <agentwrap.service.Service.answer>`), a file dropped in
the session's answer folder and an answer rule of the user's policy (both
taken inside the session's supervisor, which sits below the service). Every one
of them is checked here, against the question the registry holds, stored as
pending in the answers table (with its ``session.answered`` event) and audited,
and the session's supervisor is woken to type it
(:mod:`agentwrap.answers.keys`). A rule lives in one place, so a file
or a policy can never get an answer through that the CLI would refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..audit import AuditLog
from ..datagram import wake
from ..detect.neutralise import live_tokens
from ..detect.profiles import Dialog, Profile
from ..detect.question import Item, Option, Question, free_text_option
from ..detect.question import pick as pick_option
from ..detect.states import State
from ..errors import InvalidAnswer, NoOpenQuestion, SessionNotRunning, StaleAnswer
from ..paths import Paths
from ..queue.sanitize import check_text, sanitize
from .actions import (
    AnswerAction,
    DenyAnswer,
    OptionAnswer,
    OptionsAnswer,
    TabAnswer,
    TabsAnswer,
    TextAnswer,
)
from .store import Answer, AnswerStore

#: A free-text answer: one line of at most this many characters ...
MAX_ANSWER_CHARS = 1000
#: ... that starts with none of these (an agent reads them as its own syntax
#: at the start of its input: commands, shell mode, mentions, skills, ...).
ANSWER_LEAD_REFUSED = frozenset("/!@#$%&*~`\\:;|<>=+-?.^")


class _Record(Protocol):
    """The fields of a session's record the intake checks an answer against."""

    @property
    def ended(self) -> float | None: ...
    @property
    def state(self) -> State: ...
    @property
    def state_reason(self) -> str: ...
    @property
    def question(self) -> dict[str, Any] | None: ...
    @property
    def profile(self) -> str: ...
    @property
    def liveness(self) -> str: ...


class OpenQuestions(Protocol):
    """What the intake reads of the sessions registry
    (:class:`agentwrap.sessions.registry.Registry`, a layer above): a session's
    record, with the question its supervisor last published; and whether
    the session runs here (its supervisor's wake-up socket is this host's)."""

    def get(self, name: str) -> _Record: ...
    def local(self, address: str) -> str | None: ...


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
        self, paths: Paths, registry: OpenQuestions, answers: Callable[[], AnswerStore],
        audit: AuditLog, profile: Callable[[str], Profile],
    ) -> None:
        self.paths = paths
        self.registry = registry
        self._answers = answers  # opened on first use: most commands never need it
        self.audit = audit
        self._profile = profile

    def answer(
        self, session: str, *, option: int | str | None = None,
        options: Sequence[int | str] | None = None, text: str | None = None,
        deny: bool = False, question_id: str | None = None, source: str = "cli",
        rule: str | None = None, answers: Mapping[str, Any] | None = None,
    ) -> AnswerResult:
        """Store an answer to the question ``session``'s agent shows, and wake its
        supervisor, which types it with the agent's own keys only while the same
        question is open.

        Exactly one of ``option`` (its number as shown, or its label: exact, then
        a case-insensitive unique prefix), ``options`` (several of a multi-select
        question's options, each a number or a label: exactly these end up ticked,
        then the dialog moves on), ``answers`` (every question of a dialog of
        several, shown as tabs: tab header or 1-based number -> an option, or a list
        of options for a multi-select tab; the review's submit is pressed at the
        end), ``text`` (free text, where the question and the profile take it) or
        ``deny``. The options of the tabs not on screen are only known once the
        supervisor has looked at each tab: a label none of them has fails there,
        before anything is ticked or picked. ``question_id``: the question this answers; another one open
        is :class:`StaleAnswer`. ``rule``: the policy rule that chose it (source
        ``policy``), kept in the audit line. Nothing is stored when a check
        fails; an accepted answer leaves an audit line (never the text).
        """
        rec = self.registry.get(session)
        if rec.ended is not None:
            raise SessionNotRunning(f"session {session!r} has ended; nobody asks anything")
        given = [option is not None, options is not None, text is not None, bool(deny),
                 answers is not None]
        if sum(given) != 1:
            raise InvalidAnswer("give exactly one of: an option, options, answers, text, deny",
                                hint="e.g. `agentwrap answer NAME --option 1`")
        if rec.state is not State.WAITING_INPUT or rec.question is None:
            why = (f"is {rec.state} ({rec.state_reason})" if rec.state is not State.WAITING_INPUT
                   else f"waits ({rec.state_reason}), but no question was read off its screen")
            raise NoOpenQuestion(f"session {session!r} {why}: there is no open question to answer",
                                 hint="answer in the terminal (`agentwrap attach NAME`) if it"
                                 " waits for something agentwrap cannot read" if rec.question
                                 is None and rec.state is State.WAITING_INPUT else None)
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
        payload: AnswerAction
        if answers is not None and not question.tabs:  # one question: its own answer
            (option, options), answers = self._single(question, answers), None
        if item.multiSelect and option is not None:
            options, option = [option], None
        if options is not None:
            payload = multi_select(question, list(options), dialog, session)
        elif answers is not None:
            payload = tabbed(question, answers, dialog, session)
        elif deny:
            payload = DenyAnswer()
        elif option is not None:
            chosen, position = pick(item.options, option)
            key = None
            if chosen.number is None:
                if not chosen.key or len(chosen.key) != 1:
                    raise InvalidAnswer(f"option {chosen.label!r} has no number or key to type")
                key = chosen.key
            payload = OptionAnswer(position, chosen.number, chosen.label, key)
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
            payload = TextAnswer(text, item.options.index(free) + 1, free.number, free.label)
        stored = self._answers().request(session, question.id, payload, source, rule=rule)
        extra = {"rule": rule} if rule is not None else {}
        self.audit.write(event="answer_requested", session=session, answer=stored.id,
                         question=question.id, how=payload.how, source=source,
                         bytes=len((text or "").encode("utf-8")), **extra)
        here = self.registry.local(session)  # HOST/NAME: another host's wakes on NOTIFY
        if here is not None:
            wake(self.paths, here)
        return AnswerResult(stored, question, supervised=rec.liveness != "stale")

    @staticmethod
    def _single(question: Question, answers: Mapping[str, Any]) -> tuple[Any, Any]:
        """``answers`` for a question shown alone: (option, options) of its one answer."""
        item = question.questions[0]
        if len(answers) != 1:
            raise InvalidAnswer(f"the agent asks one question; answers names {len(answers)}",
                                hint="answer it with an option (--option N)")
        ((key, value),) = answers.items()
        if str(key).strip() not in ("1", item.header) and str(key).strip().casefold() not in (
                item.header.casefold(), item.question.casefold()):
            raise InvalidAnswer(f"the question open is {item.header or item.question!r},"
                                f" not {key!r}")
        if isinstance(value, list):
            return (value[0], None) if len(value) == 1 and not item.multiSelect else (None, value)
        return value, None


def _dialog_keys(dialog: Dialog | None, session: str, *, tabs: bool) -> Dialog:
    if dialog is None or not dialog.toggle_key or (tabs and not (
            dialog.next_key and dialog.prev_key and dialog.submit_option)):
        raise InvalidAnswer("agentwrap does not know this dialog's keys for multi-select or"
                            " several questions: answer it in the terminal",
                            hint=f"`agentwrap attach {session}`")
    return dialog


def multi_select(
    question: Question, wanted: list[int | str], dialog: Dialog | None, session: str,
) -> OptionsAnswer:
    """The payload that ticks exactly ``wanted`` on the multi-select question open."""
    item = question.questions[0]
    if not item.multiSelect:
        raise InvalidAnswer("several options answer only a multi-select question; this one"
                            " takes one (--option)")
    _dialog_keys(dialog, session, tabs=True)
    if not wanted:
        raise InvalidAnswer("no options given", hint="e.g. --options 1,3")
    chosen = [pick(item.options, w)[0] for w in wanted]
    for o in chosen:
        if o.checked is None or free_text_option(Item(item.question, options=(o,))):
            raise InvalidAnswer(f"{o.label!r} is not an option to tick here")
    numbers = sorted({o.number for o in chosen if o.number is not None})
    return OptionsAnswer(tuple(numbers),
                         tuple(o.label for o in item.options if o.number in numbers))


def tabbed(
    question: Question, answers: Mapping[str, Any], dialog: Dialog | None, session: str,
) -> TabsAnswer:
    """The payload that answers every tab of a dialog of several questions: each
    tab's answer kept as given (its options are read once its tab is on screen)."""
    _dialog_keys(dialog, session, tabs=True)
    tabs = question.tabs
    found: dict[int, list[str]] = {}
    for key, value in answers.items():
        name = _label_text(str(key)).strip()
        if name.isdigit() and 1 <= int(name) <= len(tabs):
            index = int(name) - 1
        else:
            same = [i for i, t in enumerate(tabs) if t.casefold() == name.casefold()]
            if len(same) != 1:
                raise InvalidAnswer(f"the dialog has no question {name!r} (its questions:"
                                    f" {', '.join(f'{i}. {t}' for i, t in enumerate(tabs, 1))})",
                                    hint="name a question by its header or its number")
            index = same[0]
        if index in found:
            raise InvalidAnswer(f"question {tabs[index]!r} is answered twice")
        values = value if isinstance(value, list) else [value]
        if not values or any(isinstance(v, bool) or not isinstance(v, (int, str))
                             or not str(v).strip() for v in values):
            raise InvalidAnswer(f"the answer to {tabs[index]!r} is an option's number or"
                                f" label, or a list of them, not {value!r}")
        for v in values:
            _label_text(str(v))
        found[index] = [str(v).strip() for v in values]
    missing = [t for i, t in enumerate(tabs) if i not in found]
    if missing:
        raise InvalidAnswer(f"every question needs an answer; missing: {', '.join(missing)}",
                            hint="e.g. --answer 'Database=SQLite' --answer 'Features=1,3'")
    return TabsAnswer(tuple(tabs), tuple(TabAnswer(i, tabs[i], tuple(found[i]))
                                         for i in sorted(found)))


def pick(options: tuple[Option, ...], wanted: int | str) -> tuple[Option, int]:
    """:func:`agentwrap.detect.question.pick`, after the label is checked as text."""
    if isinstance(wanted, str) and not wanted.strip().isdigit():
        _label_text(wanted)
    return pick_option(options, wanted)


def _label_text(text: str) -> str:
    """An option's label or a question's header as a person names it: plain text
    on one line (it is only compared, never typed, but it is shown and logged)."""
    check_text(text)
    if sanitize(text).text != text or "\n" in text or "\r" in text or len(text) > 200:
        raise InvalidAnswer("an option or question is named with at most 200 characters of"
                            " plain text on one line")
    return text


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
