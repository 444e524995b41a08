"""The whole conversation of the agents read from their own records (issue 42).

Aider, Kimi Code and OpenCode run here (one real agent per two of the six new
readers: the machine is shared; Copilot CLI, Cline and pi are read from their
recorded files in ``tests/test_conversation_agents.py``): a message is
delivered with an ACK asked, then ``agentwrap history NAME --conversation``
(the page's conversation: the same service) reads the agent's own record, not
the screen, and shows the message where it landed, once, with the model's
reply after it.

``AW_RECORD_TRANSCRIPT=DIR`` copies every file the agent wrote under its home
and the project into ``DIR/<agent>/`` (how ``tests/fixtures/transcripts/<agent>/``
were recorded).
"""

from __future__ import annotations

import itertools
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import AgentSession

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def record(s: AgentSession) -> None:
    where = os.environ.get("AW_RECORD_TRANSCRIPT")
    if not where:
        return
    out = Path(where) / s.agent
    for base, name in ((s.home, "home"), (s.workdir, "project")):
        for path in base.rglob("*"):
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 4_000_000:
                dest = out / name / path.relative_to(base)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, dest)


def converse(make_session: Make, agent: str) -> None:
    s = make_session(agent)
    s.start()
    s.wait_state("ready", timeout=120)
    marker = f"E2E{uuid.uuid4().hex[:8]}"
    res = s.send(f"status check {marker}", "--ack", "--wait", "--timeout", "120")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    (mid,) = [m["id"] for m in s.history() if marker in m["content"]]
    s.wait_state("ready", timeout=60)
    if os.environ.get("AW_RECORD_TRANSCRIPT"):  # a tool call too, for the recorded file
        s.send("[[tool]] make the file", "--no-ack", "--wait", "--timeout", "120")
        made = s.workdir / "tool_ran.txt"

        def asked() -> bool:
            return made.exists() or s.state()["state"] in ("dialog", "waiting_input")

        s.wait_until(asked, 90, "the tool call")
        if not made.exists():
            s.press("Enter")  # its default: allow once
        s.wait_until(lambda: made.exists() and s.state()["state"] == "ready", 90, "ran")
        record(s)

    def shown() -> dict | None:
        got = s.cli_json("history", s.name, "--conversation")
        kinds = [e["kind"] for e in got["entries"]]
        return got if got["source"] == "transcript" and "reply" in kinds else None

    got = s.wait_until(shown, 30, f"the conversation read from {agent}'s own record")
    entries = got["entries"]
    at = [i for i, e in enumerate(entries) if e["kind"] == "message" and e["messageId"] == mid]
    assert len(at) == 1, entries  # shown once: the record's prompt is that message
    assert entries[at[0]]["status"] in ("acknowledged", "delivered"), entries[at[0]]
    assert not [e for e in entries if e["kind"] == "prompt" and marker in e["text"]], entries
    replies = [e for e in entries[at[0] + 1:] if e["kind"] == "reply"]
    assert replies and "ACK" in replies[0]["text"], entries
    assert all(a["at"] <= b["at"] for a, b in itertools.pairwise(entries)), entries


# one real agent per two readers (the machine is shared): the three unlike sources:
# a markdown log found by its config, a private home in the launch dir, a SQLite store
@pytest.mark.parametrize("agent", ["aider", "kimi", "opencode"])
def test_the_conversation_is_read_from_the_agent_s_own_record(make_session: Make,
                                                               agent: str) -> None:
    converse(make_session, agent)
