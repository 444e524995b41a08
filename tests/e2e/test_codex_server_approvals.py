"""Codex's approvals answered through its app-server (issue 24), on the real Codex 0.169.0.

With ``[run] codex_app_server = true`` the session's supervisor subscribes to the
TUI's thread (``thread/resume`` once its first turn started), so Codex's approval
requests reach it: the session's question is the request's exact command and
cwd (``source: "app-server"``, nothing read off the screen), and an answer from
any surface is a reply to the request (no key typed), after which the TUI's
dialog closes by itself. Here:

1. an answer through the HTTP API runs the exact command (the file appears, the
   model gets the result); the session's first turn's approval is the server's
   question from the start: the dialog the TUI draws is never the question first
   (agentwrap subscribes the moment the turn starts; an answer to a question
   read off the screen would be refused once the server's replaced it);
2. ``agentwrap answer --deny`` (or a file in the answer folder) answers it as the
   dialog's own "No" (Esc) does: the command does not run, the turn ends, and
   the model hears "aborted by user" with the next message;
3. an allow-everything rule approves a harmless command through the server, and
   the built-in deny-list still holds a destructive one for the person;
4. the person answers in the TUI first: the server resolves the request, the
   question is gone at once and a late answer to it changes nothing;
5. the server killed with a request open: the session goes on (ready, a message
   delivered) and the next approval comes through the restarted server.

What happened is read from the files, the model server's requests, the audit
log and the answers kept, never from the screen alone. Waits are deadlines.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentwrap.codex_server import AppServerClient
from agentwrap.terminal import alive

from .conftest import AgentSession
from .model_server import TOOL_COMMAND, TOOL_FILE
from .test_answering import _ServeEnv, answer, main_requests, next_tool_result
from .test_deny_list import ALLOW_EVERYTHING
from .test_hook_questions import audit, call_bash, stored_answers

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]
ON = "[run]\ncodex_app_server = true\n\n"


def start(make_session: Make, config: str = "") -> AgentSession:
    s = make_session("codex")
    s.write_config(ON + config)
    s.start()
    st = s.wait_state("ready", timeout=90)
    assert st["app_server"].startswith("on:"), st
    return s


def server_question(s: AgentSession, command: str, timeout: float = 90.0) -> dict[str, Any]:
    """The open question once it is the app-server's request for ``command``."""
    q: dict[str, Any] = s.wait_until(
        lambda: (st := s.state())["state"] == "waiting_input" and (q := st["question"])
        and q["source"] == "app-server" and q["command"] == command and q, timeout,
        f"the app-server's request for {command!r} as the session's question")
    return q


def ask_tool(s: AgentSession, typed: bool = False) -> tuple[dict[str, Any], int]:
    """The model asks to run TOOL_COMMAND: in a turn agentwrap starts (a message
    sent), or (``typed``) in one the person types in the TUI, which agentwrap
    learns of only from the server's status change."""
    seen = len(main_requests(s))
    if typed:
        s.type_keys("[[tool]] please create the file")
        time.sleep(0.5)  # an Enter right after the text is taken as part of a paste
        s.press("Enter")
    else:
        res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
        assert res.returncode == 0, res.stderr
    q = server_question(s, TOOL_COMMAND)
    assert (q["kind"], q["tool"], q["cwd"], q["command_unsure"]) == (
        "permission", "shell", str(s.workdir), ""), q
    assert q["questions"][0]["options"][0]["label"] == "Yes, proceed", q
    st = s.state()
    assert st["signal"] == "structured" and "app-server asks" in st["reason"], st
    assert not (s.workdir / TOOL_FILE).exists(), "the tool ran before anyone answered"
    return q, seen


def questions_shown(s: AgentSession) -> list[dict[str, Any]]:
    """Every question the session published, in order (its session.state events)."""
    import sqlite3

    db = sqlite3.connect(s._paths().db_path)
    try:
        rows = db.execute("SELECT data FROM events WHERE session = ? AND kind = 'session.state'"
                          " ORDER BY id", (s.name,)).fetchall()
    finally:
        db.close()
    return [q for (data,) in rows if (q := json.loads(data).get("question"))]


def dialog_closed(s: AgentSession) -> None:
    s.wait_until(lambda: "Would you like to run" not in s.screen(), 30, "the TUI's dialog closed")


