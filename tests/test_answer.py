"""Answering the question a waiting agent shows, end to end with the stand-in.

``agentwrap answer`` (and ``POST /api/sessions/{name}/answer``) store an answer
the service checked against the question in the registry; the supervisor types
it with the agent's own keys while the same question is open and checks on
screen that the dialog closed. The stand-in's dialogs move a cursor with
Up/Down, pick with Enter or a digit, cancel with Esc, and record each choice in
``LOG.answers``, so a test sees exactly which option the agent got.

Every refusal is checked to have typed nothing: the stand-in recorded no
choice and the pane still shows the same dialog. Waits are deadlines only.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from conftest import AwEnv
from support.delivery_kit import pane_text, send, wait_terminal, write_config
from support.http_kit import InProcess, in_process, register
from support.waiting import wait_for

from agentwrap.answers.actions import OptionAnswer
from agentwrap.answers.store import AnswerStore
from agentwrap.datagram import wake
from agentwrap.detect.question import Item, Option, Question, question_id
from agentwrap.detect.states import State
from agentwrap.paths import Paths
from agentwrap.surfaces.http.sse import public_events


def choices(aw: AwEnv) -> list[dict[str, Any]]:
    """What the stand-in recorded for each dialog it closed, in order."""
    path = aw.log.with_name(aw.log.name + ".answers")
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def answered_events(aw: AwEnv, n: int = 2) -> list[Any]:
    """The session's first ``n`` ``session.answered`` events, once there are that many."""
    store = aw.store()
    try:
        return list(wait_for(lambda: (e := store.events(0, session="sa", kinds=[
            "session.answered"])) and len(e) >= n and e[:n], 15, "the answer applied"))
    finally:
        store.close()


def open_dialog(aw: AwEnv, n: int = 1) -> dict[str, Any]:
    """Have the stand-in open its dialog; the question the registry then holds."""
    mid = send(aw, "sa", f"please OPENDIALOG {n}")
    assert wait_terminal(aw, mid).status.value == "delivered"
    rec = aw.wait_state("sa", "waiting_input")
    q = wait_for(lambda: aw.registry().get("sa").question, 20, "the question in the registry")
    assert rec.state == "waiting_input"
    return dict(q)


