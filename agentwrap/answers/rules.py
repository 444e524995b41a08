"""The answer policy: which questions are answered without a person, and how.

Opt-in and deterministic: without ``[[answer_rules]]`` in the user's own config
nothing is ever answered automatically (a project's ``.agentwrap.toml`` may not
hold rules: a cloned repository must not approve its own commands), and the
same question, agent and rules always give the same :class:`Decision`.
:func:`decide` is a pure function; the supervisor acts on its decision in one
place (:mod:`agentwrap.answers.auto`): through the same checks as
``agentwrap answer``, audited with the rule, announced.

A rule matches a question when each of its matchers does (all default to
``*``): ``agent`` the session's profile name, ``kind`` the question's kind,
``tool`` its tool, ``command`` its command. A matcher is a glob
(``fnmatch``, case-sensitive) or ``re:`` and a regular expression
(``re.search``). ``tool = "*"`` and ``command = "*"`` also match a question
without one; any other matcher needs one. ``after_s`` holds a rule back until
the question has been open that long: the only way anything is answered on a
timeout.

A command is matched per sub-command (split at ``;``, ``&&``, ``||``, ``|``,
``&`` and newlines, quotes respected): a rule that picks an option matches
only when *every* sub-command does (``npm test*`` does not approve ``npm test;
curl evil``), and a command with a substitution (``$(...)``, backticks,
``<(...)``) or an open quote matches no specific pattern at all. A rule that
says ``ask`` or ``deny`` matches when the whole command or *any* sub-command does.

Order of precedence:

1. an ``ask`` rule that matches (a deny-list of the user's own): nobody but the
   person answers; it beats every other rule, wherever it stands;
2. otherwise the *first* matching rule that answers (``option`` or ``deny``);
3. an ``option`` answer is then vetoed by the built-in deny-list
   (:mod:`agentwrap.answers.denylist`: ``rm -rf /``, ``mkfs``, ``curl | sh``,
   force-push to main, deleting or moving anything outside the session's project
   (``where``), overwriting a file that exists there, ``git reset --hard`` over
   uncommitted work, ...), by a command that may be cut off on screen, and by
   one not read with certainty (:func:`agentwrap.answers.certainty.doubt`:
   wrapped or partly hidden in its dialog's box, the box not found, the agent's
   own request for the dialog saying something else, or a text that does not
   look like the dialog's kind of request, e.g. a tip or a sentence). The
   deny-list judges every text the dialog showed for the call
   (:func:`~agentwrap.answers.certainty.candidates`), not only the one read as
   the command. A veto is a decision too (``answer`` None): it is logged and the
   person told.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ..config import AnswerRule, load_config
from ..detect.question import Question
from ..errors import AgentwrapError
from ..paths import Paths
from .certainty import candidates, doubt
from .denylist import Where, destructive, incomplete

BUILTIN = "built-in deny-list"
log = logging.getLogger("agentwrap.policy")


@dataclass(frozen=True)
class Decision:
    """What the policy says about one question."""

    rule: str  # the rule that decided (its name), or BUILTIN
    answer: Mapping[str, Any] | None  # {"option": N|label} | {"deny": True}; None: the person
    reason: str  # one line for the audit log and the person
    vetoed: str = ""  # the rule the built-in deny-list overruled

    @property
    def holds(self) -> bool:
        """No automatic answer: the question is left to the person."""
        return self.answer is None


def decide(
    question: Question, agent: str, rules: Sequence[AnswerRule], *, open_for_s: float = 0.0,
    where: Where | None = None,
) -> Decision | None:
    """The decision for ``question`` shown by a session of profile ``agent``,
    open for ``open_for_s``; None when no rule matches (the person answers).
    ``where``: the session's project, for the deny-list (without it, every
    path a command deletes or moves counts as outside the project)."""
    matching = [r for r in rules if _matches(r, question, agent, open_for_s)]
    if not matching:
        return None
    ask = next((r for r in matching if r.ask), None)
    if ask is not None:
        return Decision(ask.name, None, f"rule {ask.name!r} leaves it to you")
    rule = next((r for r in matching if r.deny or r.approves), None)
    if rule is None:  # pragma: no cover - every rule answers or asks (config checks)
        return None
    if rule.deny:
        return Decision(rule.name, {"deny": True}, f"rule {rule.name!r}: deny")
    unsure = doubt(question)  # a guess at the command: the rule would judge the guess
    if unsure:
        return Decision(BUILTIN, None, f"not approved: {unsure} (rule {rule.name!r} would have)",
                        vetoed=rule.name)
    for text in candidates(question):  # each text shown for the call, not only the one chosen
        why = destructive(text, where=where)
        if why is not None:
            return Decision(BUILTIN, None, f"not approved: {why} ({BUILTIN}; rule {rule.name!r}"
                            " would have)", vetoed=rule.name)
    if question.command and incomplete(question.command):
        return Decision(BUILTIN, None, "not approved: the command shown may be cut off"
                        f" (rule {rule.name!r} would have)", vetoed=rule.name)
    return Decision(rule.name, {"option": rule.option},
                    f"rule {rule.name!r}: option {rule.option!r}")


def match(pattern: str, value: str) -> bool:
    """A glob (whole value) or ``re:REGEX`` (searched)."""
    if pattern.startswith("re:"):
        return re.search(pattern[3:], value) is not None
    return fnmatchcase(value, pattern)


def _matches(rule: AnswerRule, q: Question, agent: str, open_for_s: float) -> bool:
    if rule.after_s > open_for_s:
        return False
    if not (match(rule.agent, agent) and match(rule.kind, q.kind)):
        return False
    if rule.tool != "*" and (q.tool is None or not match(rule.tool, q.tool)):
        return False
    if rule.command == "*":
        return True
    if not q.command:
        return False
    parts = segments(q.command)
    if rule.approves:  # every part, and only when every part could be read
        return parts is not None and all(match(rule.command, p) for p in parts)
    return match(rule.command, q.command.strip()) or any(
        match(rule.command, p) for p in (parts or []))


def segments(command: str) -> list[str] | None:
    """The sub-commands of ``command`` as written (quotes respected), or None when
    it holds a substitution or an open quote: then no glob can say what it runs."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    text = command.replace("\\\n", " ")
    while i < len(text):
        c = text[i]
        two = text[i:i + 2]
        if c == "\\" and quote != "'":
            current.append(text[i:i + 2])
            i += 2
            continue
        if quote:
            if c == quote:
                quote = ""
            elif quote == '"' and (c == "`" or two == "$("):
                return None
            current.append(c)
            i += 1
            continue
        if c in "'\"":
            quote = c
        elif c == "`" or two in ("$(", "<(", ">("):
            return None
        elif (two in ("&&", "||", "|&") or c in ";|&\n") \
                and not (c == "&" and (text[i - 1:i] in (">", "<") or two == "&>")):
            parts.append("".join(current))  # (an & in 2>&1 or &> is a redirection)
            current = []
            i += 2 if two in ("&&", "||", "|&") else 1
            continue
        current.append(c)
        i += 1
    if quote:
        return None
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


class LiveRules:
    """The person's answer rules for one profile as they are now: the config file is
    read again when it changed (a stat per look), so a rule added while a session
    runs answers its next question (on the screen: a hook registered when there
    were no rules runs in the background, where the agent ignores its answer). A
    config that no longer loads gives no rules (fail closed: the person answers)
    until it loads again. ``extra``: rules that come with the launch (opted in)."""

    def __init__(self, paths: Paths, profile: str, cwd: Path, first: Sequence[AnswerRule],
                 extra: Sequence[AnswerRule] = ()) -> None:
        self.paths, self.profile, self.cwd = paths, profile, cwd
        self.extra = tuple(extra)
        self._stamp = self._stat()
        self._rules = tuple(first)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.paths.config_file)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def __call__(self) -> tuple[AnswerRule, ...]:
        stamp = self._stat()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._rules = load_config(self.paths, self.cwd).for_profile(
                    self.profile).answer_rules
            except (AgentwrapError, OSError) as exc:
                log.warning("answer rules not read again, none apply until they load: %s", exc)
                self._rules = ()
            else:
                log.info("answer rules read again: %d for %s", len(self._rules), self.profile)
        return (*self._rules, *self.extra)
