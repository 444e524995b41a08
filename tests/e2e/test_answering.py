"""Answering a real agent's dialog with `agentwrap answer`, end to end.

The model server scripts a tool call that needs the person's permission
(Claude Code: Bash; Codex: a shell command asking for escalation; Gemini:
run_shell_command; Aider: the new file its edit creates). The session must go
``waiting_input`` with the question parsed (kind, tool, command), and the
answer typed by the supervisor must close the dialog. What the agent did with
it is read from the model server's request log (the tool result in the next
request) and from the project directory (the file the tool creates), never
from the screen alone. Waits are deadlines, never thresholds.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .agents import AGENT_NAMES
from .conftest import AgentSession
from .model_server import TOOL_FILE

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]

# The permission dialog [[tool]] opens in each agent: (dialog, tool, command).
PERMISSION: dict[str, tuple[str, str, str]] = {
    "claude": ("permission", "Bash", "touch tool_ran.txt"),
    "codex": ("permission", "shell", "touch tool_ran.txt"),
    "gemini": ("permission", "Shell", "touch tool_ran.txt"),
    "aider": ("edit_file", "edit", TOOL_FILE),
}


def tool_results(body: Any) -> list[str]:
    """Every tool result a model request carries, oldest first, as text (Anthropic
    tool_result, Responses function_call_output, Gemini functionResponse)."""
    found: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            kind = x.get("type")
            if kind == "tool_result":
                found.append(json.dumps(x.get("content"), ensure_ascii=False))
                return
            if kind in ("function_call_output", "custom_tool_call_output"):
                found.append(json.dumps(x.get("output"), ensure_ascii=False))
                return
            if "functionResponse" in x:
                found.append(json.dumps(x["functionResponse"], ensure_ascii=False))
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(body)
    return found


def main_requests(s: AgentSession) -> list[Any]:
    return [r for r in s.server.requests() if not r.side and r.api != "other"]


def tool_call_count(s: AgentSession) -> int:
    return sum(1 for r in main_requests(s) if (r.reply or "").startswith("tool_call:"))


def next_tool_result(s: AgentSession, after: int, timeout: float = 60.0) -> str:
    """The newest tool result of the first main request after request number ``after``
    that carries more tool results than before."""
    def arrived() -> str | None:
        reqs = main_requests(s)
        before = len(tool_results(reqs[after - 1].body)) if after else 0
        for r in reqs[after:]:
            got = tool_results(r.body)
            if len(got) > before:
                return got[-1]
        return None

    result: str = s.wait_until(arrived, timeout, "the tool result at the model")
    return result


def on_app_server(s: AgentSession) -> bool:
    """Whether the session's Codex runs on agentwrap's app-server (``[run]
    codex_app_server``): its approvals are then the server's requests (question
    source ``app-server``, the exact command), not a dialog read off the screen."""
    return str(s.state().get("app_server") or "").startswith("on:")


def wait_question(s: AgentSession, timeout: float = 90.0) -> dict[str, Any]:
    s.wait_state("waiting_input", timeout=timeout)
    q: dict[str, Any] = s.wait_until(
        lambda: (st := s.state())["state"] == "waiting_input" and st["question"], 30,
        "the parsed question in the registry",
    )
    return q


def answer(s: AgentSession, *args: str, timeout: float = 30) -> tuple[int, dict[str, Any]]:
    res = s.cli("answer", s.name, *args, "--json", "--timeout", str(timeout))
    data = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {}
    return res.returncode, data | ({"stderr": res.stderr} if res.stderr else {})


def open_permission(s: AgentSession) -> tuple[dict[str, Any], int]:
    s.start()
    s.wait_state("ready", timeout=90)
    res = s.send("[[tool]] please create the file", "--wait", "--timeout", "90")
    assert res.returncode == 0, res.stderr
    q = wait_question(s)
    dialog, tool, command = PERMISSION[s.agent]
    assert q["kind"] == "permission", q
    assert (q["dialog"], q["tool"], q["command"]) == (dialog, tool, command), q
    assert not (s.workdir / TOOL_FILE).exists(), "the tool ran before anyone answered"
    return q, len(main_requests(s))


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_permission_approved_runs_the_tool(make_session: Make, agent: str) -> None:
    s = make_session(agent)
    q, seen = open_permission(s)
    started = time.monotonic()
    code, out = answer(s, "--option", "1", "--question", q["id"])
    print(f"{agent}: answer applied in {time.monotonic() - started:.2f} s: {out.get('detail')}")
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    if agent == "aider":  # no tools: the approved edit wrote the file, nothing goes back
        assert (s.workdir / TOOL_FILE).read_text().strip() == "tool ran"
    else:
        result = next_tool_result(s, seen)
        print(f"{agent}: tool result {result[:300]}")
        assert "denied" not in result.lower() and "reject" not in result.lower(), result
    s.wait_state("ready", timeout=60)


DENY_AGENTS = ("claude", "codex", "gemini", "aider")
# What each agent tells its model about the refused call. Esc (their deny key)
# ends the turn: the refusal goes to the model with the person's next message.
# Gemini drops the cancelled call from its history: the model never hears of it.
REFUSAL = {
    "claude": "doesn't want to proceed",
    "codex": "aborted",
}


@pytest.mark.parametrize("agent", DENY_AGENTS)
def test_permission_denied_runs_nothing(make_session: Make, agent: str) -> None:
    s = make_session(agent)
    q, _ = open_permission(s)
    code, out = answer(s, "--deny", "--question", q["id"])
    print(f"{agent}: deny: {out.get('detail')}")
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    s.wait_state("ready", timeout=60)
    marker = f"after-deny-{time.monotonic_ns()}"
    assert s.send(f"[[reply: fine]] what now {marker}", "--wait", "--timeout", "90").returncode == 0
    s.wait_received(marker)
    req = next(r for r in main_requests(s) if marker in (r.user_text or ""))
    results = tool_results(req.body)
    print(f"{agent}: tool results with the next message: {[r[:200] for r in results]}")
    if agent in REFUSAL:
        assert results and REFUSAL[agent] in results[-1].lower(), results
    else:  # Gemini: the call is gone from the history; aider has no tools
        assert not results, results
        assert "functionCall" not in json.dumps(req.body)
    assert not (s.workdir / TOOL_FILE).exists(), "the denied tool ran"


def test_stale_answer_is_refused_on_a_real_agent(make_session: Make) -> None:
    """An answer to a question that closed (denied), given while the agent asks
    another one (a different command), is refused and nothing is typed."""
    s = make_session("claude")
    old, _ = open_permission(s)
    assert answer(s, "--deny", "--question", old["id"])[0] == 0
    s.wait_state("ready", timeout=60)
    call = {"command": "touch other.txt", "description": "Create other.txt"}
    res = s.send(f"[[call: Bash {json.dumps(call)}]] make another", "--raw", "--wait")
    assert res.returncode == 0, res.stderr
    new = wait_question(s)
    assert new["id"] != old["id"] and new["command"] == "touch other.txt", new
    code, out = answer(s, "--option", "1", "--question", old["id"])
    print(f"stale: exit {code}: {out}")
    assert code == 5, out
    time.sleep(1.0)
    assert s.state()["question"]["id"] == new["id"]
    assert not (s.workdir / "other.txt").exists() and not (s.workdir / TOOL_FILE).exists()
    code, out = answer(s, "--option", "1", "--question", new["id"])
    assert code == 0, out
    s.wait_until(lambda: (s.workdir / "other.txt").exists(), 60, "other.txt created")


ASK_TWO = {
    "questions": [
        {"question": "Which database should I use?", "header": "Database",
         "options": [{"label": "SQLite", "description": "One file, no server"},
                     {"label": "Postgres", "description": "A server"}],
         "multiSelect": False},
        {"question": "Which features do you want?", "header": "Features",
         "options": [{"label": "Search", "description": "Full-text search"},
                     {"label": "Backups", "description": "Nightly copies"},
                     {"label": "Metrics", "description": "Prometheus"}],
         "multiSelect": True},
    ]
}


def capture(s: AgentSession, desc: str) -> None:
    """With AW_CAPTURE_DIR set, keep the screen as a fixture (tests/fixtures/screens)."""
    where = os.environ.get("AW_CAPTURE_DIR")
    if not where:
        return
    for ext, flags in (("txt", ["-p"]), ("ansi", ["-p", "-e"])):
        text = s.tmux("capture-pane", *flags, "-t", f"={s.name}:0.0").stdout
        (Path(where) / f"waiting_input__{desc}__160x45.{ext}").write_text(text)


def answered_by_claude(result: str) -> str:
    """The answers part of Claude's AskUserQuestion tool result, unescaped:
    'Your questions have been answered: "Q1"="A", "Q2"="B, C". ...'."""
    text = json.loads(result) if result.startswith('"') else result
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    return text.replace('\\"', '"')


def press_until(s: AgentSession, key: str, shown: Callable[[], Any], what: str,
                tries: int = 3) -> Any:
    """Press ``key`` until the screen shows its effect (``shown``), at most ``tries``
    times, each given a few seconds: a key the agent dropped is pressed again."""
    for i in range(tries):
        s.press(key)
        try:
            return s.wait_until(shown, 5, f"{what} after {key} (press {i + 1})")
        except AssertionError:
            if i == tries - 1:
                raise
    raise AssertionError("unreachable")


def test_claude_ask_user_question_two_questions(make_session: Make) -> None:
    """AskUserQuestion, two questions shown as tabs, the second multi-select,
    answered in one `agentwrap answer --answer ... --answer ...`. Before that, a
    person ticked "Backups" on the second tab by hand and left the dialog there:
    agentwrap goes back to the first tab, looks at both, picks SQLite, ticks
    exactly Search and Metrics (unticking Backups), and submits the review. An
    answer naming an old question id is refused first, and nothing is typed. The
    model's next request carries exactly the chosen answers."""
    s = make_session("claude")
    s.start()
    s.wait_state("ready", timeout=90)
    prompt = f"[[call: AskUserQuestion {json.dumps(ASK_TWO)}]] Set up storage"
    assert s.send(prompt, "--raw", "--wait", "--timeout", "90").returncode == 0
    q = wait_question(s)
    capture(s, "ask-two-questions")
    (item,) = q["questions"]
    assert (q["kind"], q["tool"], item["question"], item["multiSelect"], q["tabs"]) == (
        "choice", "AskUserQuestion", "Which database should I use?", False,
        ["Database", "Features"]), q
    assert [o["label"] for o in item["options"]][:2] == ["SQLite", "Postgres"]
    seen = len(main_requests(s))

    # a person: to Features (Claude Code 2.1.332 drops a Tab pressed within about
    # 0.2 s of the dialog's drawing: pressed again while the tab has not switched,
    # as a person would), then ticks 2. Backups
    press_until(s, "Tab", lambda: (st := s.state())["question"]
                and st["question"]["id"] != q["id"], "the Features tab")
    s.press("Down", "Space")
    second = s.wait_until(
        lambda: (st := s.state())["question"] and st["question"]["id"] != q["id"]
        and st["question"]["questions"][0]["options"][1]["checked"] and st["question"],
        30, "Backups ticked on the second tab")
    (item,) = second["questions"]
    assert item["question"] == "Which features do you want?" and item["multiSelect"], second
    assert second["tabs"] == ["Database", "Features"]

    code, out = answer(s, "--answer", "Database=SQLite", "--answer", "Features=1,3",
                       "--question", q["id"])  # the first tab's id: not the one open now
    assert code == 5, out
    assert s.state()["question"]["id"] == second["id"]

    started = time.monotonic()
    code, out = answer(s, "--answer", "database=sql", "--answer", "Features=Search,3",
                       "--question", second["id"], timeout=60)
    print(f"claude: both questions answered in {time.monotonic() - started:.2f} s:"
          f" {out.get('detail')}")
    assert code == 0 and out["status"] == "applied", (out, s.screen())
    assert out["answer"]["answers"] == [
        {"tab": 0, "header": "Database", "values": ["sql"]},
        {"tab": 1, "header": "Features", "values": ["Search", "3"]}], out
    result = answered_by_claude(next_tool_result(s, seen))
    print(f"claude: AskUserQuestion result {result}")
    assert ('"Which database should I use?"="SQLite", '
            '"Which features do you want?"="Search, Metrics".') in result, result
    s.wait_state("ready", timeout=60)
    # the person was told about the tabs they saw, never about those agentwrap walked through
    audit = [json.loads(x) for x in s._paths().audit_log.read_text().splitlines()]
    told = {a["question"] for a in audit if a["event"] == "told_waiting"}
    assert told <= {q["id"], second["id"]}, (told, q["id"], second["id"])


