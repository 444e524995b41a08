"""No passing ``ready`` between Enter and busy on the real Claude Code (issue 37).

When Enter empties Claude Code's box its session file still says ``idle`` from
the last turn, and the detector took that word over the spinner drawn a frame
later: 1 turn in 20 with its hooks, 4 in 24 with ``--no-channels``, a
``ready`` of ~126 ms in which a queued message was typed into a busy agent.
Each turn here types a prompt, presses Enter and reads the session's state
transitions: none may be ``ready`` between Enter and the first ``busy``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import AgentSession

TURNS = 6


def _busy_within(reg: Any, name: str, seen: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(tr.state == "busy" for tr in reg.transitions(name, seen)):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("channels", ["hooks", "no-channels"])
def test_no_ready_between_enter_and_busy_on_claude(
    make_session: Callable[..., AgentSession], channels: str,
) -> None:
    from agentwrap.sessions.registry import Registry

    s = make_session("claude")
    s.start(*(["--no-channels"] if channels == "no-channels" else []))
    st = s.wait_state("ready", timeout=90)
    assert ("hooks" in (st.get("channels") or [])) == (channels == "hooks"), st
    reg = Registry(s._paths().db_path)
    passing, turns = [], 0
    try:
        for i in range(TURNS):
            s.wait_state("ready", timeout=60)
            s.type_keys(f"Turn {i}. [[delay: 0.5]] [[reply: done-{i}-ok]]")
            time.sleep(0.5)  # Claude's paste detection; the box shows the draft
            seen = max((tr.id for tr in reg.transitions(s.name)), default=0)
            s.press("Enter")
            # a loaded machine: an Enter Claude did not take (no busy after 5 s, the box
            # still holds the prompt) is pressed again; the count runs from the first one
            for _ in range(3):
                if _busy_within(reg, s.name, seen, 5.0):
                    break
                s.press("Enter")
            s.wait_until(lambda i=i, seen=seen: any(tr.state == "busy" for tr in reg.transitions(s.name, seen))
                         and f"done-{i}-ok" in s.screen().replace(f"reply: done-{i}-ok", ""),
                         90, f"turn {i} busy and its reply drawn")
            s.wait_state("ready", timeout=60)
            turn = reg.transitions(s.name, seen)
            first_busy = next(tr.at for tr in turn if tr.state == "busy")
            passing += [(i, round(first_busy - tr.at, 3), tr.signal, tr.reason) for tr in turn
                        if tr.state == "ready" and tr.at < first_busy]
            turns += 1
    finally:
        reg.close()
    assert turns == TURNS
    assert passing == [], f"ready between Enter and busy (turn, s before busy, signal, reason): {passing}"
