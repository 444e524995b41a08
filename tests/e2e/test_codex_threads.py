"""The thread the person's Codex TUI shows, followed (issue 24), on the real
Codex 0.169.0 under ``agentwrap run`` on its app-server.

agentwrap follows the person's thread: the first non-ephemeral one, then the
one ``/new`` starts (``thread/started``, non-ephemeral, reaches every
connection) or ``/resume`` goes back to (``thread/goal/cleared`` of that
thread is all a third connection hears). After ``/new`` a message reaches the
model once, in the new thread's conversation (the request carries no earlier
turn's text), and the session's state is the new thread's (a turn the person
types there is ``busy`` then ``ready`` from the server). After ``/resume`` of
the first thread, a message goes into that conversation again.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

import pytest

from .conftest import AgentSession

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]
ON = "[run]\ncodex_app_server = true\n\n"


def _marker() -> str:
    return f"E2E{uuid.uuid4().hex[:8]}"


def _requests_with(s: AgentSession, needle: str) -> list[str]:
    """The main model requests (whole bodies) whose newest input carries ``needle``."""
    return [json.dumps(r.body, ensure_ascii=False) for r in s.server.requests()
            if not r.side and r.body is not None and needle in json.dumps(r.body)]


def _type(s: AgentSession, text: str) -> None:
    s.type_keys(text)
    time.sleep(0.5)
    s.press("Enter")


def _acknowledged(s: AgentSession, text: str) -> None:
    res = s.send(text, "--ack", "--wait", "--timeout", "90")
    assert res.returncode == 0 and res.stdout.startswith("acknowledged"), res.stdout + s.screen()


def test_after_new_and_resume_messages_and_state_follow_the_thread_the_tui_shows(
    make_session: Make,
) -> None:
    s = make_session("codex")
    s.write_config(ON)
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert st["app_server"].startswith("on:"), st
    first = _marker()
    _acknowledged(s, f"in the first thread {first}")
    s.wait_until(lambda: first in s.screen(), 30, "the first block on screen")
    _type(s, "/new")
    s.wait_until(lambda: first not in s.screen(), 30, "the new thread on screen")
    # a turn the person types in the new thread: the state is the new thread's
    _type(s, "[[delay: 4]] [[reply: typed in the new one]]")
    busy = s.wait_state("busy", timeout=60)
    assert busy["signal"] == "structured" and "active" in busy["reason"], busy
    ready = s.wait_state("ready", timeout=60)
    assert ready["signal"] == "structured" and "idle" in ready["reason"], ready
    second = _marker()
    _acknowledged(s, f"in the new thread {second}")
    assert len(s.wait_received(second)) == 1
    bodies = _requests_with(s, second)
    assert len(bodies) == 1 and first not in bodies[0], bodies  # not the old conversation
    assert "typed in the new one" in bodies[0]  # the new thread's own history
    s.wait_until(lambda: second in s.screen(), 30, "the block shown in the new thread")
    # /resume of the first thread (the picker lists the newest first)
    _type(s, "/resume")
    s.wait_until(lambda: "Resume a previous session" in s.screen(), 30, "the picker")
    s.press("Down")
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: first in s.screen(), 30, "the first thread on screen again")
    third = _marker()
    _acknowledged(s, f"back in the first thread {third}")
    assert len(s.wait_received(third)) == 1
    bodies = _requests_with(s, third)
    assert len(bodies) == 1 and first in bodies[0] and second not in bodies[0], bodies
    s.wait_until(lambda: third in s.screen(), 30, "the block shown in the resumed thread")