@pytest.mark.parametrize("how", ["sent", "typed"])
def test_an_approval_answered_through_the_http_api_runs_the_exact_command(
    make_session: Make, how: str,
) -> None:
    from support.http_kit import serve

    s = start(make_session)
    q, seen = ask_tool(s, typed=how == "typed")  # the session's first turn
    shown = questions_shown(s)
    assert shown and {(x["id"], x["source"]) for x in shown} == {(q["id"], "app-server")}, shown
    server = serve(_ServeEnv(s))  # type: ignore[arg-type]
    served = next(server)
    try:
        with served.client() as c:
            started = time.monotonic()
            res = c.post(f"/api/sessions/{s.name}/answer", params={"wait": 30},
                         json={"option": 1, "questionId": q["id"]})
            print(f"codex app-server: answer applied in {time.monotonic() - started:.2f} s")
            assert res.status_code == 200, res.text
            out = res.json()
            assert (out["status"], out["source"]) == ("applied", "http"), out
            assert "replied 'accept'" in out["detail"], out  # a reply, not keys
    finally:
        server.close()
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    result = next_tool_result(s, seen)
    assert "declined" not in result.lower() and "reject" not in result.lower(), result
    dialog_closed(s)
    s.wait_state("ready", timeout=60)


@pytest.mark.parametrize("how", ["cli", "folder"])
def test_deny_is_the_dialogs_no_and_the_model_is_told(make_session: Make, how: str) -> None:
    s = start(make_session)
    q, seen = ask_tool(s)
    asked = len(main_requests(s))  # up to the one that called the tool
    if how == "cli":
        started = time.monotonic()
        code, out = answer(s, "--deny", "--question", q["id"])
        print(f"codex app-server: deny applied in {time.monotonic() - started:.2f} s (CLI)")
        assert code == 0 and out["status"] == "applied", out
        assert "replied 'cancel'" in out["detail"], out
    else:  # a file dropped in the session's answer folder
        folder = Path(s.cli_json("state", s.name)["answer_dir"])
        tmp = folder / ".answer.tmp"
        tmp.write_text(json.dumps({"questionId": q["id"], "answers": {"deny": True}}))
        tmp.rename(folder / "answer.json")
        s.wait_until(lambda: [a for a in stored_answers(s) if a[1] == "file"
                              and a[0] == "applied"], 30, "the folder's answer applied")
    s.wait_state("ready", timeout=60)  # the turn ended, as after Esc: no request since
    assert len(main_requests(s)) == asked, [r.reply for r in main_requests(s)]
    assert not (s.workdir / TOOL_FILE).exists()
    dialog_closed(s)
    marker = f"after-deny-{uuid.uuid4().hex[:8]}"
    assert s.send(f"[[reply: fine]] what now {marker}", "--wait", "--timeout", "90").returncode == 0
    s.wait_received(marker)
    result = next_tool_result(s, seen)
    print(f"codex: denied tool result {result[:300]}")
    assert "aborted" in result.lower(), result
    assert not (s.workdir / TOOL_FILE).exists()


def test_a_rule_approves_through_the_server_and_the_deny_list_still_holds(
    make_session: Make,
) -> None:
    s = make_session("codex")
    (s.home / "important").mkdir()
    (s.home / "important" / "notes.txt").write_text("keep me\n")
    s.write_config(ON + ALLOW_EVERYTHING)
    s.start()
    s.wait_state("ready", timeout=90)

    call_bash(s, "rm -rf ~/important")  # destructive: held for the person
    q = server_question(s, "rm -rf ~/important")
    vetoes = s.wait_until(lambda: [a for a in audit(s) if a["event"] == "policy_held"], 30,
                          "the policy's veto in the audit log")
    assert vetoes[0]["vetoed"] == "everything" and "built-in deny-list" in vetoes[0]["reason"], \
        vetoes
    assert s.state()["state"] == "waiting_input"
    assert not [a for a in audit(s) if a["event"] == "policy_answered"], audit(s)
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out
    s.wait_state("ready", timeout=60)
    assert (s.home / "important" / "notes.txt").read_text() == "keep me\n"

    s.send("[[tool]] please create the file", "--wait", "--timeout", "90")  # harmless
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 90, f"{TOOL_FILE} created by the rule")
    answered = s.wait_until(
        lambda: [a for a in audit(s) if a["event"] == "policy_answered"], 30,
        "the rule's answer in the audit log")
    assert [(a["rule"], a["command"]) for a in answered] == [("everything", TOOL_COMMAND)], answered
    applied = s.wait_until(
        lambda: [a for a in stored_answers(s) if a[1] == "policy" and a[0] == "applied"], 30,
        "the rule's answer applied")
    assert len(applied) == 1, stored_answers(s)
    s.wait_state("ready", timeout=60)
    assert (s.home / "important" / "notes.txt").read_text() == "keep me\n"


