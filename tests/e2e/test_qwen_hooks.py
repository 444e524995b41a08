"""Qwen Code's native hooks, end to end on the real CLI (issue 22).

``agentwrap run`` registers them through a private ``QWEN_HOME`` (Qwen Code
0.15.10 runs hooks from the user's settings.json only; agentwrap/agents/qwen.py):

* the session says which channel is active (``state --explain``), and the
  person's own Qwen settings file is left as it was;
* a prompt's turn: the hooks' signals (prompt submitted, turn end) reach the
  supervisor, and UserPromptSubmit fired again after each tool result is not
  taken for a new prompt (the handoff notes count one prompt);
* a permission request: the hook keeps the exact command and the dialog
  waits for the person; with an answer rule the hook answers it and no dialog
  opens.

(The hand-over inside a tool loop is tests/e2e/test_native_channels.py's.)
Waits are deadlines, never thresholds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import AgentSession
from .model_server import TOOL_COMMAND, TOOL_FILE
from .test_answering import answer, main_requests, wait_question
from .test_copilot_opencode_qwen import chat_tool_results
from .test_hook_questions import audit

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def start(make_session: Make, config: str = "") -> tuple[AgentSession, bytes]:
    s = make_session("qwen")
    if config:
        s.write_config(config)
    settings = s.home / ".qwen" / "settings.json"
    before = settings.read_bytes()
    s.start()
    st = s.wait_state("ready", timeout=120)
    assert st.get("channels") == ["hooks"], st
    return s, before


def test_qwen_hooks_signal_the_turn_and_ignore_the_tool_result_prompts(make_session: Make) -> None:
    from agentwrap.continuity.hooks import notes_file, read_json
    from agentwrap.sessions.signals import read_signal

    s, before = start(make_session)
    explain = s.cli("state", s.name, "--explain").stdout
    assert "typing, hooks" in explain and "private QWEN_HOME" in explain, explain
    assert (s.home / ".qwen" / "settings.json").read_bytes() == before  # theirs, unchanged
    # a turn with two tool calls: Qwen runs UserPromptSubmit for each of its three requests
    calls = json.dumps({"path": str(s.workdir)})
    res = s.send(f"[[call: list_directory {calls}]] look around", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    s.wait_until(lambda: len(main_requests(s)) >= 2, 60, "the tool result at the model")
    s.wait_state("ready", timeout=60)
    sig = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g.event in (
        "Stop", "Notification") and g, 30, "the turn end told by the hook")
    assert sig.state == "ready" and sig.agent == "qwen", sig
    notes = s.wait_until(lambda: (n := read_json(notes_file(s._paths(), s.name))).get(
        "prompts") and n, 30, "the prompt in the handoff notes")
    assert notes["prompts"] == 1, notes  # the tool result's UserPromptSubmit is no prompt
    assert "look around" in notes["goal"], notes
    log = s._paths().supervisor_log(s.name).read_text()
    assert not [ln for ln in log.splitlines() if "hook qwen" in ln and "failed" in ln], log[-2000:]


def test_qwen_permission_request_keeps_the_exact_command(make_session: Make) -> None:
    from agentwrap.answers.hook_questions import read_question

    s, _ = start(make_session)
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    q = wait_question(s)
    assert (q["kind"], q["tool"], q["command"]) == ("permission", "Shell", TOOL_COMMAND), q
    hq = s.wait_until(lambda: read_question(s._paths(), s.name), 30, "the hook's question")
    assert (hq.kind, hq.command, hq.tool_name) == ("permission", TOOL_COMMAND, "run_shell_command")
    assert not (s.workdir / TOOL_FILE).exists()
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_state("ready", timeout=60)
    assert not (s.workdir / TOOL_FILE).exists()


def test_qwen_a_rule_approves_through_the_hook(make_session: Make) -> None:
    s, _ = start(make_session, '[[answer_rules]]\nname = "touch"\ncommand = "touch *"\n'
                               'answer = { option = 1 }\n')
    seen = len(main_requests(s))
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 90, f"{TOOL_FILE} created")
    result = s.wait_until(lambda: next((t for r in main_requests(s)[seen:]
                                        for t in chat_tool_results(r.body)), None), 60,
                          "the tool result at the model")
    assert "denied" not in result.lower() and "reject" not in result.lower(), result
    s.wait_state("ready", timeout=60)
    lines: list[dict[str, Any]] = [a for a in audit(s) if a["event"] == "policy_answered"]
    assert [(a.get("via"), a["rule"], a["how"], a["command"]) for a in lines] == [
        ("hook", "touch", "allow", TOOL_COMMAND)], lines
    assert not [a for a in audit(s) if a["event"] in ("answer_requested", "answer_applied")]
