"""What an agent that waits for a person is asking, read off its screen.

``waiting_input`` alone tells a person to go and look. To answer from
elsewhere (the CLI, the API, a phone) they need the question itself: what is
asked, the options with their descriptions, which one the cursor is on,
whether free text is possible, and for a permission the tool and command.

The four agents draw their dialogs differently, but from the same few parts,
so one reader serves them all and the profile adds only what differs:

* a **numbered option list** (Claude Code, Codex, Gemini): ``1. Yes`` lines,
  one marked by a cursor (``❯ › ● >``), descriptions on the same line after a
  wide gap (Codex) or on the indented lines below (Claude, Gemini), a key hint
  in brackets at the end (``(y)``, ``(esc)``). The list read is the *lowest*
  run numbered 1..n on the screen: a plan or a diff above it may be numbered too;
* a **y/n prompt** (Aider): ``Question? (Y)es/(N)o/(D)on't ask again [Yes]:``;
* the **question**: the nearest paragraph above the options that asks
  something (has a ``?``), else the nearest paragraph; a ``☐ Header`` line
  above it names the question (Claude's AskUserQuestion);
* the **title**: the first line of the dialog (after the rule or box edge that
  starts it), e.g. ``Bash command``, ``Edit file``, ``Answer Questions``.

The profile's dialog entry (``patterns/*.toml``) says what *kind* of question
it is (permission, choice, confirm, trust, text) and may give a ``subject``
regex whose named groups ``tool`` and ``command`` pick those out of the dialog.
A group ``box`` is the code box a dialog draws the command in (Gemini CLI): the
line the ``command`` group read may then be the model's *description* of the
call instead (Gemini shows it for a command longer than 150 characters), so the
command is read from the box, the description kept apart, and a command the box
wraps or hides is marked ``command_unsure``: nobody may approve it by rule on
the screen's word alone (:mod:`agentwrap.answers.rules`); so is the line
read when a group ``unboxed`` says the box should have been there and was not.

Each question has an id made from its content (not from the cursor), so an
answer can name the question it answers, and a stale answer (the agent moved
on to another question) is told apart from a current one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..errors import InvalidAnswer

QuestionKind = Literal["permission", "choice", "confirm", "trust", "text"]
KINDS: tuple[QuestionKind, ...] = ("permission", "choice", "confirm", "trust", "text")


@dataclass(frozen=True)
class Option:
    label: str
    description: str = ""
    number: int | None = None  # as shown: typing it picks the option
    key: str | None = None  # a key hint the dialog shows, e.g. "y", "esc", "shift+tab"
    checked: bool | None = None  # multi-select: the box is ticked


@dataclass(frozen=True)
class Item:
    """One question of a dialog (AskUserQuestion may hold several)."""

    question: str
    header: str = ""
    options: tuple[Option, ...] = ()
    multiSelect: bool = False  # named as in the agents' own question JSON


@dataclass(frozen=True)
class Question:
    id: str
    kind: QuestionKind
    title: str
    questions: tuple[Item, ...]
    highlighted: int | None = None  # the number of the option the cursor is on
    free_text_allowed: bool = False
    tool: str | None = None
    command: str | None = None
    dialog: str = ""  # the profile's dialog that matched
    source: str = "screen"  # or "hook": where it was read
    # A dialog of several questions shown one tab at a time (Claude's
    # AskUserQuestion: ``←  ☐ Database  ☐ Features  ✔ Submit  →``): every tab's
    # header, in order, without the review tab. The tab on screen is the one in
    # ``questions``; which of them it is shows only in colour, so it is not read.
    tabs: tuple[str, ...] = ()
    # What the agent says the call does, where its dialog shows that apart from the
    # command (Gemini CLI's run_shell_command ``description``): never the command.
    description: str | None = None
    # Why ``command`` as read off the screen may not be exactly what runs ("" when
    # it was read whole, or a hook told it): an answer rule must not approve it.
    command_unsure: str = ""
    # Where the command runs, when the agent told it (Codex's app-server request).
    cwd: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Question:
        items = tuple(
            Item(question=i["question"], header=i.get("header", ""),
                 options=tuple(Option(**o) for o in i.get("options", ())),
                 multiSelect=bool(i.get("multiSelect", False)))
            for i in data.get("questions", ())
        )
        return Question(**{**data, "questions": items,
                            "tabs": tuple(data.get("tabs", ()))})


# --- reading the screen -------------------------------------------------------------------

_BOX_EDGE = re.compile(r"^\s*[│┃║]\s?|\s?[│┃║]\s*$")
_RULE = re.compile(r"^\s*[─━═╌┄╍┈▀▄-]{8,}\s*$")
_BOX_TOP = re.compile(r"^\s*[╭┌╔]")
_BOX_BOTTOM = re.compile(r"^\s*[╰└╚]")
# "1. label", or "[1] label" (Kimi Code 2.1.0's AskUserQuestion, cursor "→")
_OPTION = re.compile(
    r"^(?P<indent>\s*)(?P<cursor>[❯›●>▸▶→]\s*)?(?P<bracket>\[)?(?P<num>\d{1,2})(?(bracket)\]|\.)"
    r"\s+(?P<label>\S.*?)\s*$"
)
_KEY_HINT = re.compile(r"\s*\((?P<key>esc|tab|[a-z]|(?:shift|ctrl|alt)\+[a-z]+)\)$")
_CHECKBOX = re.compile(r"^\[(?P<mark>[ x✔✓×])\]\s*")
_HEADER = re.compile(r"^\s*(?:[←→]\s*)?(?P<headers>[☐☒✔✓□■].*)$")
_TRANSCRIPT_ITEM = re.compile(r"^[•●⏺✦❯›>]\s")
_YES_NO = re.compile(
    r"^(?P<question>.*?\?)\s+(?P<options>\([A-Z]\)[^/\[]*(?:/\([A-Z]\)[^/\[]*)+)"
    r"\s*(?:\[(?P<default>[^\]]*)\])?:?\s*$"
)
# Options shown as keys in brackets on one line (Cline: "[y] Approve   [n] Deny")
_KEY_LIST = re.compile(r"^\s*(?:\[[a-z]\][^\S\n]+\S.*?){2,}$")
_KEY_OPTION = re.compile(r"\[(?P<key>[a-z])\][^\S\n]+(?P<label>\S.*?)(?=\s+\[[a-z]\]|\s*$)")
_KEYS_BELOW = 6  # lines under the key list (a footer) it may be followed by
_FREE_TEXT = re.compile(
    r"type something|custom value|tell \w+ what to do differently|suggest changes"
    r"|add details|none of the above|chat about this",
    re.IGNORECASE,
)
_PROGRESS = re.compile(r"^Question \d+/\d+\b")  # Codex: "Question 1/2 (2 unanswered)"
_GAP = re.compile(r"\s{2,}")
# Gemini's MaxSizedBox: "... first 3 lines hidden (ctrl+o to show) ...", "... 3 hidden (...) ..."
_HIDDEN = re.compile(r"^\.\.\. .*\bhidden\b.*\.\.\.$")
_SPACE = re.compile(r"\s+")
# An unnumbered option under the cursor (Copilot CLI's ask_user: "❯ SQLite")
_CURSOR_ITEM = re.compile(r"^(?P<indent>\s*)(?P<cursor>[❯›▸→])\s+(?P<label>\S.*?)\s*$")
# Buttons side by side, and the key legend after them ("ctrl+f fullscreen  ⇆ select
# enter confirm", cut short at 80 columns): a legend starts with a key's name and
# says what selects or confirms
_SIDEBAR_GAP = re.compile(r"\s{8,}(?=\S)")
# A dialog's heading: a warning sign, then words ("△ Permission required")
_HEADING = re.compile(r"^[△⚠▲]\s+\w")
_BUTTON_GAP = re.compile(r"\s{2,}")
_ARROWS_SELECT = re.compile(r"(?:↑↓|↑/↓)\s*(?:to )?select\b")
_KEY_NAME = re.compile(r"^(?:(?:ctrl|alt|shift)\+\S|[⇆←→↑↓]|(?:tab|esc|enter)\s)")
_KEY_LEGEND = re.compile(r"\b(?:select|confirm)\b")
_MAX_ABOVE = 20  # lines above the options searched for the question


def _unbox(line: str) -> str:
    """A line without the box edges Gemini draws around its dialogs (twice when nested)."""
    for _ in range(2):
        stripped = _BOX_EDGE.sub("", line)
        if stripped == line:
            break
        line = stripped
    return line.rstrip()


def _without_sidebar(line: str, width: int) -> str:
    """The line without text that stands apart in the right part of the screen
    (after a wide gap, past 60% of its width): a sidebar beside the dialog
    (OpenCode's, at 160 columns and more), not the dialog's."""
    for m in _SIDEBAR_GAP.finditer(line):
        if m.end() > width * 0.6:
            return line[:m.start()].rstrip()
    return line


def _is_boundary(line: str) -> bool:
    return bool(_RULE.match(line) or _BOX_TOP.match(line) or _BOX_BOTTOM.match(line)
                or _TRANSCRIPT_ITEM.match(line))


@dataclass
class _Draft:
    options: list[Option] = field(default_factory=list)
    highlighted: int | None = None
    first: int = 0  # index of option 1's line
    row: bool = False  # buttons side by side (_button_row)


def _option_list(lines: Sequence[str]) -> _Draft | None:
    """The lowest run of options numbered 1..n, read bottom-up."""
    bottom = None
    for i in range(len(lines) - 1, -1, -1):
        if _OPTION.match(lines[i]):
            bottom = i
            break
    if bottom is None:
        return None
    found: dict[int, tuple[int, re.Match[str]]] = {}
    expect: int | None = None
    i = bottom
    while i >= 0:
        line = lines[i]
        m = _OPTION.match(line)
        if m and (expect is None or int(m["num"]) == expect):
            found[int(m["num"])] = (i, m)
            expect = int(m["num"]) - 1
            if expect == 0:
                break
        elif m:  # numbered, but not the next one up: another list
            return None
        i -= 1
    if expect != 0:
        return None
    if not any(m["cursor"] for _, m in found.values()) \
            and not any(_ARROWS_SELECT.search(line) for line in lines[bottom + 1:bottom + 6]):
        # a numbered list nobody can pick from (notes, a plan), not options; unless a
        # key legend under it says the arrows pick (OpenCode: the cursor is a colour)
        return None
    draft = _Draft(first=found[1][0])
    width = max(len(line) for line in lines)
    numbers = sorted(found)
    for n in numbers:
        idx, m = found[n]
        end = found[n + 1][0] if n + 1 in found else min(idx + 4, len(lines))
        label_col = len(m["indent"]) + len(m["cursor"] or "") + len(m["num"]) + 2
        label, below = m["label"], list[str]()
        wrapped = len(lines[idx]) >= width - 12  # the label ran to the edge: it goes on below
        # Claude's multi-select indents a description by two, under the number, and
        # draws its "Submit" button right under the last box
        boxed = bool(_CHECKBOX.match(label))
        for extra in lines[idx + 1:end]:
            if not extra.strip() or _is_boundary(extra) or _OPTION.match(extra):
                break
            if boxed and extra.strip() == "Submit":
                break
            if len(extra) - len(extra.lstrip()) < (1 if boxed else label_col):
                break  # a footer or the next part of the dialog, not this option's text
            if wrapped and not below:
                label = f"{label} {extra.strip()}"
                wrapped = len(extra) >= width - 12
                continue
            below.append(extra.strip())
        draft.options.append(_make_option(n, label, " ".join(below)))
        if m["cursor"]:
            draft.highlighted = n
    return draft


def _cursor_list(lines: Sequence[str], described: bool = False) -> _Draft | None:
    """Options shown without numbers (Copilot CLI's ask_user): the lowest line
    that starts with a cursor, and the lines beside it whose text starts in the
    same column. They are numbered by position: an answer moves the cursor there
    with the arrows, as for a numbered list (no number is ever typed).
    ``described``: each option has one line of description under it, in the
    same column (the profile says so): every second line, counted from the
    cursor's, is an option."""
    at = next((i for i in range(len(lines) - 1, -1, -1) if _CURSOR_ITEM.match(lines[i])), None)
    if at is None:
        return None
    col = _CURSOR_ITEM.match(lines[at]).start("label")  # type: ignore[union-attr]

    def item(line: str) -> bool:
        return len(line) > col and not line[:col].strip() and not line[col].isspace()

    gap = 1 if described else 0  # described options are set apart by a blank line

    def next_to(i: int, way: int) -> int | None:
        """The item line next to ``i`` that way, across at most ``gap`` blank lines."""
        for j in range(i + way, i + way * (gap + 2), way):
            if not 0 <= j < len(lines):
                return None
            if item(lines[j]):
                return j
            if lines[j].strip():
                return None
        return None

    run = [at]
    while (j := next_to(run[0], -1)) is not None:
        run.insert(0, j)
    while (j := next_to(run[-1], 1)) is not None:
        run.append(j)
    if len(run) == 1:
        return None  # one line with a cursor: a prompt, not a choice
    step = 2 if described else 1
    start = run.index(at) % step  # the cursor is on an option, never on a description
    draft = _Draft(first=run[start], highlighted=(run.index(at) - start) // step + 1)
    for n, k in enumerate(range(start, len(run), step), start=1):
        below = lines[run[k + 1]][col:].strip() if described and k + 1 < len(run) else ""
        draft.options.append(_make_option(n, lines[run[k]][col:].strip(), below))
    return draft


def _button_row(lines: Sequence[str]) -> _Draft | None:
    """Options drawn side by side as buttons (OpenCode: ``Allow once   Allow
    always   Reject``, then a key legend that says Enter confirms): the lowest
    such row, numbered by position like :func:`_cursor_list`'s. Which button is
    selected shows only in colour: not read here
    (``highlighted`` None; :mod:`agentwrap.answers.keys` reads it off the
    styled screen)."""
    for i in range(len(lines) - 1, -1, -1):
        parts = [p.strip() for p in _BUTTON_GAP.split(lines[i].strip()) if p.strip()]
        legend = next((n for n, p in enumerate(parts) if _KEY_NAME.match(p)), None)
        if legend is None or legend < 2 or not _KEY_LEGEND.search(" ".join(parts[legend:])):
            continue
        labels = parts[:legend]
        if not all(len(label) <= 40 for label in labels):
            continue
        draft = _Draft(first=i, highlighted=None, row=True)
        draft.options.extend(Option(label=label, number=n) for n, label in enumerate(labels, 1))
        return draft
    return None


def _make_option(number: int, label: str, description: str) -> Option:
    key = None
    hint = _KEY_HINT.search(label)
    if hint:
        key = hint["key"]
        label = label[: hint.start()].rstrip()
    checked = None
    box = _CHECKBOX.match(label)
    if box:
        checked = box["mark"] != " "
        label = label[box.end():]
    if not description:
        parts = _GAP.split(label, maxsplit=1)
        if len(parts) == 2:  # Codex: "SQLite             One file, no server"
            label, description = parts
    return Option(label=label.strip(), description=description.strip(), number=number,
                  key=key, checked=checked)


def _paragraphs_above(lines: Sequence[str], first: int) -> tuple[list[list[str]], str]:
    """Paragraphs above line ``first``, nearest first, and the dialog's first line."""
    paragraphs: list[list[str]] = []
    current: list[str] = []
    title = ""
    edge = False
    width = max((len(line) for line in lines), default=0)
    for line in reversed(lines[max(0, first - _MAX_ABOVE):first]):
        if _is_boundary(line):
            edge = not _TRANSCRIPT_ITEM.match(line)
            break
        if not line.strip():
            if current:
                paragraphs.append(current)
                current = []
            continue
        current.insert(0, line.strip())
    if current:
        paragraphs.append(current)
    if paragraphs and edge:  # the dialog's own first line ("Bash command", "Edit file")
        own = [line for line in paragraphs[-1] if not _HEADER.match(line)]
        title = _unwrapped(own, width)
    return paragraphs, title


def _unwrapped(para: Sequence[str], width: int) -> str:
    """The first line of ``para`` with what the terminal wrapped onto the next lines
    (a line that reached the screen's edge and ends mid-sentence), so a title reads
    the same at every width (Copilot CLI's folder-trust note)."""
    if not para:
        return ""
    title = para[0]
    for line, more in itertools.pairwise(para):
        if len(line) < width - 24 or re.search(r"[.:?!]$", line):
            break
        title = f"{title} {more}"
    return title


def _question_text(
    paragraphs: list[list[str]], width: int,
) -> tuple[str, str, tuple[str, ...]]:
    """(header, question, tabs) from the paragraphs above the options; ``width``:
    the screen's, to tell a line the terminal wrapped from one that ended."""
    header = ""
    tabs: tuple[str, ...] = ()
    cleaned: list[list[str]] = []
    for para in paragraphs:
        kept = []
        for line in para:
            if _PROGRESS.match(line):
                continue
            h = _HEADER.match(line)
            if h and not header:
                marks = re.split(r"\s*[☐☒✔✓□■]\s*", h["headers"])
                names = [n.strip(" →") for n in marks]
                names = [n for n in names if n and n != "Submit"]
                header = names[0] if len(names) == 1 else ""
                if "Submit" in h["headers"] or line.lstrip().startswith("←"):
                    tabs = tuple(names)  # a tab bar, not one question's header
                continue
            kept.append(line)
        if kept:
            cleaned.append(kept)
    asking = next((p for p in cleaned if any("?" in line for line in p)), None)
    if asking is None:
        return header, " ".join(cleaned[0]) if cleaned else "", tabs
    ends = [i for i, line in enumerate(asking) if line.endswith("?")]
    if ends and ends[-1] < len(asking) - 1:  # a note after the question ("Redirection
        asking = asking[:ends[-1] + 1]  # detected. To auto-accept, press Shift+Tab")
    if "?" in asking[-1]:  # the line that asks (with what wrapped into it), not those before
        start = len(asking) - 1
        while start > 0 and len(asking[start - 1]) >= width - 24 \
                and not re.search(r"[.:?!]$", asking[start - 1]):
            start -= 1
        asking = asking[start:]
    return header, " ".join(asking), tabs


def parse_question(
    screen: str,
    *,
    dialog: str,
    kind: str,
    subject: re.Pattern[str] | None = None,
    tool: str | None = None,
    described: bool = False,
) -> Question | None:
    """The question on ``screen`` (the agent's visible screen, plain text), as
    drawn by the dialog the profile matched; None when nothing reads as one.
    ``described``: the dialog's unnumbered options each have a description line
    under them (see :func:`_cursor_list`)."""
    lines = [_unbox(line) for line in screen.splitlines()]
    width = max((len(line) for line in lines), default=0)
    lines = [_without_sidebar(line, width) for line in lines]
    while lines and not lines[-1].strip():
        lines.pop()
    draft = _option_list(lines)
    if draft is None and not _asks_yes_no(lines) and _key_list(lines) is None:
        draft = _cursor_list(lines, described) or _button_row(lines)  # read last: the loosest shapes
    item: Item
    highlighted: int | None
    title: str
    tabs: tuple[str, ...] = ()
    if draft is not None:
        paragraphs, title = _paragraphs_above(lines, draft.first)
        header, question, tabs = _question_text(paragraphs, max(len(line) for line in lines))
        if draft.row:  # the heading above buttons asks (what is nearer is the call's detail)
            question = next((line for para in paragraphs for line in para
                             if _HEADING.match(line)), question)
        multi = any(o.checked is not None for o in draft.options)
        item = Item(question=question, header=header, options=tuple(draft.options),
                    multiSelect=multi)
        highlighted = draft.highlighted
        region = "\n".join(lines[max(0, draft.first - _MAX_ABOVE):])
    elif (keyed := _key_list(lines)) is not None:
        item, region = keyed
        highlighted = None
        title = item.question
    else:
        yn = _asks_yes_no(lines)
        if yn is None:
            return None
        options = [Option(label=part[1] + part[3:].rstrip(), key=part[1].lower())
                   for part in (p.strip() for p in yn["options"].split("/"))]
        item = Item(question=yn["question"].strip(), options=tuple(options))
        default = (yn["default"] or "").strip().lower()
        highlighted = next((n for n, o in enumerate(options, start=1)
                            if default and o.label.lower().startswith(default)), None)
        title = item.question
        region = "\n".join(lines[-6:])
    footer = "\n".join(lines[-3:]).lower()
    free = any(_FREE_TEXT.search(o.label) for o in item.options) or "tab to amend" in footer \
        or "add notes" in footer
    command = description = None
    unsure = ""
    if subject is not None and (s := subject.search(region)):
        groups = s.groupdict()
        tool = (groups.get("tool") or "").strip() or tool
        command = (groups.get("command") or groups.get("file") or "").strip() or None
        if groups.get("box") is not None:
            command, description, unsure = _boxed_command(command, groups["box"])
        elif groups.get("unboxed"):  # the box the command should be in is not there
            unsure = "the dialog's command box was not found: the line read may describe" \
                " the command instead of showing it"
    return Question(
        id=question_id(dialog, (item,), tool, command, tabs), kind=_kind(kind),
        title=title or item.question, questions=(item,), highlighted=highlighted,
        free_text_allowed=free, tool=tool, command=command, dialog=dialog, tabs=tabs,
        description=description, command_unsure=unsure,
    )


def _key_list(lines: Sequence[str]) -> tuple[Item, str] | None:
    """A line of options picked by key (``[y] Approve   [n] Deny``) near the bottom,
    with the nearest line above it that asks something; and the dialog's text."""
    for i in range(len(lines) - 1, max(-1, len(lines) - 1 - _KEYS_BELOW), -1):
        if not _KEY_LIST.match(lines[i]):
            continue
        options = tuple(Option(label=m["label"], key=m["key"])
                        for m in _KEY_OPTION.finditer(lines[i]))
        above = lines[max(0, i - _MAX_ABOVE):i]
        question = next((line.strip() for line in reversed(above) if line.strip().endswith("?")),
                        "")
        return Item(question=question, options=options), "\n".join([*above, lines[i]])
    return None


def _asks_yes_no(lines: Sequence[str]) -> re.Match[str] | None:
    """A y/n prompt on one of the last three lines (Aider's)."""
    return next((m for line in reversed(lines[-3:]) if (m := _YES_NO.match(line.strip()))), None)


def _boxed_command(shown: str | None, box: str) -> tuple[str | None, str | None, str]:
    """(command, description, why unsure) from the line a dialog names the call on
    (``shown``) and the box it draws the command in. The line is the command when it
    says what the box says; otherwise it is a description (or a cut), and the command
    is the box's text: exact on one line, a guess when wrapped (a wrap may have eaten
    a space, or stood for a newline) or when lines of it are hidden."""
    lines = [line.strip() for line in box.splitlines() if line.strip()]
    visible = [line for line in lines if not _HIDDEN.match(line)]
    if not visible:
        return shown, None, ""
    text = " ".join(visible)
    squashed = _SPACE.sub("", text)
    if shown and len(visible) == len(lines) and _SPACE.sub("", shown) == squashed:
        return shown, None, ""
    unsure = ""
    if len(visible) < len(lines):
        unsure = "part of the command is hidden in the dialog"
    elif len(visible) > 1:
        unsure = f"the command wraps over {len(visible)} lines of the dialog: its exact text" \
            " is not known"
    cut = _SPACE.sub("", shown or "").rstrip(".…")
    described = bool(shown) and not (cut and squashed.startswith(cut))
    return text, shown if described else None, unsure


def free_text_option(item: Item) -> Option | None:
    """The option that asks for free text ("Type something.", "No, and tell Claude what
    to do differently"), if the question has one."""
    return next((o for o in item.options if _FREE_TEXT.search(o.label)), None)


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


def _kind(kind: str) -> QuestionKind:
    for known in KINDS:
        if kind == known:
            return known
    raise ValueError(f"unknown question kind {kind!r}")


def question_id(
    dialog: str, items: Sequence[Item], tool: str | None = None, command: str | None = None,
    tabs: Sequence[str] = (),
) -> str:
    """Stable for one question whatever the cursor does (or which boxes are ticked);
    new when anything asked changes."""
    content: dict[str, Any] = {
        "dialog": dialog, "tool": tool, "command": command,
        "items": [[i.question, i.header, [o.label for o in i.options], i.multiSelect]
                  for i in items],
    }
    if tabs:
        content["tabs"] = list(tabs)
    digest = hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()[:12]