def answer(aw: AwEnv, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    res = aw.cli("answer", "sa", *args, "--json", "--timeout", "30")
    data = json.loads(res.stdout) if res.stdout.strip().startswith("{") else None
    return res.returncode, data, res.stderr


def dialog_on_screen(aw: AwEnv) -> str:
    """The pane from the dialog's rule down (the transcript above may still grow)."""
    text = pane_text(aw)
    return text[text.rfind("─" * 10):]


def refused(aw: AwEnv, args: tuple[str, ...], code: int, words: str) -> None:
    """The answer is refused with ``code``, and nothing reaches the pane."""
    before_choices, before = len(choices(aw)), dialog_on_screen(aw)
    res = aw.cli("answer", "sa", *args)
    assert res.returncode == code, (args, res.returncode, res.stdout, res.stderr)
    assert words in res.stderr, (args, res.stderr)
    assert "hint:" in res.stderr or code == 2  # 2: argparse's usage error
    time.sleep(0.3)  # a supervisor turn would have typed by now (not a timing assertion)
    assert len(choices(aw)) == before_choices
    assert dialog_on_screen(aw) == before


def test_an_option_by_number_moves_the_cursor_then_enter(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    refused(aw, ("--option", "1"), 4, "no open question")  # not waiting: nothing to answer
    q = open_dialog(aw)
    assert q["highlighted"] == 1
    code, data, err = answer(aw, "--option", "2", "--question", q["id"])
    assert code == 0, (data, err)
    assert data is not None and data["status"] == "applied", data
    assert data["questionId"] == q["id"] and data["answer"]["number"] == 2
    assert "option 2 (No)" in data["detail"] and "dialog closed" in data["detail"]
    assert [c["choice"] for c in choices(aw)] == ["chose 2. No"]  # the agent got "No"
    assert "(dialog answered) chose 2. No" in pane_text(aw)
    assert aw.wait_state("sa", "ready", "busy").question is None
    store = aw.store()
    try:
        answered = [e for e in store.events(0, session="sa", kinds=["session.answered"])]
    finally:
        store.close()
    assert [e.data["status"] for e in answered] == ["pending", "applied"]
    assert {e.subject for e in answered} == {data["id"]}
    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines()]
    assert [a["event"] for a in audit if a.get("answer") == data["id"]] == [
        "answer_requested", "answer_applied"]


def test_labels_refusals_deny_and_free_text_on_a_choice(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG", "--dialog-style", "choice")
    aw.wait_state("sa", "ready")
    q = open_dialog(aw, 1)
    assert [o["label"] for o in q["questions"][0]["options"]] == [
        "SQLite", "Postgres", "Type something."]
    assert q["free_text_allowed"] and q["kind"] == "choice"
    # refused, each with nothing typed
    refused(aw, ("--option", "7"), 65, "no option 7")
    refused(aw, ("--option", "Oracle"), 65, "no option 'Oracle'")
    refused(aw, ("--question", "0123456789ab", "--option", "1"), 5, "asks something else now")
    refused(aw, ("--text", "/etc/passwd"), 65, "must not start with '/'")
    refused(aw, ("--text", "ok\x1b[201~\rrm -rf /"), 65, "control characters")
    refused(aw, ("--text", "!rm -rf ~"), 65, "must not start with '!'")
    refused(aw, ("--text", "yes\nrm -rf ~"), 65, "line breaks")
    refused(aw, ("--options", "1,2"), 65, "answer only a multi-select question")
    refused(aw, ("--answer", "Colour=1"), 65, "the question open is 'Database'")
    refused(aw, ("--option", "1", "--deny"), 2, "not allowed with")  # argparse: one of them
    # a label by case-insensitive unique prefix; --answer HEADER=... for a question alone
    code, data, err = answer(aw, "--answer", "database=post")
    assert code == 0 and data is not None and data["status"] == "applied", (data, err)
    assert choices(aw)[-1]["choice"] == "chose 2. Postgres"
    # deny: Esc
    open_dialog(aw, 2)
    code, data, err = answer(aw, "--deny")
    assert code == 0 and data is not None and data["status"] == "applied", (data, err)
    assert choices(aw)[-1]["choice"] == "cancelled"
    # free text: the option that asks for it, Enter, the text, Enter
    open_dialog(aw, 3)
    code, data, err = answer(aw, "--text", "SQLite, but keep it in memory")
    assert code == 0 and data is not None and data["status"] == "applied", (data, err)
    assert choices(aw)[-1] == {**choices(aw)[-1], "option": 3,
                               "text": "SQLite, but keep it in memory"}
    assert len(choices(aw)) == 3


def test_a_yes_no_prompt_gets_its_letter_then_enter(aw: AwEnv) -> None:
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG", "--dialog-style", "yn")
    aw.wait_state("sa", "ready")
    q = open_dialog(aw, 1)
    assert [(o["label"], o["key"]) for o in q["questions"][0]["options"]] == [
        ("Yes", "y"), ("No", "n"), ("Don't ask again", "d")]
    assert (q["kind"], q["tool"], q["command"]) == ("confirm", "shell", "touch x")
    refused(aw, ("--text", "maybe"), 65, "takes no free text")
    code, data, err = answer(aw, "--option", "no")
    assert code == 0 and data is not None and data["status"] == "applied", (data, err)
    assert choices(aw)[-1]["choice"] == "chose n"
    open_dialog(aw, 2)
    code, data, err = answer(aw, "--deny")  # the profile's deny keys: n, Enter
    assert code == 0 and data is not None and data["status"] == "applied", (data, err)
    assert choices(aw)[-1]["choice"] == "chose n"
    open_dialog(aw, 3)
    code, data, err = answer(aw, "--option", "1")  # options without numbers: by position
    assert code == 0 and data is not None and data["status"] == "applied", (data, err)
    assert [c["choice"] for c in choices(aw)] == ["chose n", "chose n", "chose y"]


def test_the_supervisor_types_nothing_for_another_question(aw: AwEnv) -> None:
    """An answer stored for a question that is not the one on screen (the agent
    moved on between the check and the supervisor's turn) ends stale, untyped."""
    write_config(aw, readiness_timeout_s=60)
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    open_dialog(aw)
    before = dialog_on_screen(aw)
    answers = AnswerStore(aw.paths.db_path, events_dir=aw.paths.events_dir)
    try:
        a = answers.request("sa", "0123456789ab", OptionAnswer(2, 2, "No"))
        wake(aw.paths, "sa")
        done = wait_for(lambda: (x := answers.get(a.id)).ended and x, 30, "the answer's end")
    finally:
        answers.close()
    assert done.status == "stale" and "asks something else now" in done.detail, done
    assert choices(aw) == [] and dialog_on_screen(aw) == before
    assert aw.registry().get("sa").state == "waiting_input"


# --- the HTTP endpoint, in process (no agent: the question is put in the registry) ----------


def _waiting(paths: Paths, name: str, q: Question | None = None) -> Question:
    item = Item(question="Do you want to proceed?",
                options=(Option("Yes", number=1), Option("No", number=2)))
    q = q or Question(id=question_id("permission", (item,), "Bash", "touch x"),
                      kind="permission", title="Bash command", questions=(item,), highlighted=1,
                      tool="Bash", command="touch x", dialog="permission")
    from agentwrap.sessions.registry import Registry

    reg = Registry(paths.db_path)
    try:
        reg.set_state(name, State.WAITING_INPUT, signal="screen", rule="dialog:permission",
                      reason="permission dialog", evidence="", quiet_ms=0, draft=False,
                      changed=True, question=q.to_json())
    finally:
        reg.close()
    return q


@pytest.fixture
def api(aw: AwEnv) -> InProcess:
    return in_process(aw)


def test_http_answer_codes(aw: AwEnv, api: InProcess) -> None:
    register(aw, "sa")
    url = "/api/sessions/sa/answer"
    r = api.post(url, json={"option": 1})
    assert r.status_code == 409 and r.json()["error"] == "No open question", r.text
    q = _waiting(aw.paths, "sa")
    assert api.post("/api/sessions/nope/answer", json={"option": 1}).status_code == 404
    r = api.post(url, json={"option": 1, "questionId": "0123456789ab"})
    assert r.status_code == 409 and r.json()["error"] == "Stale answer", r.text
    assert q.id in r.json()["detail"]
    for bad in ({"option": 9}, {"option": "Maybe"}, {}, {"option": 1, "deny": True},
                {"text": "/compact"}, {"options": [1, 2]}, {"option": 1, "extra": 1},
                {"option": True}):
        r = api.post(url, json=bad)
        assert r.status_code == 400, (bad, r.text)
    # text the agent would act on (Claude Code: @path reads a file), refused before anything
    register(aw, "cc", profile="claude")
    _waiting(aw.paths, "cc")
    for hostile, words in (("read @/etc/passwd", "file mention"),
                           ("ok \x1b[201~\r", "control characters"), ("/compact", "'/'")):
        r = api.post("/api/sessions/cc/answer", json={"text": hostile})
        assert r.status_code == 400 and words in r.json()["detail"], (hostile, r.text)
    r = api.post(url + "?wait=0", json={"option": "no", "questionId": q.id})
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["status"], out["questionId"], out["supervised"]) == ("pending", q.id, False)
    assert out["answer"] == {"how": "option", "option": 2, "number": 2, "label": "No"}
    assert out["question"]["id"] == q.id
    store = aw.store()
    try:
        (ev,) = store.events(0, session="sa", kinds=["session.answered"])
    finally:
        store.close()
    (pub,) = public_events(ev)
    assert pub.type == "session.answered" and pub.data["answerId"] == out["id"]
    assert pub.data["status"] == "pending" and pub.data["source"] == "http"


def _features_tab() -> Question:
    """Claude's AskUserQuestion, two questions as tabs, the multi-select one open
    (as read from tests/fixtures/screens/claude/waiting_input__ask-multi-select)."""
    item = Item(question="Which features do you want?", multiSelect=True, options=(
        Option("Search", number=1, checked=False), Option("Backups", number=2, checked=True),
        Option("Metrics", number=3, checked=False), Option("Type something", number=4,
                                                           checked=False),
        Option("Chat about this", number=5)))
    tabs = ("Database", "Features")
    return Question(id=question_id("question", (item,), "AskUserQuestion", None, tabs),
                    kind="choice", title="Which features do you want?", questions=(item,),
                    highlighted=1, tool="AskUserQuestion", dialog="question", tabs=tabs)


def test_http_multi_select_and_several_questions(aw: AwEnv, api: InProcess) -> None:
    """What is stored for --options and --answer (the supervisor types it: see
    tests/e2e/test_answering.py on the real Claude Code), and what is refused."""
    register(aw, "cc", profile="claude")
    q = _waiting(aw.paths, "cc", _features_tab())
    shown = aw.cli("state", "cc", check=True).stdout  # what a person reads to answer it
    for line in ("questions: 1. Database, 2. Features", "(several: --options)", "2. [x] Backups",
                 "--answer QUESTION=CHOICE"):
        assert line in shown, shown
    url = "/api/sessions/cc/answer?wait=0"
    r = api.post(url, json={"options": ["search", 3], "questionId": q.id})
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == {"how": "options", "numbers": [1, 3],
                                  "labels": ["Search", "Metrics"]}
    assert r.json()["question"]["tabs"] == ["Database", "Features"]
    r = api.post(url, json={"option": "Backups"})  # one option of a multi-select: tick only it
    assert r.json()["answer"]["numbers"] == [2], r.text
    r = api.post(url, json={"answers": {"database": "SQLite", "2": ["Search", 3]}})
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == {"how": "answers", "tabs": ["Database", "Features"], "answers": [
        {"tab": 0, "header": "Database", "values": ["SQLite"]},
        {"tab": 1, "header": "Features", "values": ["Search", "3"]}]}
    for bad, words in (
            ({"options": [4]}, "not an option to tick"),  # "Type something": a text field
            ({"options": [5]}, "not an option to tick"),
            ({"options": [9]}, "no option 9"),
            ({"options": []}, "no options given"),
            ({"answers": {"Database": "SQLite"}}, "missing: Features"),
            ({"answers": {"Database": 1, "Colour": 2}}, "no question 'Colour'"),
            ({"answers": {"1": 1, "database": 2, "2": 1}}, "answered twice"),
            ({"answers": {"Database": True, "Features": 1}}, ""),
            ({"answers": {"Database": "ok\x1b[2J", "Features": 1}}, "")):
        r = api.post(url, json=bad)
        assert r.status_code == 400 and words in r.text, (bad, r.text)
    r = api.post(url, json={"options": [1], "questionId": "0123456789ab"})
    assert r.status_code == 409 and r.json()["error"] == "Stale answer", r.text
