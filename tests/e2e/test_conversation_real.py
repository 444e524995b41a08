"""The whole conversation of a real Claude Code session (issue 42).

A message is delivered into Claude Code with an ACK asked; ``agentwrap history
NAME --conversation --json`` then shows it where it landed in Claude's own
transcript (the prompt that carried it is that message: one entry, not two),
acknowledged, and the model's reply after it. The transcript is found from the
path Claude's hooks reported, never from a path a caller names.

``AW_RECORD_TRANSCRIPT=DIR`` copies the transcript there (how
``tests/fixtures/transcripts/claude/`` was recorded).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import AgentSession

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def test_claude_conversation_shows_the_delivered_message_then_the_reply(make_session: Make) -> None:
    s = make_session("claude")
    s.start()
    s.wait_state("ready", timeout=90)
    marker = f"E2E{uuid.uuid4().hex[:8]}"
    res = s.send(f"status check {marker}", "--ack", "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    assert res.stdout.startswith("acknowledged"), res.stdout
    (mid,) = [m["id"] for m in s.history() if marker in m["content"]]

    def shown() -> dict | None:
        got = s.cli_json("history", s.name, "--conversation")
        kinds = [e["kind"] for e in got["entries"]]
        if got["source"] != "transcript" or "reply" not in kinds:
            return None
        return got

    got = s.wait_until(shown, 30, "the conversation read from Claude's transcript")
    entries = got["entries"]
    at = [i for i, e in enumerate(entries) if e["kind"] == "message" and e["messageId"] == mid]
    assert len(at) == 1, entries  # shown once: the transcript's prompt is that message
    msg = entries[at[0]]
    assert (msg["status"], msg["acked"]) == ("acknowledged", True), msg
    assert not [e for e in entries if e["kind"] == "prompt" and marker in e["text"]], entries
    replies = [e for e in entries[at[0] + 1:] if e["kind"] == "reply"]
    assert replies and "ACK" in replies[0]["text"], entries
    assert all(a["at"] <= b["at"] for a, b in itertools.pairwise(entries)), entries

    # a tool call: shown with its tool and path, after the message that asked for it
    (s.workdir / "notes.txt").write_text("nothing here\n")
    res = s.send('[[call: Read {"file_path": "notes.txt"}]] read it', "--no-ack", "--wait",
                 "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"

    def tool_shown() -> list[dict] | None:
        got = s.cli_json("history", s.name, "--conversation")["entries"]
        tools = [i for i, e in enumerate(got) if e["kind"] == "tool" and e["tool"] == "Read"]
        return got if tools and any(e["kind"] == "reply" for e in got[tools[0]:]) else None

    entries = s.wait_until(tool_shown, 60, "the tool call and its reply")
    kinds = [(e["kind"], e["tool"]) for e in entries]
    asked = next(i for i, e in enumerate(entries) if e["kind"] == "message" and "[[call" in e["text"])
    read = kinds.index(("tool", "Read"))
    assert asked < read and entries[read]["target"].endswith("notes.txt"), entries

    record = os.environ.get("AW_RECORD_TRANSCRIPT")
    if record:
        for path in (s.home / ".claude" / "projects").rglob("*.jsonl"):
            shutil.copy(path, Path(record) / "session.jsonl")
        Path(record, "conversation.json").write_text(json.dumps(entries, indent=1))
