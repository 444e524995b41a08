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

An agent's start is the dearest step, so the probe rides the one start of each
agent's end-to-end test where it has one (:data:`RIDES`: the six agents of
:data:`MORE_AGENTS`, each checked there by :func:`check_pasted_probe`); the
four of :data:`AGENT_NAMES` start for it here. The table is held whole: every
agent is probed exactly once, here or where it rides.
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


def check_pasted_probe(s: AgentSession) -> None:
    """The probe sent to ``s`` (started, ready) reaches the model once, exactly as
    its profile declares; ``s`` is ready again after."""
    from agentwrap.delivery.framing import as_pasted
    from agentwrap.detect.profiles import load_profile

    agent = s.agent
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
    s.wait_state("ready", timeout=60)


#: The agents whose probe rides another test's start: that test's module and name.
RIDES: dict[str, tuple[str, str]] = {
    **{a: ("test_copilot_opencode_qwen.py",
           "test_one_start_delivers_keeps_drafts_and_syntax_answers_dialogs_and_sees_a_kill")
       for a in ("copilot", "opencode", "qwen")},
    **{a: ("test_cline_kimi.py", "test_more_agent_end_to_end") for a in ("cline", "kimi")},
    "pi": ("test_pi.py", "test_pi_end_to_end"),
}


def test_every_agent_is_probed_once_here_or_where_it_rides() -> None:
    """No agent left out, none probed twice; each ride's test calls the probe
    (read from its source: no agent starts for this)."""
    import ast
    import importlib
    from pathlib import Path

    assert not set(RIDES) & set(AGENT_NAMES)
    assert sorted([*AGENT_NAMES, *RIDES]) == sorted([*AGENT_NAMES, *MORE_AGENTS])
    for agent, (module, name) in RIDES.items():
        tree = ast.parse((Path(__file__).parent / module).read_text())
        test = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
        calls = [n.func.id for n in ast.walk(test) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name)]
        assert "check_pasted_probe" in calls, (agent, module, name)
        if any("parametrize" in ast.dump(d) for d in test.decorator_list):  # over its AGENTS
            ride = importlib.import_module(f".{module.removesuffix('.py')}", __package__)
            assert agent in ride.AGENTS, (agent, module)
        else:
            assert agent in name, (agent, module, name)


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_a_pasted_probe_reaches_the_model_as_the_profile_declares(make_session: Make,
                                                                  agent: str) -> None:
    s = make_session(agent)
    s.start()
    s.wait_state("ready", timeout=120)
    check_pasted_probe(s)
