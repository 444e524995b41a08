"""The pty backend's virtual screen: rows are re-rendered only where pyte
marked them dirty, which must give exactly what a full render gives."""

from __future__ import annotations

import random

from agentwrap.terminal.screen import Snapshot
from agentwrap.terminal.vscreen import VirtualScreen

PIECES = [
    b"plain text that wraps past the right margin of a narrow screen, twice over......",
    b"\r\nscrolled line\r\n", b"\n\n\n",
    b"\x1b[H\x1b[2J", b"\x1b[5;3Hmoved", b"\x1b[2K", b"\x1b[J", b"\x1b[1J",
    b"\x1b[3L", b"\x1b[2M", b"\x1b[4@", b"\x1b[3P", b"\x1b[5X",
    "wide 漢字かな ✓ ●".encode(), b"\x1b[2mfaint placeholder\x1b[22m bright",
    b"\x1b[31;1mred bold\x1b[0m", b"\x1b[2;8r\x1b[8;1H\n\n\x1b[r", b"\x1bM\x1bM",
    b"\x1b[?1049h", b"\x1b[?1049l", b"\x1b#8", b"\x1bc",
    "\x1b[10;1H╭────╮\r\n│ ❯ x │\r\n╰────╯".encode(),
]


def full_render(vs: VirtualScreen) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Lines and bright lines with every row rendered afresh."""
    scr = vs._screen
    rows = [vs._render_row(scr.buffer[y], scr.columns) for y in range(scr.lines)]
    snap = Snapshot.from_text("\n".join(r[0] for r in rows), cols=scr.columns, rows=scr.lines)
    return snap.lines, tuple(r[1] for r in rows)


def test_incremental_rows_match_a_full_render() -> None:
    rnd = random.Random(11)
    vs = VirtualScreen(40, 12)
    for i in range(600):
        for _ in range(rnd.randint(1, 4)):
            vs.feed(rnd.choice(PIECES))
        if i % 97 == 96:
            vs.resize(rnd.randint(20, 60), rnd.randint(5, 15))
        if i % 151 == 150:
            vs.discontinuity()
            vs.feed(rnd.choice(PIECES))
        snap = vs.snapshot()
        lines, bright = full_render(vs)
        assert snap.lines == lines, i
        assert snap.bright_lines() == bright, i


def test_rows_render_like_pyte_and_survive_an_orphaned_wide_char_stub() -> None:
    vs = VirtualScreen(20, 3)
    vs.feed("ab漢字cd\r\n✓ ok".encode())
    snap = vs.snapshot()
    assert list(snap.lines[:2]) == [x.rstrip() for x in vs._screen.display[:2]]
    # Deleting one cell shifts a wide character's stub to the front of a
    # cell pair: pyte's own Screen.display raises IndexError on that row.
    vs.feed(b"\x1b[1;3H\x1b[P")
    assert vs.snapshot().lines[0].startswith("ab")


def test_private_sgr_does_not_break_the_virtual_screen() -> None:
    """Codex sends CSI > 4 ; 1 m (modifyOtherKeys): not SGR, must be ignored."""
    screen = VirtualScreen(40, 5)
    screen.feed(b"\x1b[>4;1m\x1b[2mdim\x1b[0m typed")
    snap = screen.snapshot()
    assert snap.lines[0] == "dim typed"
    assert snap.bright_lines()[0] == "    typed"


def test_a_gap_resyncs_from_what_follows() -> None:
    screen = VirtualScreen(30, 4)
    screen.feed(b"\x1b[1;1Hold screen")
    screen.snapshot()
    screen.feed(b"\x1b[2;1Hlost half of a redr")
    screen.discontinuity()
    screen.feed(b"\x1b[3;1Hthe tail")
    snap = screen.snapshot()
    assert snap.lines[2] == "the tail"
    assert "old screen" not in snap.text() and "lost" not in snap.text()
    assert screen.resyncs == 1
