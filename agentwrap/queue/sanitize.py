"""Make message text safe to type into a terminal.

Queued content ends up *pasted into an agent's terminal*, so anything in it
that a terminal or a TUI treats as a command is an attack surface:

* ``ESC [ 201 ~`` ends a bracketed paste early; everything after it would
  arrive as keystrokes (a ``\\r`` among them submits a prompt nobody saw).
* A bare ``ESC`` is the "cancel" key of most agent TUIs; ``ESC x`` is Alt+x.
* OSC/DCS/APC strings retitle windows, write the clipboard (OSC 52) or talk to
  the terminal; 8-bit C1 controls (U+0080-U+009F) do the same in one code point.
* C0 controls (``\\b``, ``\\x15`` kill-line, ``\\x03`` interrupt, ...) edit or
  abort the input line; ``\\r`` submits.
* Bidi overrides/isolates reorder what a *person* reading the screen sees, so
  text can look harmless and say something else ("Trojan Source"); bidi marks
  (LRM, RLM, ALM) are invisible too.
* Invisible characters carry text the person never sees but the model reads:
  Unicode TAG characters (U+E0000-U+E007F spell ASCII invisibly, "ASCII
  smuggling"), zero-width characters (U+200B-U+200D, U+2060-U+2064, U+FEFF,
  U+180E), the variation selectors supplement (U+E0100-U+E01EF, "emoji
  smuggling"), deprecated format characters (U+206A-U+206F), interlinear
  annotation marks (U+FFF9-U+FFFB), the soft hyphen and the Hangul fillers
  (U+3164, U+FFA0) that render as blanks. They also split words so that a
  keyword or an agent's own syntax hides from a reader. A zero-width joiner
  *between two emoji* is kept: it draws one visible glyph (a family, a
  profession) and hides nothing.
* U+2028/U+2029 (line/paragraph separator) are line breaks to some parsers and
  nothing to others: they become ``\n`` like a carriage return.

:func:`sanitize` removes all of that and keeps every other character exactly
(emoji, CJK, combining marks, ``\\n`` and ``\\t``). The invariant the tests
check on random input: the result contains no ESC, no C0 control except
``\\n``/``\\t``, no DEL, no C1 control, no bidi control, no invisible character
(see :data:`INVISIBLE`; a ZWJ only between emoji) and no ``\\r`` - so no control
sequence or hidden text can survive or be formed by the removal itself.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..errors import InvalidMessage

ESC = "\x1b"
BEL = "\x07"
C1_CSI = "\x9b"
C1_OSC = "\x9d"
C1_ST = "\x9c"
# 8-bit introducers of "control strings" that run until ST: DCS, SOS, PM, APC.
C1_STRINGS = frozenset("\x90\x98\x9e\x9f")
# 7-bit equivalents: ESC P (DCS), ESC X (SOS), ESC ^ (PM), ESC _ (APC).
ESC_STRINGS = frozenset("PX^_")
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# LRM, RLM, ALM: invisible marks that only steer the bidi algorithm.
BIDI_MARKS = frozenset("\u200e\u200f\u061c")
ZWJ = "\u200d"
# Line breaks that are not \n: \r (handled on its own), LINE and PARAGRAPH SEPARATOR.
UNICODE_LINE_BREAKS = frozenset("\u2028\u2029")

# Invisible characters removed, by (first, last code point, what the notes call them).
INVISIBLE: tuple[tuple[int, int, str], ...] = (
    (0x00AD, 0x00AD, "soft hyphen"),
    (0x180E, 0x180E, "zero-width character"),
    (0x200B, 0x200D, "zero-width character"),
    (0x2060, 0x2064, "zero-width character"),
    (0x2065, 0x2065, "invisible format character"),
    (0x206A, 0x206F, "invisible format character"),
    (0x3164, 0x3164, "Hangul filler"),
    (0xFEFF, 0xFEFF, "zero-width character"),
    (0xFFA0, 0xFFA0, "Hangul filler"),
    (0xFFF9, 0xFFFB, "invisible format character"),
    (0xE0000, 0xE007F, "TAG character"),
    (0xE0100, 0xE01EF, "variation selector (supplement)"),
)
_INVISIBLE_CLASS = "".join(
    re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
    for a, b, _ in INVISIBLE
)

# Everything that needs a decision; the text between two matches is copied as is.
_SPECIAL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
    f"\u2028\u2029{_INVISIBLE_CLASS}]"
)
# Characters that draw as emoji (or modify one): a ZWJ between two of them is kept.
_PICTOGRAPHIC = (
    (0x00A9, 0x00A9), (0x00AE, 0x00AE), (0x203C, 0x203C), (0x2049, 0x2049),
    (0x2122, 0x2122), (0x2139, 0x2139), (0x2190, 0x21FF), (0x2300, 0x23FF),
    (0x24C2, 0x24C2), (0x25A0, 0x27BF), (0x2900, 0x297F), (0x2B00, 0x2BFF),
    (0x3030, 0x3030), (0x303D, 0x303D), (0x3297, 0x3297), (0x3299, 0x3299),
    (0x1F000, 0x1FAFF),
)
EMOJI_PRESENTATION = "\ufe0f"  # may end the emoji before a ZWJ (🏳️‍🌈)
# After the CSI introducer: parameter bytes, intermediate bytes, one final byte.
# A missing final byte (text ended, or a byte outside these ranges) still ends
# the sequence there; the offending character is then judged on its own.
_CSI_BODY = re.compile(r"[0-?]*[ -/]*[@-~]?")
# After a bare ESC: intermediate bytes and a final byte (ESC 7, ESC ( B, ESC # 8).
_ESC_BODY = re.compile(r"[ -/]*[0-~]?")
# What can end a control string: BEL (OSC only), ESC (ST is ESC \\, any other
# ESC aborts the string as in the VT500 parser), C1 ST, and CAN/SUB (abort).
_OSC_END = re.compile("[\x07\x18\x1a\x1b\x9c]")
_STRING_END = re.compile("[\x18\x1a\x1b\x9c]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Sanitized:
    """The cleaned text and an account of what was taken out (for metadata/logs)."""

    text: str
    removed: int  # sequences and single characters removed (line endings not counted)
    notes: list[str] = field(default_factory=list)


def check_text(text: str) -> None:
    """Reject strings that cannot be encoded as UTF-8 (lone surrogates).

    Python lets ``str`` hold lone surrogates (e.g. from ``surrogateescape``);
    SQLite, JSON peers and the terminal cannot carry them, so they are refused
    up front instead of failing half-way through a delivery.
    """
    m = _SURROGATE.search(text)
    if m is not None:
        raise InvalidMessage(
            f"content is not valid text (lone surrogate U+{ord(m.group()):04X}"
            f" at character {m.start()})",
            hint="send UTF-8 text; binary data must be encoded (e.g. base64) first",
        )


def decode_utf8(data: bytes) -> str:
    """Decode strict UTF-8; the error names the 0-based offset of the first bad byte."""
    try:
        return data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise InvalidMessage(
            f"content is not valid UTF-8 (byte {exc.start})",
            hint="send UTF-8 text; binary data must be encoded (e.g. base64) first",
        ) from None


def sanitize(text: str) -> Sanitized:
    """Remove every terminal control sequence, bidi control and invisible character.

    Carriage returns are normalised (``\\r\\n`` and lone ``\\r`` become ``\\n``)
    rather than removed: they are line breaks from other platforms, not attacks,
    so they are reported in ``notes`` but not counted in ``removed``. The same
    holds for U+2028/U+2029.
    """
    out: list[str] = []
    kinds: Counter[str] = Counter()
    crs = seps = 0
    pos = 0
    n = len(text)
    while True:
        m = _SPECIAL.search(text, pos)
        if m is None:
            out.append(text[pos:])
            break
        i = m.start()
        out.append(text[pos:i])
        ch = text[i]
        if ch == "\r":
            crs += 1
            out.append("\n")
            pos = i + 2 if text.startswith("\n", i + 1) else i + 1
            continue
        if ch in UNICODE_LINE_BREAKS:
            seps += 1
            out.append("\n")
            pos = i + 1
            continue
        if ch == ZWJ and _joins_emoji(out, text[i + 1 : i + 2]):
            out.append(ch)
            pos = i + 1
            continue
        pos, kind = _skip_control(text, i)
        kinds[kind] += 1
        assert i < pos <= n
    return Sanitized(
        text="".join(out), removed=sum(kinds.values()), notes=_notes(kinds, crs, seps)
    )


def _is_pictographic(ch: str) -> bool:
    code = ord(ch)
    return any(a <= code <= b for a, b in _PICTOGRAPHIC)


def _joins_emoji(out: list[str], nxt: str) -> bool:
    """A ZWJ with an emoji on both sides (as written out so far, and next)."""
    prev = next((chunk[-1] for chunk in reversed(out) if chunk), "")
    if not (prev and nxt):
        return False
    return (prev == EMOJI_PRESENTATION or _is_pictographic(prev)) and _is_pictographic(nxt)


def invisible_kind(ch: str) -> str | None:
    """What :func:`sanitize` calls ``ch`` if it removes it as invisible, else None."""
    code = ord(ch)
    for first, last, kind in INVISIBLE:
        if first <= code <= last:
            return kind
    return None


def _skip_control(text: str, i: int) -> tuple[int, str]:
    """Return where the control starting at ``text[i]`` ends, and what it was."""
    ch = text[i]
    if ch == ESC:
        return _skip_escape(text, i)
    if ch == C1_CSI:
        return _skip_csi(text, i + 1)
    if ch == C1_OSC:
        return _skip_string(text, i + 1, "OSC", _OSC_END)
    if ch in C1_STRINGS:
        return _skip_string(text, i + 1, "DCS/SOS/PM/APC", _STRING_END)
    if ch in BIDI_CONTROLS:
        return i + 1, "bidi control"
    if ch in BIDI_MARKS:
        return i + 1, "bidi mark"
    invisible = invisible_kind(ch)
    if invisible is not None:
        return i + 1, invisible
    if ch == "\x7f":
        return i + 1, "DEL"
    if ch < "\x20":
        return i + 1, "C0 control"
    return i + 1, "C1 control"


def _skip_escape(text: str, i: int) -> tuple[int, str]:
    """An ESC at ``text[i]``: a CSI, a control string, ESC+final, or a lone ESC."""
    nxt = text[i + 1 : i + 2]
    if nxt == "[":
        return _skip_csi(text, i + 2)
    if nxt == "]":
        return _skip_string(text, i + 2, "OSC", _OSC_END)
    if nxt and nxt in ESC_STRINGS:
        return _skip_string(text, i + 2, "DCS/SOS/PM/APC", _STRING_END)
    m = _ESC_BODY.match(text, i + 1)
    assert m is not None  # the pattern matches the empty string
    if m.end() == i + 1:
        return i + 1, "lone ESC"
    return m.end(), "ESC sequence"


def _skip_csi(text: str, start: int) -> tuple[int, str]:
    """The CSI body from ``start`` (just after ``ESC [`` or U+009B)."""
    m = _CSI_BODY.match(text, start)
    assert m is not None  # the pattern matches the empty string
    end = m.end()
    complete = end > start and "@" <= text[end - 1] <= "~"
    return end, "CSI sequence" if complete else "incomplete CSI sequence"


def _skip_string(text: str, start: int, name: str, ends: re.Pattern[str]) -> tuple[int, str]:
    """A control string body from ``start``, through its terminator.

    Without any terminator the string runs to the end of the text, as it would
    in a terminal: that text was never meant to be visible.
    """
    m = ends.search(text, start)
    if m is None:
        return len(text), f"unterminated {name} string (removed to end of text)"
    j = m.start()
    if text[j] == ESC:
        if text.startswith("\\", j + 1):
            return j + 2, f"{name} string"
        return j, f"{name} string (cut short by ESC)"
    if text[j] in "\x18\x1a":
        return j + 1, f"{name} string (cancelled)"
    return j + 1, f"{name} string"


def _notes(kinds: Counter[str], crs: int, seps: int) -> list[str]:
    notes = [f"removed {count} x {kind}" for kind, count in sorted(kinds.items())]
    if crs:
        notes.append(f"normalised {crs} carriage return(s) to \\n")
    if seps:
        notes.append(f"normalised {seps} line/paragraph separator(s) to \\n")
    return notes
