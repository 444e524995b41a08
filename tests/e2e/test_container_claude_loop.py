"""Real Claude Code in a real container (issue 39), mid-turn and without its supervisor.

One agent start for both cases (the container suite's time is CI's):

* **tool-loop hand-over inside**: a message sent while Claude runs tools reaches the
  next model request once, through the hook inside the container (its client in the
  mounted box folder, the supervisor's socket there), never typed;
* **continuity after ``kill -9`` of the supervisor**: the container and the agent in it
  keep running (the pane's ``exec`` client is tmux's, the agent the engine's); a
  message queued while nobody supervises waits, ``agentwrap adopt`` starts a new
  supervisor, whose hook server binds the box folder's socket again, and the message
  is delivered once.

The loop model server and its helpers are tests/e2e/test_native_channels.py's.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest
from support import container as box

from .conftest import AgentSession
from .test_container_claude import PASSED, container_name, into_a_box
from .test_native_channels import STEPS, _attempts, _bodies, _session, tag

pytestmark = [pytest.mark.e2e, pytest.mark.container]
Make = Callable[..., AgentSession]


@pytest.fixture(scope="module")
def image(container: None) -> str:
    return box.build_images().agent


@pytest.fixture
def looping_claude_in_a_box(make_session: Make, image: str) -> Iterator[AgentSession]:
    s = _session(make_session, "claude")  # the loop server, the agent pointed at it
    into_a_box(s, image, PASSED)
    try:
        yield s
    finally:
        box.remove(container_name(s))


def supervisor_pid(s: AgentSession) -> int | None:
    from agentwrap.sessions.registry import Registry

    reg = Registry(s._paths().db_path)
    try:
        return reg.get(s.name).supervisor_pid
    finally:
        reg.close()


def claude_inside(s: AgentSession) -> list[str]:
    out = box.podman("exec", container_name(s), "ps", "-eo", "pid,args", check=False).stdout
    return [line for line in out.splitlines() if "claude" in line]


def test_a_tool_loops_hand_over_inside_and_an_adopted_supervisor_delivers_once(
        looping_claude_in_a_box: AgentSession) -> None:
    s = looping_claude_in_a_box
    s.start()
    st = s.wait_state("ready", timeout=120)
    assert "hooks" in (st.get("channels") or []), st
    assert box.running(container_name(s))

    # a message sent mid-loop: in the next tool-result request, once, by the hook inside
    s.type_keys("Look around please. [[loop]]")
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: sum(b[2] for b in _bodies(s)) >= 1, 90, "first tool result")
    marker = tag()
    mid = s.send_id(f"build {marker} is green")
    s.wait_until(lambda: any(marker in b[1] for b in _bodies(s)), 90, "message at the model")
    carrying = next(b for b in _bodies(s) if marker in b[1])
    assert carrying[2], "not in a tool-result request"
    s.wait_until(lambda: s.server.step == -1 and sum(b[2] for b in _bodies(s)) >= STEPS, 120,
                 "the loop's end")
    s.wait_state("ready", timeout=120)
    assert _bodies(s)[-1][1].count(marker) == 1
    status, channels_used = _attempts(s, mid)
    assert status in ("delivered", "acknowledged") and channels_used == ["hook"], (
        status, channels_used)

    # kill -9 of the supervisor: the container and the agent in it go on
    inside = claude_inside(s)
    assert inside, "claude not running inside"
    pid = supervisor_pid(s)
    assert pid
    os.kill(pid, signal.SIGKILL)
    s.wait_until(lambda: s.state().get("liveness") != "running", 30, "the supervisor seen gone")
    assert box.running(container_name(s)) and claude_inside(s) == inside
    later = tag()
    queued = s.send_id(f"while nobody watched {later}")
    assert not any(later in b[1] for b in _bodies(s))
    res = s.cli("adopt", s.name)
    assert res.returncode == 0, f"{res.stdout}{res.stderr}"
    new = supervisor_pid(s)
    assert new and new != pid
    s.wait_until(lambda: _attempts(s, queued)[0] in ("delivered", "acknowledged"), 120,
                 "the queued message delivered by the adopted supervisor")
    s.wait_until(lambda: any(later in b[1] for b in _bodies(s)), 60, "it reached the model")
    s.wait_state("ready", timeout=120)
    assert sum(b[1].count(later) for b in _bodies(s)[-1:]) == 1  # once, in the last request
    assert len(_attempts(s, queued)[1]) == 1, _attempts(s, queued)
    assert claude_inside(s) == inside  # the same agent, adopted, not restarted