ASK_FEATURES = {"questions": [ASK_TWO["questions"][1]]}


def test_claude_multi_select_through_the_answer_folder(make_session: Make) -> None:
    """One multi-select question (Claude still shows a tab bar and a review):
    the options to tick, by label and number, in a file dropped in the
    session's answer folder. agentwrap ticks them, goes on to the review and
    submits it; the model gets exactly those options."""
    s = make_session("claude")
    s.start()
    s.wait_state("ready", timeout=90)
    prompt = f"[[call: AskUserQuestion {json.dumps(ASK_FEATURES)}]] Pick features"
    assert s.send(prompt, "--raw", "--wait", "--timeout", "90").returncode == 0
    q = wait_question(s)
    (item,) = q["questions"]
    assert item["multiSelect"] and q["tabs"] == ["Features"], q
    seen = len(main_requests(s))
    folder = Path(s.cli_json("state", s.name)["answer_dir"])
    doc = {"questionId": q["id"], "answers": {"options": ["Backups", 3]}}
    tmp = folder / ".answer.tmp"
    tmp.write_text(json.dumps(doc))
    tmp.rename(folder / "answer.json")
    s.wait_until(lambda: not (folder / "answer.json").exists(), 30, "the file taken")
    assert not list(folder.glob("*.rejected")), list(folder.iterdir())
    result = answered_by_claude(next_tool_result(s, seen))
    print(f"claude (file): AskUserQuestion result {result}")
    assert '"Which features do you want?"="Backups, Metrics".' in result, result
    s.wait_state("ready", timeout=60)


