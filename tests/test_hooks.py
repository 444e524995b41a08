"""``agentwrap hook AGENT EVENT``: the native-hook handlers, fed the JSON the real
CLIs sent (tests/fixtures/hooks/<agent>/<Event>.json, captured by
scripts/capture_hooks.py; see the README there).

Context events must answer in exactly the shape each agent reads, take the
session's messages once and in priority order, and leave what does not fit
queued; signal events must answer nothing and leave a signal for the
supervisor; and whatever goes wrong (locked or missing database, unknown
session, garbage on stdin) the hook prints nothing and exits 0.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, AwEnv

from agentwrap.continuity.hooks import START_EVENTS
from agentwrap.message import NewMessage, Phase, Priority, Source, Status
from agentwrap.service import Service
from agentwrap.sessions.channels import START_CONTEXT
from agentwrap.sessions.signals import SIGNAL_STATES, read_signal
from agentwrap.surfaces.hooks.handler import handle
from agentwrap.surfaces.hooks.protocol import (
    CONTEXT,
    EVENTS,
    FLAT_CONTEXT,
    MAX_CONTEXT_CHARS,
    QUESTION,
    TEXT_ONLY_QUESTIONS,
    action,
)

FIXTURES = ROOT / "tests" / "fixtures" / "hooks"
CASES = sorted((p.parent.name, p) for p in FIXTURES.glob("*/*.json"))


def event_of(path: Path) -> str:
    name = path.name.removesuffix(".json")
    if name in EVENTS.get(path.parent.name, {}):  # OpenCode's: tool.execute.after
        return name
    return name.split(".")[0]  # Notification.permission_prompt.json -> Notification


def payload(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data




def env_of(aw: AwEnv, session: str | None = "fake") -> dict[str, str]:
    env = dict(aw.env)
    env.pop("AGENTWRAP_SESSION", None)
    if session is not None:
        env["AGENTWRAP_SESSION"] = session
    return env


def send(svc: Service, content: str, prio: Priority = Priority.NORMAL, **kw: Any) -> str:
    return svc.send(NewMessage(session="fake", content=content, source=Source.WEBHOOK,
                               source_id="ci", priority=prio, **kw)).message.id


def startup(svc: Service, content: str, **kw: Any) -> str:
    """Start-up context, as `run --context FILE` queues it (agentwrap's own)."""
    msg, _ = svc.store.enqueue(NewMessage(
        session="fake", content=content, source=Source.SYSTEM, source_id="context:notes.md",
        priority=Priority.STARTUP, **kw), internal=True)
    return msg.id


def context_of(out: str, event: str, agent: str = "claude") -> str:
    """The additionalContext of a hook's answer, checking the exact shape ``agent`` reads."""
    answer = json.loads(out)
    if agent in FLAT_CONTEXT:  # Copilot, Cline: top-level only (hookSpecificOutput is ignored)
        assert list(answer) == [FLAT_CONTEXT[agent]]
        text = answer[FLAT_CONTEXT[agent]]
        assert isinstance(text, str) and 0 < len(text) <= MAX_CONTEXT_CHARS
        return text
    assert list(answer) == ["hookSpecificOutput"]  # top-level additionalContext is ignored
    specific = answer["hookSpecificOutput"]
    assert sorted(specific) == ["additionalContext", "hookEventName"]
    assert specific["hookEventName"] == event
    text = specific["additionalContext"]
    assert isinstance(text, str) and 0 < len(text) <= MAX_CONTEXT_CHARS
    return text


def test_fixtures_cover_the_events_we_use() -> None:
    have = {(agent, event_of(p)) for agent, p in CASES}
    for agent, events in EVENTS.items():
        for event, kind in events.items():
            if (agent, event) == ("claude", "PostToolUse") or kind in (CONTEXT, QUESTION) \
                    or kind in SIGNAL_STATES:
                assert (agent, event) in have, f"no captured {agent} {event}"


@pytest.mark.parametrize(("agent", "path"), CASES, ids=[f"{a}-{p.stem}" for a, p in CASES])
def test_every_captured_event(aw: AwEnv, svc: Service, agent: str, path: Path) -> None:
    event = event_of(path)
    raw = path.read_bytes()
    mid = send(svc, "CI failed on main")
    todo = action(agent, event, payload(path))
    out = handle(agent, event, raw, env_of(aw))
    if event in START_EVENTS:  # start-up context only; a message waits to start a turn
        assert out == ""
        assert svc.get(mid).status is Status.PENDING
        return
    if todo == CONTEXT:
        text = context_of(out, event, agent)
        assert "[webhook:ci] CI failed on main" in text
        assert svc.get(mid).status is Status.DELIVERED
        assert svc.history("fake")[0].channel == "hook"
        return
    assert out == ""
    assert svc.get(mid).status is Status.PENDING  # only context events take messages
    sig = read_signal(aw.paths, "fake")
    if todo is None or (todo == QUESTION and agent in TEXT_ONLY_QUESTIONS):
        assert sig is None  # (Copilot asks about a request only after its hook: no signal)
    else:  # a question no rule answers is a permission prompt (tests/test_hook_questions.py)
        want = "permission_prompt" if todo == QUESTION else todo
        assert sig is not None and (sig.signal, sig.agent, sig.event) == (want, agent, event)
        assert sig.state == SIGNAL_STATES[want] and sig.source == "hook"


def test_signals_say_what_the_agent_does(aw: AwEnv, svc: Service) -> None:
    cases = {
        ("claude", "UserPromptSubmit.json"): "busy",
        ("claude", "Stop.json"): "ready",
        ("claude", "Notification.permission_prompt.json"): "waiting_input",
        ("codex", "PermissionRequest.json"): "waiting_input",
        ("gemini", "BeforeAgent.json"): "busy",
        ("gemini", "AfterAgent.json"): "ready",
        ("gemini", "Notification.ToolPermission.json"): "waiting_input",
        ("qwen", "UserPromptSubmit.json"): "busy",
        ("qwen", "Stop.json"): "ready",
        ("qwen", "Notification.permission_prompt.json"): "waiting_input",
        ("qwen", "PermissionRequest.json"): "waiting_input",
        ("qwen", "Notification.idle_prompt.json"): "ready",
        ("copilot", "userPromptSubmitted.json"): "busy",
        ("copilot", "agentStop.json"): "ready",
        ("copilot", "notification.permission_prompt.json"): "waiting_input",
        ("cline", "TaskStart.json"): "busy",
        ("cline", "TaskComplete.json"): "ready",
        ("cline", "SessionShutdown.json"): "ready",  # a turn cancelled with Esc
        ("kimi", "UserPromptSubmit.json"): "busy",
        ("kimi", "Stop.json"): "ready",
        ("kimi", "PermissionRequest.json"): "waiting_input",
        ("kimi", "Interrupt.json"): "ready",
        ("opencode", "chat.message.json"): "busy",
        ("opencode", "session.idle.json"): "ready",
        ("opencode", "permission.asked.json"): "waiting_input",
        ("opencode", "question.asked.json"): "waiting_input",
    }
    for (agent, name), state in cases.items():
        path = FIXTURES / agent / name
        assert handle(agent, event_of(path), path.read_bytes(), env_of(aw)) == ""
        sig = read_signal(aw.paths, "fake")
        assert sig is not None and sig.state == state, (agent, name)
    idle = payload(FIXTURES / "claude" / "Notification.idle_prompt.json")
    assert handle("claude", "Notification", json.dumps(idle).encode(), env_of(aw)) == ""
    sig = read_signal(aw.paths, "fake")
    assert sig is not None and (sig.signal, sig.state) == ("idle_prompt", "ready")
    assert sig.detail == "Claude is waiting for your input"
    # a notification of another kind changes nothing
    other = {**idle, "notification_type": "auth_success"}
    assert handle("claude", "Notification", json.dumps(other).encode(), env_of(aw)) == ""
    assert read_signal(aw.paths, "fake") == sig


def test_drained_once_highest_priority_first(aw: AwEnv, svc: Service) -> None:
    raw = (FIXTURES / "codex" / "PostToolUse.json").read_bytes()
    low = send(svc, "low", Priority.LOW)
    normal = send(svc, "normal")
    high = send(svc, "high", Priority.HIGH, require_ack=True)
    text = context_of(handle("codex", "PostToolUse", raw, env_of(aw)), "PostToolUse")
    lines = text.splitlines()
    assert lines[1:4] == ["[webhook:ci] high", "[webhook:ci] normal", "[webhook:ci] low"]
    token = svc.get(high).batch_id
    assert token and lines[0].startswith(f"[agentwrap context {token}: 3 messages")
    assert lines[4] == f'Reply "ACK {token}" once you have read this.'  # asked by `high`
    assert lines[-1] == f"[end of agentwrap context {token}]"
    assert "more" not in text
    assert {svc.get(m).status for m in (low, normal, high)} == {Status.DELIVERED}
    assert handle("codex", "PostToolUse", raw, env_of(aw)) == ""  # nothing left to take
    consumed = [e for e in svc.events(0, session="fake") if e.kind == "session.consumed"]
    assert len(consumed) == 1 and consumed[0].data["channel"] == "hook"


@pytest.mark.parametrize(("agent", "between", "end", "field"), [
    ("claude", "PostToolBatch", "Stop", "last_assistant_message"),
    ("codex", "PostToolUse", "Stop", "last_assistant_message"),
    ("gemini", "AfterTool", "AfterAgent", "prompt_response"),
    ("qwen", "PostToolUse", "Stop", "last_assistant_message"),
])
def test_the_ack_in_the_reply_at_turn_end(aw: AwEnv, svc: Service, agent: str, between: str,
                                          end: str, field: str) -> None:
    asked = send(svc, "please confirm", require_ack=True)
    raw = (FIXTURES / agent / f"{between}.json").read_bytes()
    text = context_of(handle(agent, between, raw, env_of(aw)), between)
    token = svc.get(asked).batch_id
    assert token and f'Reply "ACK {token}"' in text
    other = send(svc, "typed elsewhere")  # pending: an ACK never touches it
    reply = {**payload(FIXTURES / agent / f"{end}.json"), field: f"Noted.\n\nACK {token}"}
    assert handle(agent, end, json.dumps(reply).encode(), env_of(aw)) == ""
    m = svc.get(asked)
    assert m.status is Status.ACKNOWLEDGED and m.detail == "acknowledged (seen) through hook"
    assert svc.get(other).status is Status.PENDING
    sig = read_signal(aw.paths, "fake")
    assert sig is not None and sig.signal == "turn_end"
    # the same reply again, or an ACK of a batch no hook handed over: nothing more happens
    assert handle(agent, end, json.dumps(reply).encode(), env_of(aw)) == ""
    stray = {**reply, field: "ACK 0badc0de"}
    assert handle(agent, end, json.dumps(stray).encode(), env_of(aw)) == ""
    assert svc.get(other).status is Status.PENDING


def _typed_and_submitted(svc: Service, content: str, token: str) -> str:
    """A message the typing path pasted and submitted under ``token``, its ACK
    awaited (in flight, phase submitted), as the engine leaves it."""
    mid = send(svc, content, require_ack=True)
    (claimed,) = svc.store.claim_batch("fake", token, 0)
    assert claimed.id == mid
    svc.store.set_phase(token, Phase.SUBMITTED)
    return mid


def _turn_end(agent: str, end: str, field: str, reply: str) -> bytes:
    """``agent``'s turn-end payload with ``reply`` where it carries the reply."""
    data = payload(FIXTURES / agent / f"{end}.json")
    if agent == "cline":
        return json.dumps({**data, "turn": {**data["turn"], field: reply}}).encode()
    return json.dumps({**data, field: reply}).encode()


TURN_ENDS = [
    ("claude", "Stop", "last_assistant_message"),
    ("codex", "Stop", "last_assistant_message"),
    ("gemini", "AfterAgent", "prompt_response"),
    ("qwen", "Stop", "last_assistant_message"),
    ("cline", "TaskComplete", "outputText"),
]


@pytest.mark.parametrize(("agent", "end", "field"), TURN_ENDS, ids=[a for a, _, _ in TURN_ENDS])
def test_the_reply_at_turn_end_acknowledges_a_typed_batch(
    aw: AwEnv, svc: Service, agent: str, end: str, field: str
) -> None:
    """Issue 35.2: a typed batch awaiting its ACK is acknowledged by the reply
    the turn-end hook carries, whole, however the TUI wrapped it on screen
    (the screen search then had no ACK to find, and the message was typed
    twice more). Only a submitted batch: one still being typed (pasting) is
    not the model's yet, and an ACK of it proves nothing; nor is the
    same ACK taken twice."""
    mid = _typed_and_submitted(svc, "typed, then wrapped", "9d98ee19")
    pasting = send(svc, "still being typed", require_ack=True)
    svc.store.claim_batch("fake", "0badc0de", 0)
    svc.store.set_phase("0badc0de", Phase.PASTING)
    reply = "Done: every step passed, step 39 ACK 9d98ee19. And ACK 0badc0de."
    assert handle(agent, end, _turn_end(agent, end, field, reply), env_of(aw)) == ""
    m = svc.get(mid)
    assert m.status is Status.ACKNOWLEDGED and m.detail == "acknowledged (seen) through hook"
    assert svc.get(pasting).status is Status.DELIVERING
    assert handle(agent, end, _turn_end(agent, end, field, reply), env_of(aw)) == ""
    assert svc.get(mid).status is Status.ACKNOWLEDGED


def _copilot_transcript(path: Path, *events: tuple[str, dict[str, Any]]) -> None:
    """A Copilot CLI ``events.jsonl`` (the shape 1.0.102 writes: ``type``, ``data``)."""
    with path.open("a", encoding="utf-8") as f:
        for kind, data in events:
            f.write(json.dumps({"type": kind, "data": data, "id": "x"}) + "\n")


def _agent_stop(stop: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The ``hook.start`` event Copilot writes for an agentStop hook (its input's
    ``timestamp`` is the payload's)."""
    return "hook.start", {"hookType": "agentStop", "input": {"timestamp": stop["timestamp"]}}


def test_copilots_ack_is_read_from_its_transcript(aw: AwEnv, svc: Service, tmp_path: Path) -> None:
    """Copilot's agentStop carries no reply, only ``transcriptPath``: the reply is
    what the model said since the last user message there, up to that hook's
    start; the words asking for the ACK (in the tool result the hook added them
    to) are never taken for one."""
    asked = send(svc, "please confirm", require_ack=True)
    raw = (FIXTURES / "copilot" / "postToolUse.json").read_bytes()
    text = context_of(handle("copilot", "postToolUse", raw, env_of(aw)), "postToolUse", "copilot")
    token = svc.get(asked).batch_id
    assert token and f'Reply "ACK {token}"' in text
    log = tmp_path / "events.jsonl"
    stop = {**payload(FIXTURES / "copilot" / "agentStop.json"), "transcriptPath": str(log)}
    first = {**stop, "timestamp": 1}
    _copilot_transcript(
        log, ("user.message", {"content": f"an older turn: ACK {token}"}),
        ("assistant.message", {"content": f"ACK {token}", "toolRequests": []}),
        ("user.message", {"content": "look around"}),
        ("assistant.message", {"content": "", "toolRequests": [{"name": "view"}]}),
        ("tool.execution_complete", {"result": {"content": f"README\n{text}"}}),
        ("assistant.turn_end", {"turnId": "1"}), _agent_stop(first))
    assert handle("copilot", "agentStop", json.dumps(first).encode(), env_of(aw)) == ""
    assert svc.get(asked).status is Status.DELIVERED  # asked in the tool result, not answered
    _copilot_transcript(log, ("assistant.message", {"content": f"Noted.\n\nACK {token}"}),
                        ("assistant.turn_end", {"turnId": "2"}), _agent_stop(stop),
                        ("assistant.message", {"content": "ACK 0badc0de (a later turn)"}))
    assert handle("copilot", "agentStop", json.dumps(stop).encode(), env_of(aw)) == ""
    m = svc.get(asked)
    assert m.status is Status.ACKNOWLEDGED and m.detail == "acknowledged (seen) through hook"
    # a path that is no regular file, or none: nothing, and no failure
    for bad in (str(tmp_path), str(tmp_path / "missing.jsonl"), "", 7):
        assert handle("copilot", "agentStop", json.dumps({**stop, "transcriptPath": bad}).encode(),
                      env_of(aw)) == ""


def test_a_transcript_is_read_again_until_the_hooks_own_start_is_there(tmp_path: Path) -> None:
    """Copilot writes its events a moment after they happen: the reply counts
    once the file shows the turn-end hook's start (at most ``wait_s``)."""
    import threading

    from agentwrap.surfaces.hooks.transcript import reply_from

    log = tmp_path / "events.jsonl"
    stop = {"timestamp": 42}
    _copilot_transcript(log, ("user.message", {"content": "hi"}))
    later = threading.Timer(0.3, _copilot_transcript, (
        log, ("assistant.message", {"content": "ACK 0123abcd"}), _agent_stop(stop)))
    later.start()
    try:
        assert reply_from(str(log), 42, wait_s=30) == "ACK 0123abcd"
    finally:
        later.cancel()
    assert reply_from(str(log), 7, wait_s=0) == "ACK 0123abcd"  # not there: what is there


def test_a_transcripts_tail_is_read_from_a_line_start(tmp_path: Path) -> None:
    from agentwrap.surfaces.hooks import transcript

    log = tmp_path / "events.jsonl"
    _copilot_transcript(log, ("user.message", {"content": "x" * 100}),
                        ("assistant.message", {"content": "early words"}))
    cut = log.stat().st_size - 10  # the tail starts inside the assistant line: it is skipped
    _copilot_transcript(log, ("assistant.message", {"content": "ACK 0123abcd"}))
    old, transcript.MAX_TAIL = transcript.MAX_TAIL, log.stat().st_size - cut
    try:
        assert transcript.reply_from(str(log)) == "ACK 0123abcd"
    finally:
        transcript.MAX_TAIL = old


def test_qwens_prompt_event_after_a_tool_result_is_not_a_prompt(aw: AwEnv, svc: Service) -> None:
    """Qwen Code runs UserPromptSubmit again, with an empty prompt, each time a
    tool result goes back to the model: inside the turn, not a person's prompt.
    It writes no signal (the turn's state stays what the last real event said),
    counts no prompt in the handoff notes and takes no message."""
    from agentwrap.continuity.hooks import notes_file, read_json

    notes_file(aw.paths, "fake").parent.mkdir(parents=True, exist_ok=True)
    mid = send(svc, "waits for PostToolUse")
    prompt = (FIXTURES / "qwen" / "UserPromptSubmit.json").read_bytes()
    again = FIXTURES / "qwen" / "UserPromptSubmit.continuation.json"
    assert payload(again)["prompt"] == "" and action("qwen", "UserPromptSubmit",
                                                     payload(again)) is None
    assert handle("qwen", "UserPromptSubmit", prompt, env_of(aw)) == ""
    first = read_signal(aw.paths, "fake")
    assert first is not None and first.signal == "prompt_submitted"
    assert handle("qwen", "UserPromptSubmit", again.read_bytes(), env_of(aw)) == ""
    assert read_signal(aw.paths, "fake") == first
    notes = read_json(notes_file(aw.paths, "fake"))
    assert notes.get("prompts") == 1 and notes.get("goal") == payload(
        FIXTURES / "qwen" / "UserPromptSubmit.json")["prompt"]
    assert svc.get(mid).status is Status.PENDING
    # the same empty prompt is a real one for an agent without that habit
    assert action("claude", "UserPromptSubmit", {**payload(again),
                  "hook_event_name": "UserPromptSubmit"}) == "prompt_submitted"


def test_a_subagents_tool_calls_take_nothing(aw: AwEnv, svc: Service) -> None:
    mid = send(svc, "for the main agent")
    sub = {**payload(FIXTURES / "claude" / "PostToolBatch.json"), "agent_id": "a1b2c3",
           "agent_type": "general-purpose"}  # what 2.1.197 adds inside a subagent
    assert handle("claude", "PostToolBatch", json.dumps(sub).encode(), env_of(aw)) == ""
    # Cline names the running agent in every payload; a subagent has a parent
    cline = payload(FIXTURES / "cline" / "PostToolUse.json")
    assert cline["agent_id"] and cline["parent_agent_id"] is None
    sub = {**cline, "parent_agent_id": cline["agent_id"], "agent_id": "agent_sub"}
    assert handle("cline", "PostToolUse", json.dumps(sub).encode(), env_of(aw)) == ""
    assert svc.get(mid).status is Status.PENDING
    assert "[webhook:ci] for the main agent" in context_of(
        handle("cline", "PostToolUse", json.dumps(cline).encode(), env_of(aw)),
        "PostToolUse", "cline")


def test_clines_reply_at_turn_end_acknowledges(aw: AwEnv, svc: Service) -> None:
    """Cline's TaskComplete carries the reply in turn.outputText: its ACK counts."""
    asked = send(svc, "please confirm", require_ack=True)
    raw = (FIXTURES / "cline" / "PostToolUse.json").read_bytes()
    text = context_of(handle("cline", "PostToolUse", raw, env_of(aw)), "PostToolUse", "cline")
    token = svc.get(asked).batch_id
    assert token and f'Reply "ACK {token}"' in text
    end = payload(FIXTURES / "cline" / "TaskComplete.json")
    reply = {**end, "turn": {**end["turn"], "outputText": f"Noted.\n\nACK {token}"}}
    assert handle("cline", "TaskComplete", json.dumps(reply).encode(), env_of(aw)) == ""
    assert svc.get(asked).status is Status.ACKNOWLEDGED


def test_kimis_prompt_parts_are_noted_as_its_prompt(aw: AwEnv, svc: Service) -> None:
    """Kimi Code sends the prompt as content parts: the notes keep its text; its
    PostToolUse (run in the background, output never read) takes nothing."""
    from agentwrap.continuity.hooks import notes_file, read_json

    notes_file(aw.paths, "fake").parent.mkdir(parents=True, exist_ok=True)
    mid = send(svc, "typed after the turn")
    raw = (FIXTURES / "kimi" / "UserPromptSubmit.json").read_bytes()
    assert isinstance(payload(FIXTURES / "kimi" / "UserPromptSubmit.json")["prompt"], list)
    assert handle("kimi", "UserPromptSubmit", raw, env_of(aw)) == ""
    notes = read_json(notes_file(aw.paths, "fake"))
    assert notes.get("prompts") == 1 and notes.get("goal") == "Please look around. [[script]]"
    after = (FIXTURES / "kimi" / "PostToolUse.json").read_bytes()
    assert handle("kimi", "PostToolUse", after, env_of(aw)) == ""
    assert svc.get(mid).status is Status.PENDING


def test_no_ack_request_unless_asked(aw: AwEnv, svc: Service) -> None:
    send(svc, "plain")
    raw = (FIXTURES / "gemini" / "AfterTool.json").read_bytes()
    text = context_of(handle("gemini", "AfterTool", raw, env_of(aw)), "AfterTool")
    assert "ACK" not in text and text.splitlines()[1] == "[webhook:ci] plain"


def test_over_the_limit_stays_queued_and_is_counted(aw: AwEnv, svc: Service) -> None:
    ids = [send(svc, f"m{i} " + "x" * 3000) for i in range(5)]
    raw = (FIXTURES / "claude" / "PostToolBatch.json").read_bytes()
    text = context_of(handle("claude", "PostToolBatch", raw, env_of(aw)), "PostToolBatch")
    took = [m for m in ids if svc.get(m).status is Status.DELIVERED]
    assert took == ids[:3]  # in order, as many as fit in 9,500 characters
    assert text.endswith("[agentwrap: 2 more messages for this session wait in the queue]")
    text = context_of(handle("claude", "PostToolBatch", raw, env_of(aw)), "PostToolBatch")
    assert "more" not in text.splitlines()[-1]
    assert all(svc.get(m).status is Status.DELIVERED for m in ids)


def test_a_message_too_long_for_a_hook_waits_for_typing(aw: AwEnv, svc: Service) -> None:
    big = send(svc, "y" * 10_000)  # fits the queue (10 KiB), not a hook's 9,500 characters
    raw = (FIXTURES / "claude" / "PostToolBatch.json").read_bytes()
    assert handle("claude", "PostToolBatch", raw, env_of(aw)) == ""
    assert svc.get(big).status is Status.PENDING
    log = aw.paths.supervisor_log("fake").read_text(encoding="utf-8")
    assert "too long for channel 'hook', left queued" in log


def run_hook(aw: AwEnv, agent: str, event: str, data: bytes,
             session: str | None = "fake") -> subprocess.CompletedProcess[bytes]:
    """The real thing: ``python -m agentwrap hook`` in a process of its own."""
    return subprocess.run([sys.executable, "-m", "agentwrap", "hook", agent, event], input=data,
                          env=env_of(aw, session), cwd=aw.project, capture_output=True,
                          timeout=60)


def test_locked_database_answers_nothing_and_takes_nothing(aw: AwEnv, svc: Service) -> None:
    mid = send(svc, "while locked")
    raw = (FIXTURES / "claude" / "PostToolBatch.json").read_bytes()
    holder = sqlite3.connect(aw.paths.db_path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        proc = run_hook(aw, "claude", "PostToolBatch", raw)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
        stop = run_hook(aw, "claude", "Stop", (FIXTURES / "claude" / "Stop.json").read_bytes())
        assert (stop.returncode, stop.stdout) == (0, b"")  # a signal needs no store
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert svc.get(mid).status is Status.PENDING
    sig = read_signal(aw.paths, "fake")
    assert sig is not None and sig.signal == "turn_end"
    assert "failed: StoreLocked" in aw.paths.supervisor_log("fake").read_text(encoding="utf-8")
    proc = run_hook(aw, "claude", "PostToolBatch", raw)  # unlocked: delivered now
    assert "while locked" in context_of(proc.stdout.decode(), "PostToolBatch")


@pytest.mark.parametrize("case", ["no session", "unknown session", "bad name", "garbage",
                                  "not an object", "empty", "unknown agent", "wrong event"])
def test_anything_wrong_means_no_output_and_exit_0(aw: AwEnv, svc: Service, case: str) -> None:
    mid = send(svc, "stays")
    raw = (FIXTURES / "claude" / "PostToolBatch.json").read_bytes()
    agent, event, session = "claude", "PostToolBatch", "fake"
    if case == "no session":
        session = None  # type: ignore[assignment]
    elif case == "unknown session":
        session = "nosuch"
    elif case == "bad name":
        session = "../../etc"
    elif case == "garbage":
        raw = b"\x00\xff not json {"
    elif case == "not an object":
        raw = b"[1, 2]"
    elif case == "empty":
        raw = b""
    elif case == "unknown agent":
        agent = "aider"
    else:
        raw = (FIXTURES / "claude" / "Stop.json").read_bytes()  # payload of another event
    proc = run_hook(aw, agent, event, raw, session)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert svc.get(mid).status is Status.PENDING


def test_missing_database_is_not_created(aw: AwEnv) -> None:
    assert not aw.paths.db_path.exists()  # agentwrap never stored anything here
    raw = (FIXTURES / "gemini" / "SessionStart.json").read_bytes()
    proc = run_hook(aw, "gemini", "SessionStart", raw)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert not aw.paths.db_path.exists()


def test_usage_errors_never_fail_the_agent(aw: AwEnv) -> None:
    for args in ([], ["claude"], ["claude", "Stop", "extra"]):
        proc = subprocess.run([sys.executable, "-m", "agentwrap", "hook", *args], input=b"{}",
                              env=env_of(aw), capture_output=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout == b"" and b"usage" in proc.stderr
    # the console script's path (the full CLI) dispatches to the same handler
    proc = aw.cli("hook", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: agentwrap hook")


HEAVY = ("rich", "fastapi", "starlette", "uvicorn", "pyte", "pydantic", "libtmux", "mcp",
         "pexpect", "argparse", "asyncio")


@pytest.mark.parametrize(("agent", "event"), [("claude", "PostToolBatch"), ("codex", "Stop")])
def test_hook_start_up_imports_only_what_it_uses(aw: AwEnv, svc: Service, agent: str,
                                                 event: str) -> None:
    send(svc, "hello")
    raw = next(p for a, p in CASES if a == agent and p.name == f"{event}.json").read_bytes()
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "agentwrap", "hook", agent,
                           event], input=raw, env=env_of(aw), capture_output=True, timeout=60)
    assert proc.returncode == 0
    loaded = {line.split("|")[-1].strip().split(".")[0]
              for line in proc.stderr.decode().splitlines() if line.startswith("import time:")}
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))
    if event == "Stop":  # a signal never loads the store's code
        assert "agentwrap.queue.sqlite" not in proc.stderr.decode()


#: Per agent: its session start, prompt and turn-end events, and the turn end's
#: reply field (None: Copilot's agentStop carries no reply).
TURN_EVENTS: dict[str, tuple[str, str, str, str | None]] = {
    "claude": ("SessionStart", "UserPromptSubmit", "Stop", "last_assistant_message"),
    "codex": ("SessionStart", "UserPromptSubmit", "Stop", "last_assistant_message"),
    "gemini": ("SessionStart", "BeforeAgent", "AfterAgent", "prompt_response"),
    "qwen": ("SessionStart", "UserPromptSubmit", "Stop", "last_assistant_message"),
    "copilot": ("sessionStart", "userPromptSubmitted", "agentStop", None),
}


@pytest.mark.parametrize("agent", sorted(TURN_EVENTS))
def test_session_start_hands_the_startup_context_over_until_the_first_turn(
        aw: AwEnv, svc: Service, agent: str) -> None:
    """Start-up context (`run --context`) queued when the agent starts goes
    into its SessionStart context (the model reads it with the first prompt),
    is never typed meanwhile, and is delivered when the first prompt is
    submitted (each agent's own prompt event); an ACK in the reply to that
    prompt acknowledges it. A message someone sent is not taken: it must
    start a turn of its own, typed once the agent is ready, since with nobody
    at the keyboard no first prompt may ever come (issue 25)."""
    sent = send(svc, "main is red", Priority.HIGH, require_ack=True)
    notes = startup(svc, "the plan: fix the parser first", require_ack=True)
    start_event, prompt_event, end, field = TURN_EVENTS[agent]
    start = FIXTURES / agent / f"{start_event}.json"
    if START_CONTEXT[agent].channel != "hook":
        # issue 35: where the start hook's output was never seen reaching the model
        # (Codex and Copilot run it at the first prompt, Qwen throws it away), it hands
        # nothing: the supervisor types the start-up context, ACK asked
        assert handle(agent, start_event, start.read_bytes(), env_of(aw)) == ""
        assert svc.get(notes).status is Status.PENDING and svc.get(notes).attempts == 0
        assert svc.get(sent).status is Status.PENDING
        return
    text = context_of(handle(agent, start_event, start.read_bytes(), env_of(aw)),
                      start_event, agent)
    assert "the plan: fix the parser first" in text and "main is red" not in text
    assert 'Reply "ACK' in text
    view = {w.message.id: w for w in svc.peek("fake").entries}
    assert view[notes].waiting_because.startswith("handed at the session start")
    assert svc.get(sent).status is Status.PENDING and svc.get(sent).attempts == 0
    again = handle(agent, start_event, start.read_bytes(), env_of(aw))
    assert again == ""  # nothing handed twice (a second start hands only what is new)
    assert handle(agent, prompt_event, (FIXTURES / agent / f"{prompt_event}.json").read_bytes(),
                  env_of(aw)) == ""
    entry = svc.message(notes)
    assert entry.message.status is Status.DELIVERED and entry.channel == "hook"
    assert [a.outcome for a in entry.attempts] == ["delivered"]  # the handed one, ended
    assert entry.attempts[0].evidence == "went to the model in the session's first turn"
    assert not aw.paths.started_batches("fake").exists()
    assert svc.get(sent).status is Status.PENDING
    token = svc.get(notes).batch_id
    reply = payload(FIXTURES / agent / f"{end}.json")
    if field is None:  # no reply at the turn's end: nothing acknowledges it there
        assert handle(agent, end, json.dumps(reply).encode(), env_of(aw)) == ""
        assert svc.get(notes).status is Status.DELIVERED
        return
    reply[field] = f"ACK {token}"
    handle(agent, end, json.dumps(reply).encode(), env_of(aw))
    assert svc.get(notes).status is Status.ACKNOWLEDGED


@pytest.mark.parametrize("source", ["resume", "clear", "compact"])
def test_only_a_fresh_start_hands_the_queue_over(aw: AwEnv, svc: Service, source: str) -> None:
    mid = send(svc, "waits for the next safe point")
    data = payload(FIXTURES / "claude" / "SessionStart.json")
    data["source"] = source
    assert handle("claude", "SessionStart", json.dumps(data).encode(), env_of(aw)) == ""
    assert svc.get(mid).status is Status.PENDING


def test_what_the_start_handed_is_never_typed_and_fails_at_the_end(
        aw: AwEnv, svc: Service) -> None:
    """The supervisor's engine leaves a batch handed at the start alone (it is
    the first prompt's to deliver), and a session that ends before any prompt
    fails it: no model ever read it."""
    from agentwrap.config import load_config
    from agentwrap.delivery.engine import DeliveryEngine
    from agentwrap.detect.profiles import load_profile
    from agentwrap.sessions.compose import _foreign_batches

    mid = startup(svc, "never prompted")
    start = (FIXTURES / "claude" / "SessionStart.json").read_bytes()
    assert "never prompted" in handle("claude", "SessionStart", start, env_of(aw))
    rec = svc.state("fake")
    engine = DeliveryEngine.for_session(aw.paths, load_config(aw.paths), load_profile(
        "standin", aw.paths), rec)
    try:
        engine.foreign_batches = _foreign_batches(aw.paths, "fake", None)
        assert engine.foreign_batches() == {svc.get(mid).batch_id}
        engine.abandon("session ended (agent exit code 0)")
    finally:
        engine.close()
    entry = svc.message(mid)
    assert entry.message.status is Status.FAILED
    assert [a.outcome for a in entry.attempts] == ["handed"]


@pytest.mark.parametrize("agent", sorted(TURN_EVENTS))
def test_session_start_marks_the_start_up_complete(aw: AwEnv, svc: Service, agent: str) -> None:
    """The marker the supervisor waits on (typing and `ready`) is written even
    where the launch has no folder of its own yet: Gemini's settings live
    elsewhere, and its sessions used to wait out the whole bound (10 s)."""
    import shutil

    shutil.rmtree(aw.paths.session_started("fake").parent, ignore_errors=True)
    start_event = TURN_EVENTS[agent][0]
    start = FIXTURES / agent / f"{start_event}.json"
    assert handle(agent, start_event, start.read_bytes(), env_of(aw)) == ""
    assert aw.paths.session_started("fake").is_file()
