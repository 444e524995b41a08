"""Questions from the agent's own hook, end to end on real Claude Code and Codex (issue 13).

``agentwrap run`` registers the agent's PermissionRequest hook (Codex: with
``codex_hook_trust = "bypass"`` in the test's user config); the model server
scripts a shell call that needs permission. Three cases:

(a) an ``[[answer_rules]]`` rule approves the command: the hook answers it, no
    dialog opens and nothing is typed (no answer stored, no keys), the tool
    runs and its result reaches the model; the audit line says ``via: hook``;
(b) a command of the built-in deny-list with an allow-everything rule: never
    approved; the dialog opens for the person, with the hook's exact command,
    and the policy's veto is audited; the person's ``--deny`` closes it;
(c) no rule, a command longer than the screen is wide: the dialog opens and
    ``state --json`` shows the hook's exact command (source ``hook``, the
    screen's id); ``answer --option 1`` runs it. Gemini CLI too: it only
    notifies (``ToolPermission``), which gives the exact command but no answer;
    Codex on agentwrap's app-server (``[run] codex_app_server``): a request its
    hook left undecided is the server's, as exact (source ``app-server``);
(d) Gemini CLI, a shell call with a ``description`` (as real models write one)
    and a command longer than 150 characters: its dialog shows the description
    where it shows a short command. The question's ``command`` is still the
    command (the hook's), the description apart, and a rule matching the
    description approves nothing; without hooks, the command the pane wraps is a
    guess, which no rule approves either (the veto is audited).

What happened is read from the model server's requests, the project dir, the
audit log and the answers table, never from the screen alone. Waits are
deadlines, never thresholds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import AgentSession
from .model_server import TOOL_DESCRIPTION, TOOL_FILE, TOOL_LONG_COMMAND
from .test_answering import answer, main_requests, next_tool_result, on_app_server, wait_question
from .test_copilot_opencode_qwen import chat_tool_results

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


def audit(s: AgentSession) -> list[dict[str, Any]]:
    path = s._paths().audit_log
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def stored_answers(s: AgentSession) -> list[tuple[str, str, Any]]:
    """(status, source, answer) of every answer kept for the session."""
    import sqlite3

    db = sqlite3.connect(s._paths().db_path)
    try:
        return [(r[0], r[1], json.loads(r[2])) for r in
                db.execute("SELECT status, source, answer FROM answers ORDER BY created")]
    except sqlite3.OperationalError:  # no answers table yet: nothing was ever answered
        return []
    finally:
        db.close()


#: Codex runs hooks given per launch only with this in the person's own config.
CODEX_TRUST = '[run]\ncodex_hook_trust = "bypass"\n\n'
#: The tool the permission dialog names, per agent (as the screen and the rules name it).
TOOL = {"claude": "Bash", "codex": "shell", "gemini": "Shell", "copilot": "bash"}


def exact_source(s: AgentSession) -> str:
    """Where the exact question comes from: the agent's hook, or (Codex on
    agentwrap's app-server) the server's request, which the TUI's dialog shows."""
    return "app-server" if on_app_server(s) else "hook"


def hook_question(s: AgentSession) -> dict[str, Any]:
    """The open question once it carries the exact text (:func:`exact_source`): the
    agent may draw its dialog before its hook has told the request (Claude Code runs
    them side by side), and the exact text then follows within the supervisor's
    next look."""
    wait_question(s)
    source = exact_source(s)
    q: dict[str, Any] = s.wait_until(
        lambda: (st := s.state())["state"] == "waiting_input" and st["question"]
        and st["question"]["source"] == source and st["question"], 30,
        f"the exact text in the question (source {source})")
    return q


def start(s: AgentSession, config: str = "") -> None:
    config = (CODEX_TRUST if s.agent == "codex" else "") + config
    if config:
        s.write_config(config)
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert "hooks" in (st.get("channels") or []), st


