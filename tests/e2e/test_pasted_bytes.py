"""Every byte a real CLI changes in a pasted message is declared in its profile
(issue 35), on all nine agents against the loopback model server.

A probe with what CLIs are known to touch (tabs, CRLF, trailing and leading
spaces, runs of inner spaces, an empty line, non-ASCII, a long line) is sent
through ``agentwrap send``; the text the model server received must be
exactly what agentwrap's declaration says it becomes
(:func:`agentwrap.delivery.framing.as_pasted`: agentwrap's own sanitizing, then
the profile's ``[input]`` byte-change keys, which agentwrap applies itself before
pasting so that what it verifies on screen and what reaches the model are the
text it means). A CLI that changes a byte its profile does not declare fails
here, with the lines that differ.
"""

from __future__ import annotations

import difflib
import uuid
from collections.abc import Callable

import pytest

from .agents import AGENT_NAMES, MORE_AGENTS
from .conftest import AgentSession

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def probe(marker: str) -> str:
    """One line per thing a CLI may change, each tagged so a difference says which."""
    return "\r\n".join([  # CRLF line ends: agentwrap's sanitizing makes them LF
        f"{marker} A tab:\tafter\t\ttwo",
        f"{marker} B trailing spaces:   ",
        f"{marker} C non-ascii: ü ñ 中文 🚀 e\u0301 Ω",
        f"{marker} D long: " + "0123456789" * 30,
        f"{marker} E inner   spaces,  two",
        f"    {marker} F leading spaces",
        "",
        f"{marker} G after an empty line\ttab",
        f"{marker} H the end",
    ])


def _arrived(text: str, marker: str) -> str:
    """The probe's lines as the model got them: from its first line to its last."""
    start = text.index(f"{marker} A")
    end = text.index(f"{marker} H the end") + len(f"{marker} H the end")
    return text[start:end]


@pytest.mark.parametrize("agent", [*AGENT_NAMES, *MORE_AGENTS])
def test_a_pasted_probe_reaches_the_model_as_the_profile_declares(make_session: Make,
                                                                  agent: str) -> None:
    from agentwrap.delivery.framing import as_pasted
    from agentwrap.detect.profiles import load_profile

    s = make_session(agent)
    s.start()
    s.wait_state("ready", timeout=120)
    marker = f"P{uuid.uuid4().hex[:8]}"
    content = probe(marker)
    res = s.send(content, "--wait", "--timeout", "120", timeout=150)
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    got = s.wait_received(f"{marker} H the end", timeout=90)
    assert len(got) == 1, f"{len(got)} requests carried the probe"
    arrived = _arrived(got[0], marker)
    expected = _arrived(as_pasted(content, load_profile(agent)), marker)
    diff = "\n".join(difflib.unified_diff(expected.split("\n"), arrived.split("\n"),
                                          "declared", "at the model", lineterm="", n=0))
    print(f"{agent}: {'as declared' if arrived == expected else 'DIFFERS'}\n{diff}")
    assert arrived == expected, f"{agent} changed bytes its profile does not declare:\n{diff}"
