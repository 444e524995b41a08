"""Aider's live channel on the real aider: a message sent while Aider waits on
the model reaches the model in Aider's *next request of the same turn*
through the ``--read`` file agentwrap owns, exactly once, and is never typed.

The model server scripts a two-request turn: the first reply is an edit whose SEARCH block matches nothing in the file in
the chat, so Aider reflects the error to the model at once (no dialog), which
is the request that must carry the message. The first reply is held until the
message is in the file, so no timing decides the outcome.
"""

from __future__ import annotations

import json
import stat
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .conftest import AgentSession, aider_against
from .model_server import ModelServer, Plan, ToolSpec

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]
FIRST_DELAY_S = 0.5
HOLD_MAX_S = 60.0
BAD_EDIT = (
    "Updating the readme.\n\nREADME.md\n```\n<<<<<<< SEARCH\nthis line is not in the file\n"
    "=======\nreplacement\n>>>>>>> REPLACE\n```\n"
)


class ReflectServer(ModelServer):
    """``[[reflect]]``: a failing edit, held back until the test says (at most
    ``HOLD_MAX_S``), then a plain answer to the reflection."""

    def __init__(self) -> None:
        super().__init__()
        self.stage = 0
        self.release = threading.Event()

    def _plan(self, api: str, body: Any, turn: Any, tools: list[ToolSpec], side: Any) -> Plan:
        if side is None and api == "chat":
            if self.stage == 0 and "[[reflect]]" in turn.text:
                self.stage = 1
                self.release.wait(HOLD_MAX_S)  # aider waits on the model meanwhile
                return Plan(text=BAD_EDIT, delay=FIRST_DELAY_S)
            if self.stage == 1:
                self.stage = 2
                return Plan(text="Understood; nothing else to change.")
        return super()._plan(api, body, turn, tools, side)


def _session(make_session: Make) -> AgentSession:
    return aider_against(make_session("aider"), ReflectServer())


def _channels(s: AgentSession, mid: str) -> list[str]:
    from agentwrap.service import Service

    with Service.open(s._paths()) as svc:
        return [a.channel for a in svc.message(mid).attempts]


def _bodies(s: AgentSession) -> list[tuple[float, str]]:
    return [(r.time, json.dumps(r.body, ensure_ascii=False)) for r in s.server.requests()
            if not r.side and r.body is not None and r.api == "chat"]


def test_message_sent_while_aider_waits_reaches_its_next_request_once(make_session: Make) -> None:
    s = _session(make_session)
    try:
        _run(s)
    except AssertionError:
        log = s._paths().supervisor_log(s.name)
        print("supervisor log:\n", log.read_text()[-6000:] if log.exists() else "(none)")
        raise


def _run(s: AgentSession) -> None:
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert "read-file" in (st.get("channels") or []), st
    live = s._paths().state_dir / "launch" / s.name / "agentwrap-messages.md"
    assert stat.S_IMODE(live.stat().st_mode) == 0o600
    assert stat.S_IMODE(live.parent.stat().st_mode) == 0o700
    assert not any(p.name == live.name for p in Path(s.workdir).rglob("*"))

    s.type_keys("Please fix the readme. [[reflect]]")
    time.sleep(0.5)
    s.press("Enter")
    s.wait_until(lambda: s.server.stage >= 1, 60, "the first request at the model")
    s.wait_state("busy", timeout=30)
    marker = f"RF{uuid.uuid4().hex[:8]}"
    sent = time.time()
    mid = s.send_id(f"build {marker} is green")
    # in the file (claimed through read-file) while aider still waits on the model
    s.wait_until(lambda: s.message(mid)["status"] != "pending", 30, "the message taken")
    assert _channels(s, mid) == ["read-file"], (  # written to the file, not typed
        f"taken by {_channels(s, mid)} while aider waited on the model; screen:\n{s.screen()}")
    in_file = time.time() - sent  # includes the `agentwrap send` process start
    assert s.server.stage == 1  # (the test never opens the file: every open counts)
    t0 = time.time()
    s.server.release.set()
    s.wait_until(lambda: any(marker in b for _, b in _bodies(s)), 60, "message at the model")
    s.wait_until(lambda: s.message(mid)["status"] in ("delivered", "acknowledged"), 30,
                 "delivered")
    s.wait_state("ready", timeout=60)
    time.sleep(1.0)
    bodies = _bodies(s)
    carrying = [i for i, (_, b) in enumerate(bodies) if marker in b]
    assert len(carrying) == 1, f"{len(carrying)} requests carried it"
    first = carrying[0]
    assert bodies[first][1].count(marker) == 1
    assert "[[reflect]]" in bodies[first - 1][1] and marker not in bodies[first - 1][1]
    assert "SEARCH" in bodies[first][1]  # the reflection of the failed edit: same turn
    from agentwrap.service import Service

    with Service.open(s._paths()) as svc:
        entry = svc.message(mid)
    assert [a.channel for a in entry.attempts] == ["read-file"], entry.attempts
    assert entry.attempts[0].outcome == "delivered"
    print("evidence:", entry.attempts[0].evidence)
    assert marker not in s.screen()  # never typed into the prompt
    assert live.read_text() == ""  # taken out once read
    body = bodies[first][1]
    at = body.index(marker)
    print("aider framed it:", body[max(0, at - 700): at + 200])
    s.press("C-d")  # aider quits: the session ends and its launch files go
    s.wait_until(lambda: s.state().get("liveness") == "ended", 60,
                 "the session ended")
    s.wait_until(lambda: not live.parent.exists(), 30, "the launch dir removed")
    print(f"aider: send -> claimed into the file (polled): {in_file:.2f} s;"
          f" first reply released -> next model request carrying it:"
          f" {bodies[first][0] - t0:.2f} s")
