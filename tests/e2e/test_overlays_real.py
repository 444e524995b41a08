"""Unknown is not ready, on the real Claude Code (issue 35).

Its rewind picker (Esc Esc) hides the input box while its session file says
the agent waits: a message queued then is not typed into the picker, not
failed (the readiness timeout passes several times), not escalated into
CLAUDE.md, and goes in once, as soon as the picker is closed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from .conftest import AgentSession

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def tag() -> str:
    return f"E2E{uuid.uuid4().hex[:8]}"


def test_a_message_waits_for_claudes_rewind_picker_to_close(make_session: Make) -> None:
    s = make_session("claude")
    # short timeouts: three readiness timeouts pass while the picker is open, and
    # two failed attempts would escalate the message into CLAUDE.md
    s.write_config("[delivery]\nreadiness_timeout_s = 2\nbackoff_s = [0.5]\nfallback_after = 2\n"
                   "notify_on_failure = false\n")
    s.start()
    s.wait_state("ready", timeout=90)
    first = tag()
    assert s.send(f"[[reply: Noted.]] first prompt {first}", "--wait", "--timeout", "90"
                  ).returncode == 0
    s.wait_received(first)
    s.wait_state("ready", timeout=60)
    s.press("Escape", "Escape")
    st = s.wait_until(lambda: (x := s.state())["rule"].startswith("overlay") and x, 30,
                      "the rewind picker read as an overlay")
    assert st["state"] == "unknown" and st["question"] is None, st
    assert st["rule"] == "overlay:rewind_picker", st
    assert "rewind" in st["reason"].lower(), st
    marker = tag()
    mid = s.send_id(f"sent while the rewind picker is open {marker}")
    # three readiness timeouts and more: the message waits, nothing is typed
    deadline = time.monotonic() + 8.0
    while time.monotonic() < deadline:
        assert s.state()["state"] == "unknown", s.state()
        time.sleep(0.5)
    screen = s.screen()
    assert "Rewind" in screen and marker not in screen, screen
    assert not s.received_with(marker)
    msg = s.message(mid)
    assert msg["status"] == "pending" and msg["attempts"] == 0, msg
    claude_md = s.workdir / "CLAUDE.md"
    assert not claude_md.exists() or marker not in claude_md.read_text()
    queue = s.cli_json("queue", s.name)
    assert [q["waiting_because"].startswith("an overlay is open") for q in queue] == [True], queue
    s.press("Escape")  # the picker closes: the box is back
    got = s.wait_received(marker, timeout=90)
    assert len(got) == 1, got
    assert s.wait_until(lambda: s.message(mid)["status"] == "delivered", 30, "delivered")
    assert s.message(mid)["attempts"] == 1
    assert not claude_md.exists() or marker not in claude_md.read_text()