def test_answered_in_the_tui_first_the_question_is_gone_and_a_late_answer_does_nothing(
    make_session: Make,
) -> None:
    s = start(make_session)
    q, _seen = ask_tool(s)
    s.wait_until(lambda: "Would you like to run" in s.screen(), 30, "the TUI's dialog")
    s.press("Enter")  # the person approves in the terminal ("1. Yes, proceed" is preselected)
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    s.wait_until(lambda: (st := s.state())["question"] is None
                 or st["question"]["id"] != q["id"], 30, "the server's question cleared")
    code, out = answer(s, "--deny", "--question", q["id"])
    assert code != 0, out  # stale or no question: refused, nothing stored or sent
    assert not [a for a in stored_answers(s) if a[0] in ("pending", "applied")], stored_answers(s)
    s.wait_state("ready", timeout=60)



def test_the_server_killed_with_an_approval_open_the_session_goes_on_and_asks_again(
    make_session: Make,
) -> None:
    """kill -9 of the app-server while its request waits: the question goes with the
    connection (the screen decides meanwhile), the thread's status is read again
    from the new server (not the dead one's "waiting on approval"), a message is
    delivered, and the next approval comes through the new server's subscription."""
    s = start(make_session)
    ask_tool(s)
    pid = int(s.state()["app_server"].rsplit("pid ", 1)[1].rstrip(")"))
    os.killpg(pid, signal.SIGKILL)
    s.wait_until(lambda: not alive(pid), 30, "the app-server gone")
    s.wait_until(lambda: (st := s.state())["state"] == "ready" and st["question"] is None, 60,
                 "the session ready again, the dead server's question gone")
    marker = f"E2E{uuid.uuid4().hex[:8]}"
    res = s.send(f"after the kill {marker}", "--ack", "--wait", "--timeout", "90")
    assert res.returncode == 0 and res.stdout.startswith("acknowledged"), res.stdout + s.screen()
    assert len(s.wait_received(marker)) == 1
    s.wait_state("ready", timeout=60)
    q, _seen = ask_tool(s)  # subscribed again, on the new server
    code, out = answer(s, "--option", "1", "--question", q["id"])
    assert code == 0 and out["status"] == "applied" and "replied 'accept'" in out["detail"], out
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    s.wait_state("ready", timeout=60)


PLAN_QUESTION = {"questions": [{
    "id": "db", "header": "Database", "question": "Which database should I use?",
    "options": [{"label": "SQLite", "description": "One file"},
                {"label": "Postgres", "description": "A server"}]}]}


def test_a_question_left_to_the_terminal_waits_for_the_person_and_nothing_hangs(
    make_session: Make,
) -> None:
    """``item/tool/requestUserInput`` (Codex's question, in Plan mode) is not answered
    through the server: the session waits on it (``waiting_input``, what asks named),
    nothing answers it, a message sent meanwhile waits; the person answers in the
    TUI and the message goes in after. Plan mode is asked for the way the TUI asks
    for it: ``collaborationMode`` on the turn (here from a connection of the test's)."""
    s = start(make_session)
    sock = Path(s.state()["app_server"].split("unix://", 1)[1].split(" ", 1)[0])
    call = "request_user_input " + json.dumps(PLAN_QUESTION)
    with AppServerClient.connect(sock) as client:
        thread = next(t for t in client.loaded_threads()
                      if not client.read_thread(t).get("ephemeral"))
        client.request("turn/start", {
            "threadId": thread, "clientUserMessageId": f"plan-{uuid.uuid4().hex[:8]}",
            "input": [{"type": "text", "text": f"[[call: {call}]] plan it", "text_elements": []}],
            "collaborationMode": {"mode": "plan", "settings": {"model": "gpt-5-codex"}}})
    st = s.wait_until(lambda: (x := s.state())["state"] == "waiting_input" and x, 60,
                      "the session waiting on Codex's question")
    print(f"codex requestUserInput: {st['signal']}/{st['rule']}: {st['reason']}"
          f" question={st['question'] and st['question']['source']}")
    assert not (st["question"] and st["question"]["source"] == "app-server"), st
    marker = f"E2E{uuid.uuid4().hex[:8]}"
    mid = s.send_id(f"sent while Codex asks {marker}")
    time.sleep(3.0)
    assert s.state()["state"] == "waiting_input"
    assert not s.received_with(marker)
    assert not stored_answers(s)  # nothing answered it
    s.wait_until(lambda: "Which database" in s.screen(), 30, "Codex's question on screen")
    s.press("Enter")  # the person picks the first option in the TUI
    s.wait_until(lambda: s.received_with(marker), 90, "delivery after the question was answered")
    assert len(s.received_with(marker)) == 1
    s.wait_until(lambda: s.message(mid)["status"] in ("delivered", "acknowledged"), 60,
                 "delivered")
