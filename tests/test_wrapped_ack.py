"""Finding an ACK the agent's TUI wrapped onto the next row (issue 35.2).

The screens in tests/fixtures/wrapped/ are the real CLIs' own, captured by
tests/e2e/test_wrapped_ack.py in an 80-column pane: a ruler reply, then a
reply whose ``ACK`` ends one row and whose token starts the next, each TUI
with its own gutter (Copilot's scrollbar on the right, too). They are read
here with each agent's real profile, through the engine's own search
(:meth:`ScreenEvidence.find_ack`: outside the input box, below the echo):
the wrapped ACK is found; and the screen's own echoed block, its ACK request
wrapped, never counts as one, wherever it wraps (the false positives a
joined search could make).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import pytest
from conftest import ROOT

from agentwrap.config import DeliveryConfig
from agentwrap.delivery.evidence import ScreenEvidence
from agentwrap.delivery.framing import Injection
from agentwrap.delivery.replies import echo_end, find_ack
from agentwrap.detect.profiles import load_profile
from agentwrap.terminal.screen import Snapshot

SCREENS = ROOT / "tests" / "fixtures" / "wrapped"
AGENTS = sorted(p.stem for p in SCREENS.glob("*.txt"))
PATTERNS = (r"\bACK[: ]+{token}\b", r"\bACK: context received\b")


def compiled(token: str) -> list[re.Pattern[str]]:
    return [re.compile(p.replace("{token}", re.escape(token)), re.IGNORECASE) for p in PATTERNS]


@dataclass
class Sup:
    """What :meth:`ScreenEvidence.find_ack` reads of the supervisor: its last screen."""

    snap: Snapshot


def screen(agent: str) -> tuple[str, str]:
    """The captured screen and the token its last block asked an ACK for."""
    text = (SCREENS / f"{agent}.txt").read_text(encoding="utf-8")
    return text, re.findall(r'Reply "ACK ([0-9a-f]{8})"', text)[-1]


def look(agent: str, text: str, token: str) -> str:
    profile = load_profile(agent)
    evidence = ScreenEvidence(DeliveryConfig(), profile, lambda: 0.0)
    inj = Injection(token=token, text="", message_ids=(), ack_requested=True, mark=token)
    snap = Snapshot.from_text(text, cols=80, rows=len(text.splitlines()))
    return evidence.find_ack(Sup(snap), inj, compiled(token))  # type: ignore[arg-type]


def test_every_wrapping_cli_has_a_screen() -> None:
    assert {"claude", "cline", "codex", "copilot", "gemini", "kimi", "qwen"} <= set(AGENTS)


@pytest.mark.parametrize("agent", AGENTS)
def test_the_wrapped_ack_on_each_clis_screen_is_found(agent: str) -> None:
    text, token = screen(agent)
    rows = text.splitlines()
    assert any(a.rstrip(" ┃").endswith(" ACK") and b.strip(" ┃").startswith(token)
               for a, b in itertools.pairwise(rows)), "the fixture does not wrap there"
    assert all(token not in x or "ACK" not in x.split(token)[0][-5:] for x in rows
               if '"ACK' not in x), "one row holds the whole ACK: nothing to join"
    found = look(agent, text, token)
    assert found.endswith(f"s ACK {token}"), found
    assert found.startswith(("● step", "• step", "* step", "✦ step", "step")), found


@pytest.mark.parametrize("agent", AGENTS)
def test_the_echoed_request_never_counts_wherever_it_wraps(agent: str) -> None:
    """The reply cut off (the agent said nothing yet): the screen's echoed
    block, its 'Reply "ACK <token>"' row wrapped at every possible place (the
    TUI's wrap under its gutter, the terminal's mid-word cut, the header and
    end line scrolled off), is never an ACK."""
    text, token = screen(agent)
    rows = text.splitlines()
    request = next(i for i, x in enumerate(rows) if f'Reply "ACK {token}"' in x)
    end = next(i for i in range(request, len(rows)) if f"agentwrap context {token}]" in rows[i])
    gutter = rows[request][: len(rows[request]) - len(rows[request].lstrip())]
    line = rows[request].strip()
    for cut in range(1, len(line)):
        for wrapped in (
            [gutter + line[:cut].rstrip(), gutter + line[cut:].lstrip()],  # the TUI's wrap
            [(gutter + line)[: len(gutter) + cut], (gutter + line)[len(gutter) + cut :]],  # a cut
        ):
            echoed = [*rows[:request], *wrapped, *rows[request + 1 : end + 1]]
            assert look(agent, "\n".join(echoed), token) == "", (cut, wrapped)
            alone = wrapped  # the header and the end line scrolled off the top
            assert find_ack(alone, token, compiled(token), 80) == "", (cut, alone)


@pytest.mark.parametrize(("rows", "found"), [
    # the TUI's wrap under the reply's gutter
    (["● Done, step 39 ACK", "  9d98ee19"], "● Done, step 39 ACK 9d98ee19"),
    # inside a box: its sides are gutter too
    (["│ ● Done, step 39 ACK │", "│   9d98ee19           │"], "● Done, step 39 ACK 9d98ee19"),
    # the terminal's soft wrap of a full row, mid-token
    (["x" * 71 + " ACK 9d9", "8ee19"], "x" * 71 + " ACK 9d9 8ee19"),
    # one row: as it was always found
    (["  ● ACK 9d98ee19  "], "● ACK 9d98ee19"),
    # a blank row ends the paragraph: two paragraphs make no ACK
    (["● Done, step 39 ACK", "", "  9d98ee19"], ""),
    # a row that is not full is never joined mid-word
    (["● ACK 9d9", "8ee19"], ""),
    # another batch's token
    (["● Done, step 39 ACK", "  0badc0de"], ""),
])
def test_rows_are_joined_where_they_wrap_and_nowhere_else(rows: list[str], found: str) -> None:
    assert find_ack(rows, "9d98ee19", compiled("9d98ee19"), 80) == found


def test_the_echo_ends_at_its_last_row_however_it_wraps() -> None:
    rows = ["> [agentwrap", "  context 9d98ee19: 1 message]", "  hello", '  Reply "ACK',
            '  9d98ee19" once you have read this.', "  [end of agentwrap context",
            "  9d98ee19]", "", "● ACK 9d98ee19"]
    assert echo_end(rows, "9d98ee19") == 6
    assert echo_end(rows[:5], "9d98ee19") == 4  # the end line not drawn yet: the request
    assert echo_end(["● ACK 9d98ee19"], "9d98ee19") == -1