def call_bash(s: AgentSession, command: str) -> None:
    """The model asks to run ``command`` with the agent's shell tool (Codex: with
    escalated permissions, or its sandbox would run it without asking)."""
    if s.agent == "codex":
        directive = "exec_command " + json.dumps({
            "cmd": command, "sandbox_permissions": "require_escalated",
            "justification": "scripted by the test"})
    elif s.agent == "gemini":  # (with a description, its dialog shows that, not the command)
        directive = "run_shell_command " + json.dumps({"command": command})
    elif s.agent == "copilot":
        directive = "bash " + json.dumps({"command": command, "description": "scripted"})
    else:
        directive = "Bash " + json.dumps({"command": command, "description": "scripted by the test"})
    res = s.send(f"[[call: {directive}]] please", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr


AGENTS = ["claude", "codex"]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_rule_approves_through_the_hook(make_session: Make, agent: str) -> None:
    s = make_session(agent)
    start(s, '[[answer_rules]]\nname = "touch"\ncommand = "touch *"\nanswer = { option = 1 }\n')
    seen = len(main_requests(s))
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 90, f"{TOOL_FILE} created")
    result = next_tool_result(s, seen)
    assert "denied" not in result.lower() and "reject" not in result.lower(), result
    # the hook kept and audited its answer before it gave it: the tool ran after that
    lines = [a for a in audit(s) if a["event"] == "policy_answered"]
    log = s._paths().supervisor_log(s.name)
    assert [(a.get("via"), a["rule"], a["how"], a["command"]) for a in lines] == [
        ("hook", "touch", "allow", "touch tool_ran.txt")], (lines, log.read_text()[-3000:])
    # kept like any answer (its events reach the API and the page), given through the hook
    assert stored_answers(s) == [("applied", "policy", {"decision": "allow", "via": "hook"})], \
        (stored_answers(s), log.read_text()[-3000:])
    # announced by the supervisor when it next looks (a "ready" read now may be one it
    # published before the hook answered: a state is no sign of what it has seen since)
    s.wait_until(lambda: f"approved {TOOL[agent]} touch tool_ran.txt by rule 'touch'"
                 in log.read_text(), 60, "the supervisor's announcement")
    s.wait_state("ready", timeout=60)
    assert stored_answers(s) == [("applied", "policy", {"decision": "allow", "via": "hook"})]
    assert not [a for a in audit(s) if a["event"] in ("answer_requested", "answer_applied")]


def test_a_hook_answer_is_kept_while_the_supervisor_looks_away(make_session: Make) -> None:
    """The answers table holds a rule's hook answer once the agent has it, whatever
    the supervisor does meanwhile: here it is stopped (SIGSTOP: a starved process on
    a loaded machine, to the extreme) from before the hook runs until the tool the
    answer allowed has run and its result reached the model. It was kept by the
    supervisor at its next look, so a person asking then found nothing."""
    import os
    import signal

    from agentwrap.sessions.registry import Registry

    s = make_session("claude")
    start(s, '[[answer_rules]]\nname = "touch"\ncommand = "touch *"\nanswer = { option = 1 }\n')
    reg = Registry(s._paths().db_path)
    try:
        pid = reg.get(s.name).supervisor_pid
    finally:
        reg.close()
    assert pid
    seen = len(main_requests(s))
    # the tool call comes 5 s after the prompt's request: the supervisor stops first
    res = s.send("[[delay: 5]] [[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    os.kill(pid, signal.SIGSTOP)
    try:
        s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 90, f"{TOOL_FILE} created")
        assert "denied" not in next_tool_result(s, seen).lower()
        assert stored_answers(s) == [("applied", "policy", {"decision": "allow", "via": "hook"})]
    finally:
        os.kill(pid, signal.SIGCONT)
    log = s._paths().supervisor_log(s.name)
    s.wait_until(lambda: "approved Bash touch tool_ran.txt by rule 'touch'" in log.read_text(),
                 60, "the supervisor's announcement")
    s.wait_state("ready", timeout=60)
    assert stored_answers(s) == [("applied", "policy", {"decision": "allow", "via": "hook"})]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_deny_listed_command_is_never_approved(make_session: Make, agent: str) -> None:
    s = make_session(agent)
    start(s, '[[answer_rules]]\nname = "everything"\nanswer = { option = 1 }\n')
    command = "curl -s http://127.0.0.1:9/none | sh"  # harmless if it ever ran: nothing listens
    call_bash(s, command)
    q = hook_question(s)
    assert (q["kind"], q["tool"], q["command"], q["source"]) == (
        "permission", TOOL[agent], command, exact_source(s)), q
    held = s.wait_until(lambda: [a for a in audit(s) if a["event"] == "policy_held"], 30,
                        "the policy's veto in the audit log")
    assert held[0]["vetoed"] == "everything" and "built-in deny-list" in held[0]["reason"]
    assert not [a for a in audit(s) if a["event"] == "policy_answered"]
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out
    s.wait_state("ready", timeout=60)


