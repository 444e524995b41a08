"""The sanitizer: nothing a terminal or TUI would act on may survive."""

from __future__ import annotations

import random

import pytest

from agentwrap.errors import InvalidMessage
from agentwrap.sanitize import check_text, decode_utf8, sanitize

ESC = "\x1b"

# (input, expected text, expected removed count)
CASES: list[tuple[str, str, int]] = [
    # --- plain text is untouched
    ("hello world", "hello world", 0),
    ("tabs\tand\nnewlines\n", "tabs\tand\nnewlines\n", 0),
    ("emoji 🎉👩‍💻 and CJK 漢字かな 한국어", "emoji 🎉👩‍💻 and CJK 漢字かな 한국어", 0),
    ("combining e\u0301 a\u0308 and ZWJ \u200d", "combining e\u0301 a\u0308 and ZWJ \u200d", 0),
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
    ("keep marks \u200e\u200f", "keep marks \u200e\u200f", 0),  # LRM/RLM are not overrides
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
        [ESC, "[", "]", "P", "X", "^", "_", "\\", "\x07", "\x9b", "\x9c", "\x9d", "\x90", "\x18", "\x1a", "\r", "\n", "\t", "\x00", "\x7f", "\x85", "\u202e", "\u2066", "0", "1", ";", "?", " ", "~", "m", "a", "é", "漢", "🎉", "́"]
    )
    for _ in range(3000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        once = sanitize(raw)
        assert_safe(once.text)
        again = sanitize(once.text)
        assert again.text == once.text
        assert again.removed == 0


def test_unicode_is_kept_exactly_in_long_text() -> None:
    text = "".join(chr(c) for c in range(0xA0, 0x3000) if not 0x202A <= c <= 0x202E) * 2
    text = "".join(ch for ch in text if not 0x2066 <= ord(ch) <= 0x2069)
    assert sanitize(text).text == text


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
