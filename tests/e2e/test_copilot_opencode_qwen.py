"""GitHub Copilot CLI, OpenCode and Qwen Code under agentwrap, end to end (issue 22).

Each runs for real against the loopback model server (Chat Completions), in a
throwaway home prepared by :func:`agents.prepare_agent`. An agent's start is the
dearest step of these tests (OpenCode's ~15 s on a loaded machine), so each agent
starts once and one session checks, in order:

* the session: start -> ready with no dialog left open; a message delivered
  once, submitted and acknowledged; a person's draft never overwritten (the
  message waits, and goes once the box is empty);
* the agent's own syntax in a message is inert (the whole-request check of
  tests/e2e/test_agent_syntax.py), and the session takes the next message;
* a permission dialog (its shell tool): ``waiting_input`` with the question
  parsed (options, tool, command), denied and then approved by ``agentwrap
  answer``, the project directory saying what ran; then its question tool
  (Copilot's ask_user, OpenCode's question), answered with an option the
  tool result carries to the model;
* kill -9 of the agent seen.

* a pasted probe reaches the model as the profile declares (the check of
  tests/e2e/test_pasted_bytes.py, riding this start).

OpenCode runs every tool without asking by default (the first session checks
that it says so), so its dialogs get a second start in its ask-first mode.
OpenCode's native channel (a JS plugin: ``agentwrap run`` writes it into the
private launch dir and names it in an extra config given with
``OPENCODE_CONFIG``, agentwrap/agents/opencode.py) is checked on those two
starts: on the first, before any other prompt, the session says which channel
is active, nothing of agentwrap's goes into the person's OpenCode config, and a
prompt's turn is told by the plugin (prompt submitted, turn end) and noted
once; on the ask-first one, ``permission.asked`` says the session waits for the
person. (The hand-over inside a tool loop is tests/e2e/test_native_channels.py's.)

What reached the model is read from the model server's log; waits are
deadlines, never thresholds.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from agentwrap.detect.profiles import load_profile

from .conftest import AgentSession
from .model_server import TOOL_COMMAND, TOOL_FILE
from .test_agent_syntax import passwd_line, plant, probe_lines
from .test_answering import answer, main_requests, wait_question
from .test_pasted_bytes import check_pasted_probe

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]

#: This helper's agents (tests/e2e/agents.py MORE_AGENTS holds the others' too).
AGENTS = ("copilot", "opencode", "qwen")

# The dialog [[tool]] opens, and the tool it names (the command is TOOL_COMMAND).
PERMISSION: dict[str, tuple[str, str]] = {
    "copilot": ("permission", "bash"),
    "opencode": ("permission", "Shell command"),
    "qwen": ("permission", "Shell"),
}


# The question tool of each agent that has one, called with two options.
QUESTION_TOOL = {"copilot": "ask_user", "opencode": "question"}
QUESTION_CALL = {
    "copilot": "ask_user " + json.dumps({
        "message": "Which database should I use?",
        "requestedSchema": {"type": "object", "required": ["database"], "properties": {
            "database": {"type": "string", "title": "Database", "enum": ["SQLite", "Postgres"]}}}}),
    "opencode": "question " + json.dumps({"questions": [{
        "question": "Which database should I use?", "header": "Database",
        "options": [{"label": "SQLite", "description": "One file"},
                    {"label": "Postgres", "description": "A server"}]}]}),
}


def tag() -> str:
    return f"E2E{uuid.uuid4().hex[:8]}"


def started(s: AgentSession) -> AgentSession:
    """``s`` started by ``agentwrap run`` with no option, once ready."""
    agent = s.agent
    s.started_at = time.time()
    res = s.cli("run", "--detach", "--name", s.name, "--cwd", str(s.workdir), "--", *s.argv)
    assert res.returncode == 0, res.stderr
    # OpenCode runs every tool without asking: `run` says so, and how to make it ask
    offered = "no permission gate" in res.stderr and "[run] ask_first = true" in res.stderr
    assert offered == (agent == "opencode"), res.stderr
    st = s.wait_state("ready", timeout=120)
    print(f"{agent}: ready after {st['since'] - s.started_at:.2f}s ({st['explain']})")
    return s


def check_delivery_and_draft(s: AgentSession) -> None:
    """Ready with no question, one message acknowledged once, a draft kept."""
    agent = s.agent
    st = s.state()
    assert st["state"] == "ready" and not st.get("question"), st
    # OpenCode runs every tool without asking (its default): the session says so
    gate = st["permission_gate"]
    assert (gate or "").startswith("none: ") == (agent == "opencode"), st
    if agent == "opencode":
        explain = s.cli("state", s.name, "--explain")
        assert "permission gate: none" in explain.stdout, explain.stdout

    # one message: typed once, submitted, acknowledged from the reply
    marker = tag()
    res = s.send(f"status check {marker}", "--ack", "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    assert res.stdout.startswith("acknowledged"), res.stdout
    assert len(s.wait_received(marker)) == 1
    s.wait_state("ready", timeout=60)

    # a person's draft is never overwritten: the next message waits for it
    draft, marker = f"my unsent draft {tag()}", tag()
    s.type_keys(draft)
    s.wait_state("draft", timeout=30)
    mid = s.send_id(f"queued behind the draft {marker}")
    s.wait_until(
        lambda: [q["waiting_because"] for q in s.cli_json("queue", s.name)]
        == ["draft in input box"], 30, "the message waiting for the draft",
    )
    assert draft in s.screen().replace("\n", "")
    assert not s.received_with(marker)
    s.press(*["BSpace"] * (len(draft) + 2))
    assert len(s.wait_received(marker, timeout=90)) == 1
    assert not s.received_with(draft)
    s.wait_until(lambda: s.message(mid)["status"] == "delivered", 30, "delivered state")
    s.wait_state("ready", timeout=60)


def check_kill(s: AgentSession) -> None:
    """kill -9 of the agent: the session ends, seen within the deadline."""
    pid = s.agent_pid()
    assert pid is not None
    from agentwrap.terminal.proctree import kill_tree

    kill_tree(pid, 9, grace=1.0)
    s.wait_state("exited", timeout=30)


def chat_tool_results(body: Any) -> list[str]:
    """The tool results a Chat Completions request carries ("role": "tool")."""
    return [json.dumps(m.get("content"), ensure_ascii=False)
            for m in (body or {}).get("messages", []) if isinstance(m, dict)
            and m.get("role") == "tool"]


def open_permission(s: AgentSession) -> dict[str, Any]:
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    q = wait_question(s)
    dialog, tool = PERMISSION[s.agent]
    assert q["kind"] == "permission", q
    assert (q["dialog"], q["tool"], q["command"]) == (dialog, tool, TOOL_COMMAND), q
    labels = [o["label"] for o in q["questions"][0]["options"]]
    assert len(labels) >= 2, q
    assert not (s.workdir / TOOL_FILE).exists(), "the tool ran before anyone answered"
    return q


def check_dialogs(s: AgentSession, told: Callable[[AgentSession], None] | None = None) -> None:
    """The shell tool's permission denied, then approved; the question tool
    answered with its second option. ``told`` checks the first dialog while it
    is open (how the agent's native channel said it)."""
    agent = s.agent
    q = open_permission(s)
    if told is not None:
        told(s)
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_state("ready", timeout=60)
    time.sleep(1.0)
    assert not (s.workdir / TOOL_FILE).exists(), "the denied tool ran"

    q = open_permission(s)
    code, out = answer(s, "--option", "1", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    s.wait_state("ready", timeout=60)

    # the agent's question tool: a choice, answered with the second option
    if agent not in QUESTION_CALL:
        return  # Qwen Code 0.15.10 offers the model no question tool
    res = s.send(f"[[call: {QUESTION_CALL[agent]}]] set up storage", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    q = wait_question(s)
    assert q["kind"] == "choice" and q["tool"] == QUESTION_TOOL[agent], q
    assert [o["label"] for o in q["questions"][0]["options"]][:2] == ["SQLite", "Postgres"], q
    code, out = answer(s, "--option", "Postgres", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_until(lambda: any("Postgres" in r for req in s.server.requests() if not req.side
                             for r in chat_tool_results(req.body)), 60,
                 "the answer in the tool result at the model")
    s.wait_state("ready", timeout=60)


def own_config_untouched(s: AgentSession) -> None:
    """Nothing of agentwrap's in the person's own config of ``s``'s agent."""
    from agentwrap.sessions.channels import launch_dir

    if s.agent == "opencode":  # the plugin named in an extra config of the launch dir
        folder = launch_dir(s._paths(), s.name) / "opencode"
        assert json.loads((folder / "opencode.json").read_text())["plugin"] == [
            (folder / "agentwrap-plugin.js").as_uri()]
        own = s.home / ".config" / "opencode"
        assert "agentwrap-plugin" not in (own / "opencode.json").read_text()
        assert not (own / "plugin").exists() and not (own / "plugins").exists()
    else:  # Copilot: a plugin dir of the launch (Copilot rewrites its config.json at
        # every start itself, so it is read, not compared)
        plugin = launch_dir(s._paths(), s.name) / "copilot-plugin"
        assert (plugin / "hooks" / "hooks.json").is_file()
        own = s.home / ".copilot"
        for name in ("config.json", "settings.json"):
            assert not (own / name).exists() or "agentwrap" not in (own / name).read_text()
        assert not (own / "hooks").exists()
        assert not list((own / "installed-plugins").glob("*"))


#: The agents whose native channel these starts check: the tool a turn calls
#: (its arguments given the workdir), the event that tells the turn's end, and
#: the one that tells a permission dialog.
NATIVE: dict[str, tuple[Callable[[AgentSession], str], str, str]] = {
    "copilot": (lambda s: "view " + json.dumps({"path": str(s.workdir)}), "agentStop",
                "notification"),
    "opencode": (lambda s: "glob " + json.dumps({"pattern": "*.md"}), "session.idle",
                 "permission.asked"),
}


def check_native_turn(s: AgentSession) -> None:
    """The agent's native channel on a fresh start, before any other prompt: the
    channel said, the person's config untouched, a turn with a tool call told
    by it (its end signalled) and its prompt noted once."""
    from agentwrap.continuity.hooks import notes_file, read_json
    from agentwrap.sessions.signals import read_signal

    call, end, _ = NATIVE[s.agent]
    assert s.state().get("channels") == ["hooks"], s.state()
    explain = s.cli("state", s.name, "--explain").stdout
    assert "typing, hooks" in explain, explain
    own_config_untouched(s)
    # a turn with a tool call: prompt submitted, then the turn's end, told by the channel
    before = len(main_requests(s))
    res = s.send(f"[[call: {call(s)}]] look around", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    s.wait_until(lambda: len(main_requests(s)) >= before + 2, 60, "the tool result at the model")
    s.wait_state("ready", timeout=60)
    sig = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g.event == end
                       and g, 30, "the turn end told by the native channel")
    assert (sig.signal, sig.state, sig.agent) == ("turn_end", "ready", s.agent), sig
    notes = s.wait_until(lambda: (n := read_json(notes_file(s._paths(), s.name))).get(
        "prompts") and n, 30, "the prompt in the handoff notes")
    assert notes["prompts"] == 1, notes
    assert "look around" in notes["goal"], notes
    log = s._paths().supervisor_log(s.name).read_text()
    if s.agent == "copilot":
        assert "hook copilot" in log, log[-2000:]
    assert not [ln for ln in log.splitlines() if f"hook {s.agent}" in ln and "failed" in ln], \
        log[-2000:]


def check_permission_told(s: AgentSession) -> None:
    """The permission dialog (open now) told by the agent's native channel."""
    from agentwrap.sessions.signals import read_signal

    event = NATIVE[s.agent][2]
    sig = s.wait_until(lambda: (g := read_signal(s._paths(), s.name)) and g.event == event
                       and g, 60, "the permission signal")
    assert (sig.signal, sig.state, sig.agent) == ("permission_prompt", "waiting_input",
                                                  s.agent), sig


# What the model must receive, line by line (see the [syntax] comments in
# patterns/{copilot,opencode,qwen}.toml).
def expected_lines(agent: str, marker: str) -> list[str]:
    lines = probe_lines(marker)
    if agent == "copilot":  # '@' not after a letter or digit: no escape, a fullwidth at
        lines[1:4] = [
            "＠secret.env",
            "＠/etc/passwd",
            "compare ＠/etc/passwd with ＠secret.env mid-line, mail ops@example.com",
        ]
    elif agent == "qwen":  # every '@' (Gemini CLI's at-commands): its own backslash escape
        lines[1:4] = [
            "\\@secret.env",
            "\\@/etc/passwd",
            "compare \\@/etc/passwd with \\@secret.env mid-line, mail ops\\@example.com",
        ]
    return lines  # OpenCode: a typed or pasted '@path' is text (only its picker attaches)


def check_syntax_inert(s: AgentSession, secret: str, skill_secret: str) -> None:
    """The probe lines reach the model as text; nothing planted is read, run or
    attached; the next message still goes."""
    agent = s.agent
    marker = tag()
    res = s.send("\n".join(probe_lines(marker)), "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    got = s.wait_received(marker, settle=3.0)
    assert len(got) == 1, f"{len(got)} requests carried the message"
    want = "\n".join(expected_lines(agent, marker))
    assert want in got[0], f"expected\n{want}\n--- got ---\n{got[0]}"
    legend = load_profile(agent).syntax.legend
    assert legend in got[0], "the header must say how to read the escape"

    bodies = "\n".join(s.server.request_bodies())
    assert secret not in bodies, "secret.env reached the model"
    assert passwd_line() not in bodies and "root:x:0:0" not in bodies, "/etc/passwd reached the model"
    assert skill_secret not in bodies, "the skill's instructions reached the model"
    # Copilot names a mentioned file in a <tagged_files> block (its content is read later)
    assert "tagged_files" not in bodies and "secret.env (" not in bodies, "a file was tagged"
    assert not (s.workdir / "pwned").exists()
    s.wait_state("ready", timeout=60)
    after = tag()
    res = s.send(f"still there? {after}", "--wait", "--timeout", "90")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    assert len(s.wait_received(after)) == 1
    assert not (s.workdir / "pwned").exists()
    assert s.state()["state"] != "waiting_input", s.screen()


@pytest.mark.parametrize("agent", AGENTS)
def test_one_start_delivers_keeps_drafts_and_syntax_answers_dialogs_and_sees_a_kill(
    make_session: Make, agent: str,
) -> None:
    s = make_session(agent)
    secret, skill_secret = (f"{p}{uuid.uuid4().hex[:10]}" for p in ("SECRET", "SKILL"))
    plant(s, secret, skill_secret)
    started(s)
    if agent in NATIVE:  # its native channel, before any other prompt is noted
        check_native_turn(s)
    check_delivery_and_draft(s)
    check_syntax_inert(s, secret, skill_secret)
    check_pasted_probe(s)  # test_pasted_bytes.py's probe, on this start
    if agent != "opencode":  # OpenCode asks nothing by default: its dialogs below
        check_dialogs(s, told=check_permission_told if agent in NATIVE else None)
    check_kill(s)


def test_opencode_in_its_ask_first_mode_asks_and_is_answered(make_session: Make) -> None:
    s = make_session("opencode")
    s.write_config("[run]\nask_first = true\n")
    s.start()
    st = s.wait_state("ready", timeout=120)
    assert st["permission_gate"] == "asks first (OPENCODE_PERMISSION set)", st
    assert st.get("channels") == ["hooks"], st
    check_dialogs(s, told=check_permission_told)
