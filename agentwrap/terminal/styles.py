"""A screen with its colours, as data a browser can draw safely (issue 26).

The detector reads plain rows; a person watching an agent wants to see what
the terminal shows, colours included. This module turns a screen into rows of
*runs*: a piece of text and its style (foreground, background, bold, dim,
italic, underline, reverse, strikethrough). No escape sequence survives it:
tmux's ``capture-pane -e`` output is parsed here (SGR only; anything else is
dropped), the pty backend's cells are read as they are, and every run's text
has its control characters replaced by U+FFFD.

Colours are one of three things and nothing else: ``None`` (the terminal's
default), a palette number 0..15 (the page's theme picks the colour), or
``#rrggbb`` (the 256-colour cube and greys converted here, true colour as
given). :func:`check_runs` enforces that on data read back from a file, so a
reader never passes on a value this module did not make.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

Colour = int | str | None

#: SGR (group 1 its parameters), or any other escape sequence (dropped).
_ESC_RE = re.compile(r"\x1b\[([0-9;:]*)m|\x1b\[[0-9;:?<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_HEX_RE = re.compile(r"#[0-9a-f]{6}")
#: The styled screen beside the plain one: ``<runtime>/<session>.screen.json``.
DOCUMENT_SUFFIX = ".screen.json"
#: Bounds of what a reader accepts back (a screen is far smaller).
MAX_ROWS = 500
MAX_COLS = 1000
FLAGS = ("bold", "dim", "italic", "underline", "reverse", "strike")


@dataclass(frozen=True)
class Style:
    fg: Colour = None
    bg: Colour = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    reverse: bool = False
    strike: bool = False


PLAIN = Style()


@dataclass(frozen=True)
class Run:
    """Text drawn in one style."""

    text: str
    style: Style = PLAIN

    def to_json(self) -> dict[str, Any]:
        """Only what differs from the default: most runs are just text."""
        out: dict[str, Any] = {"text": self.text}
        out.update({k: v for k, v in asdict(self.style).items() if v not in (None, False)})
        return out


Row = tuple[Run, ...]


def clean_text(text: str) -> str:
    """The text with every control character (C0, DEL, C1) made U+FFFD."""
    return _CONTROL_RE.sub("\ufffd", text)


def cube_hex(n: int) -> str:
    """Palette entry 16..255 (xterm's 6x6x6 cube and grey ramp) as #rrggbb."""
    if n >= 232:
        v = 8 + 10 * (n - 232)
        return f"#{v:02x}{v:02x}{v:02x}"
    n -= 16
    levels = [0 if c == 0 else 55 + 40 * c for c in (n // 36, (n // 6) % 6, n % 6)]
    return "#" + "".join(f"{c:02x}" for c in levels)


def palette(n: int) -> Colour:
    """A palette number as this module's colour (0..15 kept, the rest as hex)."""
    if 0 <= n <= 15:
        return n
    if 16 <= n <= 255:
        return cube_hex(n)
    return None


def _rgb(r: int, g: int, b: int) -> Colour:
    if all(0 <= c <= 255 for c in (r, g, b)):
        return f"#{r:02x}{g:02x}{b:02x}"
    return None


def _extended(parts: Sequence[int]) -> tuple[Colour, int]:
    """``5;N`` or ``2;R;G;B`` after a 38/48: the colour and how many values it took."""
    if parts[:1] == [5] and len(parts) >= 2:
        return palette(parts[1]), 2
    if parts[:1] == [2] and len(parts) >= 4:
        return _rgb(parts[1], parts[2], parts[3]), 4
    return None, len(parts)


def _colon_colour(sub: list[int]) -> Colour:
    """``38:5:N``, ``38:2:R:G:B`` or ``38:2::R:G:B`` (with a colour space id)."""
    if sub[:1] == [5] and len(sub) >= 2:
        return palette(sub[1])
    if sub[:1] == [2] and len(sub) >= 4:
        return _rgb(*sub[-3:])
    return None


_SET = {1: ("bold", True), 2: ("dim", True), 3: ("italic", True), 4: ("underline", True),
        7: ("reverse", True), 9: ("strike", True), 21: ("underline", True),
        23: ("italic", False), 24: ("underline", False), 27: ("reverse", False),
        29: ("strike", False)}


def apply_sgr(style: Style, params: str) -> Style:
    """The style after one SGR sequence (its parameters, e.g. ``1;38;5;208``)."""
    fields = params.split(";") if params else ["0"]
    i = 0
    while i < len(fields):
        field = fields[i]
        if ":" in field:  # sub-parameters: 38:2::R:G:B, 4:3 (curly underline)
            head, *rest = field.split(":")
            sub = [int(x) for x in rest if x.isdigit()] if rest else []
            if len(rest) > 1 and rest[1] == "" and head in ("38", "48"):
                sub = [int(rest[0]) if rest[0].isdigit() else 0,
                       *(int(x) for x in rest[2:] if x.isdigit())]
            if head == "38":
                style = replace(style, fg=_colon_colour(sub))
            elif head == "48":
                style = replace(style, bg=_colon_colour(sub))
            elif head == "4":
                style = replace(style, underline=bool(sub) and sub[0] != 0)
            i += 1
            continue
        code = int(field) if field.isdigit() else 0
        if code in (38, 48):
            rest_ints = [int(x) if x.isdigit() else 0 for x in fields[i + 1:i + 5]]
            colour, used = _extended(rest_ints)
            style = replace(style, fg=colour) if code == 38 else replace(style, bg=colour)
            i += 1 + used
            continue
        if code == 0:
            style = PLAIN
        elif code in _SET:
            name, value = _SET[code]
            style = replace(style, **{name: value})
        elif code == 22:
            style = replace(style, bold=False, dim=False)
        elif 30 <= code <= 37:
            style = replace(style, fg=code - 30)
        elif code == 39:
            style = replace(style, fg=None)
        elif 40 <= code <= 47:
            style = replace(style, bg=code - 40)
        elif code == 49:
            style = replace(style, bg=None)
        elif 90 <= code <= 97:
            style = replace(style, fg=code - 90 + 8)
        elif 100 <= code <= 107:
            style = replace(style, bg=code - 100 + 8)
        i += 1
    return style


def _merge(runs: list[Run]) -> Row:
    out: list[Run] = []
    for run in runs:
        if not run.text:
            continue
        if out and out[-1].style == run.style:
            out[-1] = Run(out[-1].text + run.text, run.style)
        else:
            out.append(run)
    return tuple(out)


def rows_from_ansi(text: str, rows: int | None = None) -> tuple[Row, ...]:
    """``capture-pane -p -e`` output as rows of runs. The style carries over
    from row to row, as tmux writes it (it resets only where it changes)."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    style = PLAIN
    out: list[Row] = []
    for line in lines:
        runs: list[Run] = []
        pos = 0
        for m in _ESC_RE.finditer(line):
            runs.append(Run(clean_text(line[pos:m.start()]), style))
            pos = m.end()
            if m.group(1) is not None:
                style = apply_sgr(style, m.group(1))
        runs.append(Run(clean_text(line[pos:]), style))
        out.append(_strip_end(_merge(runs)))
    if rows is not None:
        out = (out + [()] * rows)[:rows]
    return tuple(out)


def rows_from_text(lines: Iterable[str]) -> tuple[Row, ...]:
    """Plain rows (no styles known) as rows of one run each."""
    return tuple((Run(clean_text(line)),) if line else () for line in lines)


def _strip_end(row: Row) -> Row:
    """Trailing blanks in the default background drawn nowhere: dropped."""
    out = list(row)
    while out and out[-1].style.bg is None and not out[-1].style.reverse:
        text = out[-1].text.rstrip(" ")
        if text:
            out[-1] = Run(text, out[-1].style)
            break
        out.pop()
    return tuple(out)


# --- the pty backend's cells (pyte) ----------------------------------------------------------

_PYTE_NAMES = ("black", "red", "green", "brown", "blue", "magenta", "cyan", "white")


def pyte_colour(value: str) -> Colour:
    """pyte's colour names ("red", "brightblue") and hex ("ff8700") as this module's."""
    if value == "default" or not value:
        return None
    bright = value.startswith("bright")
    name = value[len("bright"):] if bright else value
    if name == "yellow":
        name = "brown"
    if name in _PYTE_NAMES:
        return _PYTE_NAMES.index(name) + (8 if bright else 0)
    if re.fullmatch(r"[0-9a-fA-F]{6}", value):
        return "#" + value.lower()
    return None


def row_from_cells(cells: Sequence[Any]) -> Row:
    """One row of pyte cells (with ``dim``, see :mod:`.vscreen`) as runs; the
    stub cell after a wide character (empty ``data``) is skipped."""
    runs = [Run(clean_text(c.data), Style(
        fg=pyte_colour(c.fg), bg=pyte_colour(c.bg), bold=bool(c.bold),
        dim=bool(getattr(c, "dim", False)), italic=bool(c.italics), underline=bool(c.underscore),
        reverse=bool(c.reverse), strike=bool(c.strikethrough))) for c in cells]
    return _strip_end(_merge(runs))


# --- the file the supervisor writes, read back ------------------------------------------------


def to_document(rows: Sequence[Row], *, cols: int, cursor: tuple[int, int], title: str,
                digest: str, at: float) -> bytes:
    """The styled screen as the supervisor saves it (``<name>.screen.json``)."""
    return json.dumps({
        "digest": digest, "at": at, "cols": cols, "rows": len(rows),
        "cursor": list(cursor), "title": clean_text(title),
        "lines": [[r.to_json() for r in row] for row in rows],
    }, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def check_colour(value: Any) -> Colour:
    """A colour this module makes, or None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 0 <= value <= 15:
        return value
    if isinstance(value, str) and _HEX_RE.fullmatch(value):
        return value
    return None


def check_runs(lines: Any) -> tuple[Row, ...]:
    """Rows read back from a document, every value checked: text without
    control characters, colours of the three kinds, flags true or absent.
    Whatever is not so is dropped; too many rows or too long a row are cut."""
    if not isinstance(lines, list):
        return ()
    out: list[Row] = []
    for line in lines[:MAX_ROWS]:
        runs: list[Run] = []
        width = 0
        for item in line if isinstance(line, list) else ():
            if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
                continue
            text = clean_text(item["text"])[:max(0, MAX_COLS - width)]
            width += len(text)
            runs.append(Run(text, Style(
                fg=check_colour(item.get("fg")), bg=check_colour(item.get("bg")),
                **{flag: item.get(flag) is True for flag in FLAGS})))
        out.append(_merge(runs))
    return tuple(out)


@dataclass(frozen=True)
class Screen:
    """A styled screen read back (:func:`read_document`), every value checked."""

    digest: str
    at: float  # wall-clock time it was saved
    cols: int
    cursor: tuple[int, int]  # (row, col)
    title: str
    lines: tuple[Row, ...]
    styled: bool = True  # False: the plain screen, no colours known

    @property
    def rows(self) -> int:
        return len(self.lines)


def _int(value: Any, high: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) \
        and 0 <= value <= high else 0


def read_document(data: bytes) -> Screen | None:
    """A document :func:`to_document` wrote, checked value by value; None if
    it is not one (a torn or foreign file)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("lines"), list):
        return None
    digest = doc.get("digest")
    at = doc.get("at")
    cursor = doc.get("cursor")
    title = doc.get("title")
    return Screen(
        digest=digest if isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{1,64}", digest)
        else "",
        at=float(at) if isinstance(at, (int, float)) and not isinstance(at, bool) else 0.0,
        cols=_int(doc.get("cols"), MAX_COLS),
        cursor=(_int(cursor[0], MAX_ROWS), _int(cursor[1], MAX_COLS))
        if isinstance(cursor, list) and len(cursor) == 2 else (0, 0),
        title=clean_text(title)[:200] if isinstance(title, str) else "",
        lines=check_runs(doc["lines"]),
    )