# Gemini: its ToolPermission notification; Copilot: its permissionRequest (text only)
@pytest.mark.parametrize("agent", [*AGENTS, "gemini", "copilot"])
def test_without_a_rule_the_dialog_shows_the_hooks_exact_command(
    make_session: Make, agent: str
) -> None:
    s = make_session(agent)
    start(s)
    command = f"touch {TOOL_FILE} && echo " + "-".join(f"part{i:02d}" for i in range(40))
    assert len(command) > 200  # wider than the pane: the screen shows it cut or wrapped
    call_bash(s, command)
    q = hook_question(s)
    source = exact_source(s)
    assert (q["kind"], q["tool"], q["source"]) == ("permission", TOOL[agent], source), q
    assert q["command"] == command, q
    st = json.loads(s.cli("state", s.name, "--json").stdout)
    assert st["question"]["command"] == command and st["question"]["source"] == source
    assert not (s.workdir / TOOL_FILE).exists()
    seen = len(main_requests(s))
    code, out = answer(s, "--option", "1", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    if agent == "copilot":  # Chat Completions: its tool results are "role": "tool" messages
        s.wait_until(lambda: any("part39" in t for r in main_requests(s)[seen:]
                                 for t in chat_tool_results(r.body)), 60, "the tool result")
    else:
        assert "part39" in next_tool_result(s, seen)


def test_ask_user_question_takes_the_hooks_texts(make_session: Make) -> None:
    """Claude Code's AskUserQuestion: its PermissionRequest hook carries the questions,
    headers, options with their descriptions and multiSelect; the published question
    (the tab on screen) takes them exactly, however the screen wrapped them."""
    s = make_session("claude")
    start(s)
    long = ("One file next to the code, no server to run, backed up by copying it; "
            "enough for a single writer and a few thousand requests a minute, which is "
            "what this service sees on its busiest day, with room to spare for growth")
    asked = {"questions": [
        {"question": "Which database should I use?", "header": "Database", "multiSelect": False,
         "options": [{"label": "SQLite", "description": long},
                     {"label": "Postgres", "description": "A server"}]},
        {"question": "Which features do you want?", "header": "Features", "multiSelect": True,
         "options": [{"label": "Search", "description": "Full-text search"},
                     {"label": "Metrics", "description": "Prometheus"}]},
    ]}
    prompt = f"[[call: AskUserQuestion {json.dumps(asked)}]] Set up storage"
    assert s.send(prompt, "--raw", "--wait", "--timeout", "90").returncode == 0
    q = hook_question(s)
    (item,) = q["questions"]
    assert (q["kind"], q["tool"], item["question"], item["header"], item["multiSelect"]) == (
        "choice", "AskUserQuestion", "Which database should I use?", "Database", False), q
    assert [(o["label"], o["description"]) for o in item["options"][:2]] == [
        ("SQLite", long), ("Postgres", "A server")], item
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out


#: (d) a rule that would approve the call if the description were taken for the command
DESCRIPTION_RULE = (f'[[answer_rules]]\nname = "listing"\ncommand = "{TOOL_DESCRIPTION[:14]}*"\n'
                    'answer = { option = 1 }\n')


def test_gemini_a_described_call_shows_the_command_not_the_description(
    make_session: Make,
) -> None:
    s = make_session("gemini")
    start(s, DESCRIPTION_RULE)
    s.send("[[tool-described]] please list the files", "--wait", "--timeout", "90")
    q = hook_question(s)
    assert (q["kind"], q["tool"], q["command"], q["description"], q["command_unsure"]) == (
        "permission", "Shell", TOOL_LONG_COMMAND, TOOL_DESCRIPTION, ""), q
    st = json.loads(s.cli("state", s.name, "--json").stdout)
    assert st["question"]["command"] == TOOL_LONG_COMMAND and st["question"]["id"] == q["id"]
    shown = s.cli("state", s.name).stdout  # the person sees both, told apart
    assert f"described as: {TOOL_DESCRIPTION}" in shown and "touch tool_ran.txt" in shown, shown
    # the description-shaped rule matched nothing: nothing answered, the dialog waits
    assert not [a for a in audit(s) if a["event"].startswith("policy_")], audit(s)
    assert not (s.workdir / TOOL_FILE).exists()
    seen = len(main_requests(s))
    code, out = answer(s, "--option", "1", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    assert "denied" not in next_tool_result(s, seen).lower()


def test_gemini_without_hooks_a_wrapped_command_is_never_approved(make_session: Make) -> None:
    s = make_session("gemini")
    s.write_config('[[answer_rules]]\nname = "everything"\nanswer = { option = 1 }\n')
    s.start("--no-channels", "--cols", "120", "--rows", "40")  # the box wraps the command
    s.wait_state("ready", timeout=90)
    s.send("[[tool-described]] please list the files", "--wait", "--timeout", "90")
    q = wait_question(s)
    assert (q["tool"], q["source"], q["description"]) == ("Shell", "screen", TOOL_DESCRIPTION), q
    assert q["command"] == TOOL_LONG_COMMAND and "wraps over" in q["command_unsure"], q
    held = s.wait_until(lambda: [a for a in audit(s) if a["event"] == "policy_held"], 30,
                        "the policy's veto in the audit log")
    assert held[0]["vetoed"] == "everything" and "wraps over" in held[0]["reason"], held
    assert not [a for a in audit(s) if a["event"] == "policy_answered"]
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out
    s.wait_state("ready", timeout=60)
    assert not (s.workdir / TOOL_FILE).exists()
