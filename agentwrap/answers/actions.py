"""What an answer does, as typed values: the shapes the intake builds and the keys type.

The intake (:mod:`agentwrap.answers.intake`) checks an answer against the
question open and turns it into one of these; the store keeps it as JSON (the
column ``answers.answer`` and the ``session.answered`` events); the supervisor
reads it back and types it (:mod:`agentwrap.answers.keys`). One class per shape,
so a reader matches on the type instead of fishing keys out of a dict, and a
shape added later cannot be half-read somewhere.

:meth:`to_json` gives exactly the JSON stored since the answers table exists
(``{"how": "option", ...}``; a rule's answer given through the agent's hook,
:class:`HookAnswer`, has no ``how``), so rows written before, and what ``answer
--json`` and the HTTP API print, do not change. A stored answer of a shape this
agentwrap does not know (written by a newer one) reads as :class:`UnreadAnswer`:
kept as stored, never typed.

:class:`AnswerStatus` is where an answer stands; str-valued, so the stored
values and the JSON are the plain words.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar


class AnswerStatus(enum.StrEnum):
    """Where an answer stands: stored and waiting for the supervisor, or ended."""

    PENDING = "pending"
    APPLIED = "applied"  # typed, and the dialog closed
    STALE = "stale"  # the agent asked something else by then: nothing was typed
    FAILED = "failed"  # typed in part or not at all; the detail says why

    @property
    def ended(self) -> bool:
        return self is not AnswerStatus.PENDING


@dataclass(frozen=True)
class OptionAnswer:
    """One option of a single-choice question: ``option`` is its position
    (1-based) among the options read, ``number`` the number it shows (None for a
    y/n prompt, where ``key`` is the letter typed instead)."""

    how: ClassVar[str] = "option"
    option: int
    number: int | None
    label: str
    key: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"how": self.how, "option": self.option, "number": self.number,
                               "label": self.label}
        if self.key is not None:
            out["key"] = self.key
        return out


@dataclass(frozen=True)
class OptionsAnswer:
    """The options of a multi-select question that end up ticked (by their numbers)."""

    how: ClassVar[str] = "options"
    numbers: tuple[int, ...]
    labels: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"how": self.how, "numbers": list(self.numbers), "labels": list(self.labels)}


@dataclass(frozen=True)
class TabAnswer:
    """The answer to one tab of a dialog of several questions: option numbers or
    labels as given (matched to the tab's options once it is on screen)."""

    tab: int  # 0-based
    header: str
    values: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"tab": self.tab, "header": self.header, "values": list(self.values)}


@dataclass(frozen=True)
class TabsAnswer:
    """Every question of a dialog shown as tabs (``tabs``: their headers as asked)."""

    how: ClassVar[str] = "answers"
    tabs: tuple[str, ...]
    answers: tuple[TabAnswer, ...]

    def to_json(self) -> dict[str, Any]:
        return {"how": self.how, "tabs": list(self.tabs),
                "answers": [a.to_json() for a in self.answers]}


@dataclass(frozen=True)
class TextAnswer:
    """Free text, typed after picking the option that asks for it (``option``:
    its position, ``number``: the number it shows)."""

    how: ClassVar[str] = "text"
    text: str
    option: int
    number: int | None
    label: str

    def to_json(self) -> dict[str, Any]:
        return {"how": self.how, "text": self.text, "option": self.option,
                "number": self.number, "label": self.label}


@dataclass(frozen=True)
class DenyAnswer:
    """The dialog's own way to refuse (its ``deny_keys``)."""

    how: ClassVar[str] = "deny"

    def to_json(self) -> dict[str, Any]:
        return {"how": self.how}


@dataclass(frozen=True)
class HookAnswer:
    """A rule's answer the agent's hook gave (``allow`` or ``deny``): nothing was
    typed, it is only kept like every other answer. Stored without ``how``."""

    how: ClassVar[str] = "hook"
    decision: str

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "via": "hook"}


@dataclass(frozen=True)
class UnreadAnswer:
    """A stored answer of a shape this agentwrap does not know: kept as stored."""

    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def how(self) -> str:
        return str(self.data.get("how", ""))

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


AnswerAction = (OptionAnswer | OptionsAnswer | TabsAnswer | TextAnswer | DenyAnswer | HookAnswer
                | UnreadAnswer)


def from_json(data: Mapping[str, Any]) -> AnswerAction:
    """The action a stored answer describes (the inverse of ``to_json``)."""
    try:
        how = data.get("how")
        if how == "option":
            key = data.get("key")
            return OptionAnswer(int(data["option"]), _number(data.get("number")),
                                str(data.get("label", "")), None if key is None else str(key))
        if how == "options":
            return OptionsAnswer(tuple(int(n) for n in data["numbers"]),
                                 tuple(str(x) for x in data.get("labels", ())))
        if how == "answers":
            return TabsAnswer(tuple(str(t) for t in data["tabs"]), tuple(
                TabAnswer(int(a["tab"]), str(a.get("header", "")),
                          tuple(str(v) for v in a["values"])) for a in data["answers"]))
        if how == "text":
            return TextAnswer(str(data["text"]), int(data["option"]),
                              _number(data.get("number")), str(data.get("label", "")))
        if how == "deny":
            return DenyAnswer()
        if how is None and data.get("via") == "hook":
            return HookAnswer(str(data.get("decision", "")))
    except (KeyError, TypeError, ValueError):
        pass
    return UnreadAnswer(dict(data))


def _number(value: Any) -> int | None:
    return None if value is None else int(value)


__all__ = [
    "AnswerAction", "AnswerStatus", "DenyAnswer", "HookAnswer", "OptionAnswer", "OptionsAnswer",
    "TabAnswer", "TabsAnswer", "TextAnswer", "UnreadAnswer", "from_json",
]