class _ServeEnv:
    """What tests/support/http_kit.serve needs of a test environment, for a real
    agent's session (its env, project and a CLI that checks)."""

    def __init__(self, s: AgentSession) -> None:
        self.s, self.env, self.root, self.project = s, s.env, s.root, s.workdir

    def cli(self, *args: str, check: bool = False) -> Any:
        res = self.s.cli(*args)
        assert not check or res.returncode == 0, res.stderr
        return res


def test_permission_approved_through_the_http_api(make_session: Make) -> None:
    """The API's answer, on a real agent: `agentwrap serve` on 127.0.0.1 takes
    POST /api/sessions/{name}/answer, a stale id gets 409 and changes nothing,
    the right one is typed, the tool runs and its result reaches the model."""
    from support.http_kit import serve

    s = make_session("claude")
    q, seen = open_permission(s)
    server = serve(_ServeEnv(s))  # type: ignore[arg-type]
    served = next(server)
    try:
        with served.client() as c:
            url = f"/api/sessions/{s.name}/answer"
            stale = c.post(url, json={"option": 1, "questionId": "0" * 16})
            assert stale.status_code == 409, stale.text
            assert not (s.workdir / TOOL_FILE).exists()
            assert s.state()["question"]["id"] == q["id"]  # still open, untouched
            res = c.post(url, params={"wait": 30}, json={"option": 1, "questionId": q["id"]})
            assert res.status_code == 200, res.text
            out = res.json()
            assert (out["status"], out["source"]) == ("applied", "http"), out
    finally:
        server.close()
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
    result = next_tool_result(s, seen)
    assert "denied" not in result.lower() and "reject" not in result.lower(), result
    s.wait_state("ready", timeout=60)
