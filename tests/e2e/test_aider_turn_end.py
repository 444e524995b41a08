"""Aider's turn end on the real Aider 0.86.2 (issue 37): ``ready`` comes from
its notifications command (agentwrap's marks the session's turn-end file), as
the prompt is drawn, never before it.

Each turn is typed straight into the pane and the screen is polled while the
reply streams. Asserted as order and cause, not as milliseconds: the file was
marked before the ``ready``; the ``ready``'s signal is the hook's (the mark),
not the quiet window; every frame captured after the ``ready`` shows the fresh
prompt (no ready before Aider takes keys); the turn passes through no
``unknown`` (the frame between the command and the prompt is busy); and a key
typed at the ``ready`` is echoed into the prompt.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

import pytest

from agentwrap.sessions.channels import turn_end_path
from agentwrap.sessions.registry import Registry
from agentwrap.sessions.turn_end import TURN_END_CHANNEL

from .conftest import AgentSession

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]
RULE = "─" * 10


def _transitions(s: AgentSession, after: float) -> list[tuple[float, str, str, str]]:
    db = sqlite3.connect(f"file:{s._paths().db_path}?mode=ro", uri=True, timeout=5)
    try:
        return list(db.execute(
            "SELECT at, state, signal, rule FROM state_transitions WHERE session = ? AND at > ?"
            " ORDER BY id", (s.name, after)))
    finally:
        db.close()


def _fresh_prompt(screen: str, tag: str) -> bool:
    """A lone ``>`` under the last rule (and Aider's list of files in the chat),
    with ``tag`` in the reply above the rule (not in the prompt's echo)."""
    lines = [ln.rstrip() for ln in screen.splitlines() if ln.strip()]
    rules = [i for i, ln in enumerate(lines) if ln.startswith(RULE)]
    if not rules or lines[-1] != ">":
        return False
    last = rules[-1]
    return all(not ln.startswith(">") for ln in lines[last + 1:-1]) \
        and any(tag in ln and "[[" not in ln for ln in lines[max(0, last - 6):last])


def test_ready_comes_from_the_turn_end_mark_and_never_before_the_prompt(make_session: Make) -> None:
    s = make_session("aider")
    s.start()
    s.wait_state("ready", timeout=90)
    reg = Registry(s._paths().db_path)
    try:
        assert TURN_END_CHANNEL in (reg.get(s.name).options.channels or ())
    finally:
        reg.close()
    mark = turn_end_path(s._paths(), s.name)
    assert mark.read_bytes() == b""  # no reply yet: the start's ready is the screen's
    for n in range(1, 4):
        tag = f"Turn {n} reply ends here."
        s.wait_until(lambda: _fresh_prompt(s.screen(), ""), 30, "an empty prompt")
        typed = time.time()
        s.type_keys(f"[[reply: Reply {n}. {tag}]] turn {n}")
        # agentwrap saw the draft: a fast turn then cannot fall between two of
        # its snapshots (ready -> ready, no transition) on a loaded machine
        s.wait_until(lambda since=typed: any(t[1] == "draft" for t in _transitions(s, since)), 30,
                     "the draft seen")
        sent = time.time()
        s.press("Enter")
        ready_at: float | None = None
        after_ready = 0
        deadline = time.monotonic() + 90
        while after_ready < 5 and time.monotonic() < deadline:
            captured = time.time()
            screen = s.screen()
            if ready_at is None:
                readies = [t for t in _transitions(s, sent) if t[1] == "ready"]
                if readies:
                    ready_at = readies[0][0]
            elif captured > ready_at:
                assert _fresh_prompt(screen, tag), \
                    f"turn {n}: a frame after the ready has no prompt:\n{screen}"
                after_ready += 1
            time.sleep(0.02)
        assert ready_at is not None, f"turn {n}: never ready:\n{s.screen()}"
        turn = _transitions(s, sent)
        first = next(t for t in turn if t[1] == "ready")
        assert (first[2], first[3]) == ("hook", "hook"), turn  # the mark, not the quiet window
        assert mark.stat().st_mtime <= first[0], "the ready came before the mark"
        assert len(mark.read_bytes()) == n  # one mark per reply
        states = [t[1] for t in turn if t[0] <= first[0]]
        assert "unknown" not in states, turn
        # keys are taken at the ready: one typed now is echoed into the prompt
        s.type_keys("z")
        s.wait_until(lambda: s.screen().rstrip().splitlines()[-1].rstrip() == "> z", 30,
                     "the probe key in the prompt")
        s.press("BSpace")
