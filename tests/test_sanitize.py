"""The sanitizer: nothing a terminal or TUI would act on may survive."""

from __future__ import annotations

import random

import pytest

from agentwrap.errors import InvalidMessage
from agentwrap.queue.sanitize import (
    INVISIBLE,
    _is_pictographic,
    check_text,
    decode_utf8,
    invisible_kind,
    sanitize,
)

ESC = "\x1b"

# (input, expected text, expected removed count)
CASES: list[tuple[str, str, int]] = [
    # --- plain text is untouched
    ("hello world", "hello world", 0),
    ("tabs\tand\nnewlines\n", "tabs\tand\nnewlines\n", 0),
    ("emoji 🎉👩‍💻 and CJK 漢字かな 한국어", "emoji 🎉👩‍💻 and CJK 漢字かな 한국어", 0),
    ("combining e\u0301 a\u0308", "combining e\u0301 a\u0308", 0),
    ("emoji sequences 👨\u200d👩\u200d👧 🏳\ufe0f\u200d🌈", "emoji sequences 👨\u200d👩\u200d👧 🏳\ufe0f\u200d🌈", 0),
    ("brackets [201~ without ESC stay", "brackets [201~ without ESC stay", 0),
    ("", "", 0),
    # --- CSI
    ("a\x1b[2Jb", "ab", 1),
    ("\x1b[31mred\x1b[0m", "red", 2),
    ("\x1b[1;31;48;5;200mx", "x", 1),
    ("\x1b[?25lhidden cursor\x1b[?25h", "hidden cursor", 2),
    ("\x1b[?2004l", "", 1),  # turn bracketed paste off
    ("\x1b[>4;1m", "", 1),  # private marker
    ("\x1b[1 q", "", 1),  # intermediate byte (cursor shape)
    ("\x1b[!p", "", 1),  # soft reset: intermediate only
    ("start\x1b[201~rm -rf ~\r", "startrm -rf ~\n", 1),  # paste end marker
    ("\x1b[200~inner\x1b[201~", "inner", 2),
    ("\x1b[201", "", 1),  # incomplete at end of text
    ("\x1b[", "", 1),
    ("\x1b[12\x00~", "~", 2),  # malformed: CSI cut by NUL, NUL removed
    ("\x1b[Hello", "ello", 1),  # H is a final byte: that is what a terminal does
    # --- OSC
    ("\x1b]0;title\x07text", "text", 1),
    ("\x1b]2;title\x1b\\text", "text", 1),
    ("\x1b]52;c;cm0gLXJmIH4=\x07after", "after", 1),  # clipboard write
    ("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "link", 2),  # hyperlink
    ("\x1b]0;title\x9cok", "ok", 1),  # terminated by C1 ST
    ("\x1b]0;never ends", "", 1),  # unterminated: to end of text
    ("\x1b]0;cut\x1b[31mred", "red", 2),  # another ESC ends the string
    ("\x1b]0;cancel\x18kept", "kept", 1),  # CAN aborts
    ("\x1b]0;sub\x1akept", "kept", 1),  # SUB aborts
    # --- DCS / SOS / PM / APC
    ("\x1bPq#0;2;0;0;0#0~~@@\x1b\\after", "after", 1),  # sixel
    ("\x1bP+q544e\x1b\\", "", 1),  # XTGETTCAP
    ("\x1bXsos\x1b\\x", "x", 1),
    ("\x1b^pm\x1b\\x", "x", 1),
    ("\x1b_apc\x07still\x1b\\x", "x", 1),  # BEL does not end APC
    ("\x1bPunterminated", "", 1),
    # --- two-byte and other ESC forms
    ("\x1bcreset", "reset", 1),  # RIS: ESC c
    ("\x1b7save\x1b8", "save", 2),
    ("\x1b(Bascii", "ascii", 1),  # charset designation with intermediate
    ("\x1b#8", "", 1),
    ("\x1b=\x1b>", "", 2),
    ("\x1b\\stray ST", "stray ST", 1),
    ("alt\x1bx", "alt", 1),  # Alt+x
    ("\x1bOA", "A", 1),  # SS3: ESC O is the sequence, A is plain text afterwards
    ("trailing\x1b", "trailing", 1),  # lone trailing ESC (the cancel key)
    ("\x1b\x1b[A", "", 2),  # double ESC
    ("\x1b\n", "\n", 1),  # ESC then newline: newline kept
    ("\x1b(", "", 1),  # intermediate with no final
    ("\x1bé", "é", 1),
    # --- 8-bit C1
    ("\x9b31mred", "red", 1),  # single-char CSI
    ("\x9b201~x", "x", 1),  # single-char CSI paste end
    ("\x9d0;title\x07x", "x", 1),  # single-char OSC
    ("\x9d0;title\x9cx", "x", 1),
    ("\x90dcs\x9cx", "x", 1),  # single-char DCS
    ("\x9fapc\x1b\\x", "x", 1),
    ("a\x85b\x80c\x9cd", "abcd", 3),  # NEL, PAD, stray ST
    # --- C0 and DEL
    ("a\x00b", "ab", 1),
    ("abc\x08\x08\x08xyz", "abcxyz", 3),  # backspaces that would hide text
    ("a\x7fb", "ab", 1),
    ("\x03\x04\x15\x17\x1a", "", 5),  # ^C ^D ^U ^W ^Z
    ("bell\x07", "bell", 1),
    ("\x0b\x0c", "", 2),  # VT, FF
    ("\x1c\x1d\x1e\x1f", "", 4),
    # --- line endings
    ("a\r\nb", "a\nb", 0),
    ("a\rb", "a\nb", 0),
    ("a\r\r\nb", "a\n\nb", 0),
    ("a\n\rb", "a\n\nb", 0),
    ("\r", "\n", 0),
    # --- bidi
    ("abc\u202eevil\u202c", "abcevil", 2),
    ("\u2066x\u2069\u2067y\u2068", "xy", 4),
    ("\u202a\u202b\u202d", "", 3),
    ("marks \u200e\u200f\u061c", "marks ", 3),  # LRM, RLM, ALM: invisible too
    # --- invisible characters: text the person cannot see but the model reads
    ("ign\u200bore\u200c \u200dall", "ignore all", 3),  # ZWSP, ZWNJ, a ZWJ not between emoji
    ("\u2060\u2061\u2062\u2063\u2064", "", 5),  # word joiner, invisible operators
    ("\ufeffBOM and \u180e", "BOM and ", 2),
    ("hi\U000e0049\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065\U000e007f", "hi", 7),  # TAGs
    ("🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f", "🏴", 6),  # tag flag
    ("😀\U000e0100\U000e0101\U000e01ef", "😀", 3),  # bytes smuggled in selectors
    ("soft\u00adhyphen \u3164\uffa0 \u206a\u206f \ufff9a\ufffbb", "softhyphen   ab", 7),
    ("🎉\u200d", "🎉", 1),  # ZWJ with nothing to join
    ("a\u200d🎉", "a🎉", 1),
    ("🎉\u200d\u200b🎉", "🎉🎉", 2),  # a removed ZWSP does not make the ZWJ a joiner
    ("🎉\u200b\u200d🎉", "🎉\u200d🎉", 1),  # ... but the emoji are joined once it is gone
    ("keep FE0F ❤\ufe0f", "keep FE0F ❤\ufe0f", 0),  # emoji presentation selector is visible
    # --- Unicode line breaks become \n (not counted, like \r)
    ("a\u2028b\u2029c", "a\nb\nc", 0),
]


@pytest.mark.parametrize(("raw", "text", "removed"), CASES)
def test_sanitize_table(raw: str, text: str, removed: int) -> None:
    result = sanitize(raw)
    assert result.text == text
    assert result.removed == removed
    assert_safe(result.text)


def assert_safe(text: str) -> None:
    """The invariant: no character that can start or form a control sequence."""
    for ch in text:
        code = ord(ch)
        assert ch in "\n\t" or code >= 0x20, f"C0 {code:#x} survived in {text!r}"
        assert not 0x7F <= code <= 0x9F, f"DEL/C1 {code:#x} survived in {text!r}"
        assert not 0x202A <= code <= 0x202E, f"bidi {code:#x} survived"
        assert not 0x2066 <= code <= 0x2069, f"bidi {code:#x} survived"
        assert ch not in "\u200e\u200f\u061c\u2028\u2029", f"{code:#x} survived"
        if ch != "\u200d":
            assert invisible_kind(ch) is None, f"invisible {code:#x} survived in {text!r}"
    for i, ch in enumerate(text):
        if ch == "\u200d":  # a ZWJ survives only between two emoji
            assert 0 < i < len(text) - 1, f"stray ZWJ in {text!r}"
            before, after = text[i - 1], text[i + 1]
            assert _is_pictographic(before) or before == "\ufe0f", f"ZWJ after {before!r}"
            assert _is_pictographic(after), f"ZWJ before {after!r}"


def test_paste_end_marker_never_survives_any_wrapping() -> None:
    """Removal must not splice fragments into a new marker (e.g. ESC ESC [ ...)."""
    marker = "\x1b[201~"
    for prefix in ["", "\x1b", "\x1b[", "\x9b", "\x1b]", "\x00", "\x1b\x1b", "\u202e"]:
        for suffix in ["", "\x1b", "~", "\x07", "\x1b\\"]:
            out = sanitize(prefix + marker + suffix).text
            assert "\x1b" not in out and "\x9b" not in out
            assert "201~" not in out


def test_random_input_is_always_safe() -> None:
    """Seeded fuzz over an alphabet rich in sequence bytes: the invariant always holds
    and sanitizing twice changes nothing more (idempotent)."""
    rng = random.Random(20240601)
    alphabet = (
        [ESC, "[", "]", "P", "X", "^", "_", "\\", "\x07", "\x9b", "\x9c", "\x9d", "\x90", "\x18", "\x1a", "\r", "\n", "\t", "\x00", "\x7f", "\x85", "\u202e", "\u2066", "0", "1", ";", "?", " ", "~", "m", "a", "é", "漢", "🎉", "́",
         "\u200b", "\u200c", "\u200d", "\u200d", "\u200e", "\u2060", "\ufeff", "\u180e",
         "\u2028", "\u2029", "\u00ad", "\U000e0041", "\U000e007f", "\U000e0100", "\ufe0f",
         "👩", "💻"]
    )
    for _ in range(3000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        once = sanitize(raw)
        assert_safe(once.text)
        again = sanitize(once.text)
        assert again.text == once.text
        assert again.removed == 0


def _removed_on_its_own(ch: str) -> bool:
    code = ord(ch)
    return (
        0x202A <= code <= 0x202E
        or 0x2066 <= code <= 0x2069
        or ch in "\u200e\u200f\u061c\u2028\u2029"
        or invisible_kind(ch) is not None
    )


def test_unicode_is_kept_exactly_in_long_text() -> None:
    text = "".join(chr(c) for c in range(0xA0, 0x3000) if not _removed_on_its_own(chr(c))) * 2
    text += "".join(chr(c) for c in range(0xFB00, 0x10000) if not _removed_on_its_own(chr(c)))
    text += "".join(chr(c) for c in range(0x1F300, 0x1FAFF))
    assert sanitize(text).text == text


@pytest.mark.parametrize(("first", "last", "kind"), INVISIBLE)
def test_every_invisible_range_is_removed_and_named(first: int, last: int, kind: str) -> None:
    for code in {first, (first + last) // 2, last}:
        result = sanitize(f"a{chr(code)}b")
        assert result.text == "ab", hex(code)
        assert result.removed == 1
        assert result.notes == [f"removed 1 x {kind}"]


def test_random_text_with_hidden_payloads_is_always_visible_only() -> None:
    """Seeded property test: random printable text with invisible characters
    sprinkled in comes out as exactly the printable text (nothing hidden kept,
    nothing visible lost), and the removed count is the number sprinkled."""
    rng = random.Random(8_15)
    visible = "abc xyz\n\t漢字é🎉👩💻-@$/!#"
    hidden = [chr(c) for a, b, _ in INVISIBLE for c in (a, b)] + ["\u200e", "\u061c"]
    hidden.remove("\u200d")  # a ZWJ between emoji is visible: tested on its own
    for _ in range(2000):
        plain = "".join(rng.choice(visible) for _ in range(rng.randint(0, 30)))
        mixed, count = [], 0
        for ch in plain:
            while rng.random() < 0.2:
                mixed.append(rng.choice(hidden))
                count += 1
            mixed.append(ch)
        result = sanitize("".join(mixed))
        assert result.text == plain
        assert result.removed == count


def test_notes_describe_what_was_removed() -> None:
    result = sanitize("\x1b[2J\x1b[2Jx\x00\r\n\x1b]0;t")
    assert result.removed == 4
    joined = "\n".join(result.notes)
    assert "removed 2 x CSI sequence" in joined
    assert "C0 control" in joined
    assert "unterminated OSC" in joined
    assert "carriage return" in joined
    assert sanitize("plain").notes == []


@pytest.mark.parametrize(
    ("data", "offset"),
    [
        (b"\xff", 0),
        (b"ok \xc3\x28", 3),  # bad continuation byte
        (b"abc\xe2\x82", 3),  # truncated sequence at the end
        (b"\xed\xa0\x80", 0),  # encoded surrogate
        (b"\xc0\xaf", 0),  # overlong '/'
        (b"\xf4\x90\x80\x80", 0),  # above U+10FFFF
    ],
)
def test_decode_utf8_rejects_invalid_bytes(data: bytes, offset: int) -> None:
    with pytest.raises(InvalidMessage) as info:
        decode_utf8(data)
    assert info.value.message == f"content is not valid UTF-8 (byte {offset})"
    assert info.value.hint


def test_decode_utf8_accepts_valid_text() -> None:
    text = "héllo 漢字 🎉\n"
    assert decode_utf8(text.encode()) == text


def test_check_text_rejects_lone_surrogates() -> None:
    check_text("fine 🎉")
    for bad in ["\ud800", "a\udfffb", b"\xff".decode("utf-8", "surrogateescape")]:
        with pytest.raises(InvalidMessage, match="surrogate"):
            check_text(bad)
