"""Keep message text from triggering the agent's own syntax.

Why this exists: agentwrap types untrusted text (webhooks, CI jobs, other
agents) into an agent's prompt, and the agent parses that text *before* the
model sees it. Observed on the real CLIs: Claude Code turns ``@path`` on any
line into a file read attached to the model request (``@/etc/passwd`` too,
outside the project, without asking); Gemini CLI does the same for an ``@``
anywhere, even inside a word, and opens a permission dialog for files outside
the workspace; Codex turns ``$name`` anywhere into the instructions of the
skill of that name. So a message could make a supervised agent send a local
file to the model provider, or pull in instructions nobody chose.

What an agent parses differs per agent, so it is data: a profile's
``[syntax]`` table lists every live token with the regular expression that
says *where* that agent reads it, and how agentwrap defuses it:

* ``defuse = "prefix"``: insert ``insert`` before each match (Claude Code and
  Gemini CLI do not read ``\\@`` as a mention; for Gemini it is its own
  documented escape).
* ``defuse = "replace"``: put ``replace`` in place of each match (Codex has no
  escape for ``$name``; a fullwidth dollar sign reads the same to a model).
* ``defuse = "framing"``: the agent reads the token only at the start of the
  whole input (``/`` commands, ``!`` shell mode); agentwrap's block always
  starts with ``[agentwrap``, so these are never live in a block. Nothing is
  changed; :func:`live_tokens` still reports them for text typed on its own.

The transformation is visible on purpose: the model must read what was
written, and an invisible trick (a zero-width joiner) is exactly what
:func:`agentwrap.queue.sanitize.sanitize` removes. When something was escaped, the
block header carries the profile's ``legend`` so the model knows how to read
it. The same :func:`neutralise` applies to anything else agentwrap writes
where the agent parses it: the fallback notice and the instruction-file
section (CLAUDE.md and GEMINI.md import ``@path`` files too).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..errors import ProfileError

DEFUSE_KINDS = ("prefix", "replace", "framing")


@dataclass(frozen=True)
class SyntaxRule:
    """One token an agent acts on in prompt text, where it does, and the cure."""

    name: str  # what the agent does with it, e.g. "file mention"
    token: str  # the token as a person would name it, e.g. "@"
    pattern: re.Pattern[str]  # matches the token exactly where the agent reads it
    defuse: str  # one of DEFUSE_KINDS
    insert: str = ""  # defuse = "prefix": text put before each match
    replace: str = ""  # defuse = "replace": text put in place of each match

    def cure(self, match: re.Match[str]) -> str:
        if self.defuse == "prefix":
            return self.insert + match.group(0)
        if self.defuse == "replace":
            return self.replace
        return match.group(0)


@dataclass(frozen=True)
class SyntaxSpec:
    """Everything one agent parses in prompt text (a profile's ``[syntax]``)."""

    rules: tuple[SyntaxRule, ...] = ()
    legend: str = ""  # told to the model, once, when something was escaped

    @property
    def escaping(self) -> tuple[SyntaxRule, ...]:
        return tuple(r for r in self.rules if r.defuse != "framing")


@dataclass(frozen=True)
class LiveToken:
    rule: SyntaxRule
    start: int
    text: str


@dataclass(frozen=True)
class Neutralised:
    text: str
    escaped: Counter[str] = field(default_factory=Counter)  # rule name -> matches defused

    @property
    def changed(self) -> bool:
        return sum(self.escaped.values()) > 0


# A rule whose cure makes a new match of itself (or of another rule) would never
# settle; a few passes are plenty for any sane profile, more means a broken one.
_MAX_PASSES = 4


def defuse(text: str, spec: SyntaxSpec) -> Neutralised:
    """:func:`neutralise`, with a count of what was escaped per rule."""
    escaped: Counter[str] = Counter()
    for _ in range(_MAX_PASSES):
        changed = False
        for rule in spec.escaping:
            text, n = rule.pattern.subn(rule.cure, text)
            if n:
                escaped[rule.name] += n
                changed = True
        if not changed:
            return Neutralised(text, escaped)
    left = [t for t in live_tokens(text, spec) if t.rule.defuse != "framing"]
    name = left[0].rule.name if left else "?"
    raise ProfileError(
        f"syntax rule {name!r} does not settle: its own cure is read again",
        hint="the rule's pattern must not match where its insert/replace text puts the token",
    )


def neutralise(text: str, spec: SyntaxSpec) -> str:
    """Return ``text`` with every token the agent would act on defused.

    Idempotent, and afterwards :func:`live_tokens` finds nothing but
    ``framing`` tokens (which only matter for text typed as the whole input).
    """
    return defuse(text, spec).text


def live_tokens(text: str, spec: SyntaxSpec) -> list[LiveToken]:
    """Every place in ``text`` where the agent would act on a token."""
    found = [
        LiveToken(rule, m.start(), m.group(0))
        for rule in spec.rules
        for m in rule.pattern.finditer(text)
    ]
    return sorted(found, key=lambda t: t.start)


def check_spec(spec: SyntaxSpec, where: str) -> None:
    """Load-time proof that the profile's rules work on their own tokens.

    Each token is put everywhere a parser looks (start of text, after a space,
    a newline, inside a word, before a name) and must come out defused; the
    legend the model is shown must not itself be live.
    """
    for rule in spec.escaping:
        probe = "\n".join(
            f"{rule.token}x {rule.token}x\n{rule.token}x a{rule.token}x ({rule.token}x) "
            f"\t{rule.token}x-y.z/w {rule.token}"
            for _ in range(2)
        )
        try:
            out = neutralise(probe, spec)
        except ProfileError as exc:
            raise ProfileError(f"{where}: {exc.message}", hint=exc.hint) from None
        left = [t for t in live_tokens(out, spec) if t.rule.defuse != "framing"]
        if left:
            raise ProfileError(
                f"{where}: rule {left[0].rule.name!r} leaves {left[0].text!r} live "
                f"at {left[0].start} in its own probe"
            )
    if spec.legend and live_tokens(spec.legend, spec):
        raise ProfileError(f"{where}.legend: the legend itself holds a live token")
