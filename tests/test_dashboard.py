"""The web dashboard, in a real headless Chromium against the real server.

`agentwrap serve` runs as a subprocess, a person's browser logs in through
the one-time link, and what the page shows is checked as a person would see
it: a message sent with the CLI appears without a reload (the event stream),
one sent from the page reaches a stand-in agent, hostile content stays text,
escalations and questions raise a toast, a question is answered with a click
(the stand-in records the choice), and without a login the page says how to
get one. Screenshots are kept (tests/support/browser.py says where).
Waits are deadlines, never thresholds.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from conftest import AwEnv
from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from support.browser import Browser, chromium
from support.delivery_kit import arrivals_of, pane_text, press, send, type_keys, write_config
from support.http_kit import Served, in_process, register, serve, serve_for_a_page
from support.page_kit import login, problems
from support.records import record

from agentwrap.detect.states import State
from agentwrap.message import QueueLimits
from agentwrap.queue.backend import ENV as STORE_ENV
from agentwrap.queue.backend import open_store
from agentwrap.sessions import hosts
from agentwrap.sessions.hosts import ENV as HOST_ENV
from agentwrap.sessions.registry import Registry
from agentwrap.surfaces.http import dashboard
from agentwrap.surfaces.http.dashboard import CSP
from agentwrap.terminal.proctree import start_time

HOSTILE = "<img src=x onerror=alert(1)> \x1b[31mred\x1b[0m [bold]rich markup[/] <script>alert(2)</script>"
HOSTILE_ID = "evil<b>bold</b><img src=y onerror=alert(3)>"
# the <script> elements of index.html: xterm.js, its fit addon, terminal.js, conversation.js, app.js
PAGE_SCRIPTS = 5


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    yield from serve_for_a_page(aw)


@pytest.fixture
def page(request: pytest.FixtureRequest, browser: None) -> Iterator[Browser]:
    yield from chromium(request.node.name)


def card(name: str) -> str:
    return f'#session-list li[data-session="{name}"]'


# --- serving ----------------------------------------------------------------------------


def test_page_and_files_are_served_with_a_strict_policy(aw: AwEnv) -> None:
    app = in_process(aw)
    for path, kind in (("/", "text/html"), ("/static/app.js", "text/javascript"),
                       ("/static/app.css", "text/css"), ("/static/terminal.js", "text/javascript"),
                       ("/static/vendor/xterm.js", "text/javascript"),
                       ("/static/vendor/addon-fit.js", "text/javascript"),
                       ("/static/vendor/xterm.css", "text/css"),
                       ("/static/vendor/xterm.LICENSE", "text/plain")):
        r = app.get(path, auth=False)
        assert r.status_code == 200, (path, r.text)
        assert r.headers["content-type"].startswith(kind)
        assert r.headers["content-security-policy"] == CSP
        directives = dict(d.strip().split(" ", 1) for d in CSP.split(";"))
        # no inline or evaluated script, ever (xterm.js needs inline styles only)
        assert directives["script-src"] == "'self'" and directives["default-src"] == "'self'"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"
    html = app.get("/", auth=False).text
    assert "<script>" not in html and "style=" not in html and "<style" not in html
    for path in ("/static/nope.js", "/static/..%2Fdashboard.py", "/static/index.html%00",
                 "/static/vendor/nope.js", "/static/vendor/..%2F..%2Fdashboard.py",
                 "/static/vendor/xterm.js.map"):
        assert app.get(path, auth=False).status_code == 404, path
    paths = app.get("/openapi.json", auth=False).json()["paths"]
    assert "/" not in paths and not any(p.startswith("/static") for p in paths)


# --- in the browser --------------------------------------------------------------------------


def test_without_login_the_page_says_how_to_log_in(aw: AwEnv, server: Served, page: Browser) -> None:
    page.open(server.url + "/")
    page.wait(lambda: page.shown("#login"), "the login panel")
    assert not page.shown("#main")
    assert "agentwrap token --link" in page.text("#login")
    assert "agentwrap serve" in page.text("#login")
    page.shot("login-panel")

    # the link serve printed works once; opened again it says why it does not
    assert server.proc.stdout is not None
    printed = server.proc.stdout.readline()
    assert "#login=" in printed, printed
    link = printed.split("dashboard: ", 1)[1].split()[0]
    page.open(link)
    page.wait(lambda: page.shown("#main"), "the dashboard after the printed link")
    page.driver.execute_script("localStorage.clear()")
    page.open(link)
    page.wait(lambda: page.shown("#login") and "used already" in page.text("#login-why"),
              "the reused link refused, saying it was used already")
    page.shot("login-link-reused")
    assert not problems(page)


def test_a_message_sent_with_the_cli_appears_without_a_reload(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    register(aw, "fake")
    login(page, aw, server)
    page.wait(lambda: page.one(card("fake")), "the session's card")
    page.driver.execute_script("window.__sameDocument = 'yes'")
    mid = send(aw, "fake", "deploy finished: all green\n  second line", "--priority", "high",
               "--source", "webhook", "--source-id", "ci")

    entry = f'#queue li[data-id="{mid}"]'
    page.wait(lambda: "deploy finished: all green" in page.text(entry), "the CLI's message queued")
    page.wait(lambda: page.one(f'#history li[data-id="{mid}"]'), "the CLI's message in the history")
    page.wait(lambda: page.text(f'{card("fake")} .badge.prio-high') == "1", "a high badge of 1")
    assert page.text(f"{entry} .source") == "webhook:ci"
    assert page.driver.execute_script("return window.__sameDocument") == "yes"  # no reload
    page.shot("cli-message")

    # another, from the CLI while the page watches: the badge counts both
    send(aw, "fake", "a low one", "--priority", "low")
    page.wait(lambda: page.text(f'{card("fake")} .badge.prio-low') == "1", "a low badge")
    page.phone()
    widths = page.driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"wider than a phone: {widths}"  # no sideways scrolling
    page.shot("phone")
    page.phone(False)
    page.dark()
    page.shot("dark")
    assert not problems(page)


def test_a_message_sent_from_the_page_reaches_the_agent(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    aw.start_standin()
    aw.wait_state("sa", "ready")
    login(page, aw, server)
    page.wait(lambda: page.one(card("sa")), "the session's card")
    page.wait(lambda: page.text("#sv-name") == "sa" and page.text("#sv-state") == "ready",
              "sa selected, ready")
    page.one("#send-content").send_keys("please run the tests (from the dashboard)")
    page.one("#send-priority").send_keys("high")
    page.click("#send-button")
    page.wait(lambda: "Queued" in page.text("#send-result"), "the page's confirmation")

    aw.wait_for(lambda: arrivals_of(aw, "please run the tests (from the dashboard)") == 1, 60,
                "the message typed into the agent")
    assert "please run the tests (from the dashboard)" in pane_text(aw)
    delivered = '#history li[data-status="delivered"]'
    page.wait(lambda: "from the dashboard" in page.text(delivered), "delivered, on the page")
    assert page.text(f"{delivered} .source") == "user:dashboard"
    assert "1 attempt" in page.text(f"{delivered} .attempt-log summary")
    page.click(f"{delivered} .attempt-log summary")
    page.shot("sent-from-page", docs="dashboard")

    # an error of the API is shown as it says it (413: over the content limit)
    page.driver.execute_script(
        "document.getElementById('send-content').value = 'x'.repeat(20000)")
    page.click("#send-button")
    page.wait(lambda: "error" in (page.one("#send-result").get_attribute("class") or ""),
              "the API's error on the page")
    shown = page.text("#send-result")
    assert "HTTP 413" in shown, shown
    page.shot("send-error")
    assert not problems(page)


def test_hostile_content_is_shown_as_inert_text(aw: AwEnv, server: Served, page: Browser) -> None:
    register(aw, "fake")
    login(page, aw, server)
    page.wait(lambda: page.one(card("fake")), "the session's card")
    with server.client() as c:
        r = c.post("/api/sessions/fake/input", json={
            "source": "webhook", "sourceId": HOSTILE_ID, "content": HOSTILE, "priority": "critical"})
        assert r.status_code == 201, r.text
        mid = r.json()["id"]
        stored = c.get(f"/api/messages/{mid}").json()
    entry = f'#history li[data-id="{mid}"]'
    page.wait(lambda: page.one(entry), "the hostile message on the page")

    assert page.text(f"{entry} .content") == stored["content"]  # exactly what was stored, as text
    assert "<img src=x onerror=alert(1)>" in page.text(f"{entry} .content")
    assert "[bold]rich markup[/]" in page.text(f"{entry} .content")
    assert page.text(f"{entry} .source") == f"webhook:{HOSTILE_ID}"
    assert page.alert_text() is None
    assert page.css("img") == [] and page.css("#main b") == [] and page.css("body script") == []
    assert len(page.css("script")) == PAGE_SCRIPTS  # the page's own, nothing the content made
    page.shot("hostile")
    assert not problems(page)


def test_a_toast_for_an_escalation_and_for_a_question(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    write_config(aw, fallback_after=2)
    with aw.paths.config_file.open("a", encoding="utf-8") as f:
        f.write("\n[limits]\nrate_per_minute = 1000\n")
    aw.start_standin("sa", "--never-ack", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    login(page, aw, server)
    page.wait(lambda: page.one(card("sa")), "the session's card")

    send(aw, "sa", "nobody will acknowledge this", "--ack")
    page.wait(lambda: page.one("#toasts .toast-escalated"), "a toast for the escalation")
    assert "Escalated in sa" in page.text("#toasts .toast-escalated")
    page.wait(lambda: page.one('#history li[data-status="escalated"]'), "escalated in the history")
    page.shot("toast-escalated", full=False)

    send(aw, "sa", "please OPENDIALOG", "--no-ack")
    page.wait(lambda: page.one("#toasts .toast-waiting"), "a toast for the question")
    assert "sa is waiting for input" in page.text("#toasts .toast-waiting")
    page.wait(lambda: page.text("#sv-state") == "waiting input", "the state on the page")
    assert page.text("#sv-why .reason")  # and why
    page.shot("toast-waiting", full=False)
    assert not problems(page)


# --- answering a question ---------------------------------------------------------------


def recorded(aw: AwEnv) -> list[dict[str, Any]]:
    """What the stand-in recorded for each dialog it closed (LOG.answers)."""
    path = aw.log.with_name(aw.log.name + ".answers")
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def open_dialog(aw: AwEnv, page: Browser, n: int) -> str:
    """Have the stand-in open its dialog; the card on the page (its question id)."""
    send(aw, "sa", f"please OPENDIALOG {n}", "--no-ack")
    page.wait(lambda: page.shown("#question") and page.one("#question .q-option"),
              "the question card")
    return str(page.one("#question").get_attribute("data-question"))


def test_a_question_is_answered_from_its_card(aw: AwEnv, server: Served, page: Browser) -> None:
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    login(page, aw, server)
    page.wait(lambda: page.text("#sv-name") == "sa" and page.text("#sv-state") == "ready",
              "sa selected, ready")
    assert not page.shown("#question")

    qid = open_dialog(aw, page, 1)
    q = aw.registry().get("sa").question
    assert q is not None and qid == q["id"]
    assert page.text("#question .q-kind") == q["kind"]
    assert page.text("#question .q-title") == q["title"]
    assert page.text("#question .q-command") == q["command"] == "touch x"
    assert page.text("#question .q-text") == "Do you want to proceed?"
    labels = page.driver.execute_script(
        "return [...document.querySelectorAll('#question .q-label')].map((n) => n.textContent)")
    assert labels == [o["label"] for o in q["questions"][0]["options"]] == ["Yes", "No"]
    # the agent's cursor is on option 1: marked so
    assert page.css("#question .q-option.highlighted") == [page.one('.q-option[data-number="1"]')]
    assert page.shown('.q-option[data-number="1"] .q-cursor')
    assert not page.shown('.q-option[data-number="2"] .q-cursor')
    assert page.shown("#question .q-deny") and not page.css("#question .q-free")
    page.wait(lambda: page.one("#toasts .toast-waiting"), "the question's toast")
    assert q["title"] in page.text("#toasts .toast-waiting .toast-body")
    assert "touch x" in page.text("#toasts .toast-waiting .toast-detail")
    page.shot("question-card")
    page.phone()
    widths = page.driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"wider than a phone: {widths}"
    page.shot("question-card-phone")
    page.phone(False)
    page.dark()
    page.shot("question-card-dark")
    page.dark(False)

    # a click on a card the agent has moved past: refused, shown, nothing typed
    page.driver.execute_script(
        "document.getElementById('question').dataset.question = '0123456789ab'")
    page.click('#question .q-option[data-number="1"]')
    page.wait(lambda: "Stale answer" in page.text("#answer-result"), "the API's refusal")
    shown = page.text("#answer-result")
    assert "HTTP 409" in shown and "asks something else now" in shown, shown
    assert "error" in (page.one("#answer-result").get_attribute("class") or "")
    page.shot("question-stale")
    assert recorded(aw) == [] and page.shown("#question")

    # option 2, as a person clicks it: the agent gets "No", the card goes away
    page.wait(lambda: page.one("#question").get_attribute("data-question") == qid,
              "the card redrawn for the open question")
    page.click('#question .q-option[data-number="2"]')
    page.wait(lambda: "Answered" in page.text("#answer-result"), "the confirmation")
    assert "dialog closed" in page.text("#answer-result")
    assert [c["choice"] for c in recorded(aw)] == ["chose 2. No"]
    page.wait(lambda: not page.shown("#question"), "the card gone (the agent goes on)")
    assert page.text("#sv-state") != "waiting input"
    page.wait(lambda: not page.one("#toasts .toast-waiting"), "its toast gone: nothing to act on")
    page.shot("question-answered")
    assert not problems(page)


def test_free_text_and_deny_from_the_card(aw: AwEnv, server: Served, page: Browser) -> None:
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG", "--dialog-style", "choice")
    aw.wait_state("sa", "ready")
    login(page, aw, server)
    page.wait(lambda: page.text("#sv-name") == "sa", "sa selected")

    open_dialog(aw, page, 1)
    assert page.text("#question .q-header") == "Database"
    assert page.shown("#question .q-free")
    # text the agent would read as a command: the API's 400, shown as it says it
    page.one("#q-text-input").send_keys("/etc/passwd")
    page.click("#question .q-send")
    page.wait(lambda: "error" in (page.one("#answer-result").get_attribute("class") or ""),
              "the API's refusal on the page")
    assert "HTTP 400" in page.text("#answer-result")
    assert "must not start with '/'" in page.text("#answer-result")
    assert page.one("#q-text-input").get_attribute("value") == "/etc/passwd"  # kept to fix
    page.shot("question-free-text-refused")
    assert recorded(aw) == []

    page.one("#q-text-input").clear()
    page.one("#q-text-input").send_keys("SQLite, but keep it in memory")
    page.click("#question .q-send")
    page.wait(lambda: "Answered" in page.text("#answer-result"), "the confirmation")
    assert recorded(aw)[-1]["text"] == "SQLite, but keep it in memory"
    page.wait(lambda: not page.shown("#question"), "the card gone")

    open_dialog(aw, page, 2)
    page.wait(lambda: page.shown("#answer-result") is False, "the last confirmation cleared")
    page.click("#question .q-deny")
    page.wait(lambda: not page.shown("#question"), "the card gone after Deny")
    assert recorded(aw)[-1]["choice"] == "cancelled"
    assert not problems(page)


def test_the_stream_resumes_after_the_server_restarts(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    """EventSource-like reconnects: the page resumes with Last-Event-ID and
    shows what happened while it was cut off."""
    register(aw, "fake")
    login(page, aw, server)
    page.wait(lambda: page.one(card("fake")), "the session's card")
    first = send(aw, "fake", "before the restart")
    page.wait(lambda: page.one(f'#queue li[data-id="{first}"]'), "an event seen (an id to resume)")
    server.proc.terminate()
    server.proc.wait(timeout=30)
    page.wait(lambda: page.text("#conn") != "live", "the page noticing the server left")
    mid = send(aw, "fake", "sent while the server was down")
    again = serve_again(aw, server.url)
    try:
        page.wait(lambda: page.text("#conn") == "live", "the page reconnected")
        page.wait(lambda: page.one(f'#queue li[data-id="{mid}"]'), "the missed message")
    finally:
        again.terminate()
        again.wait(timeout=30)
    assert not problems(page)


def serve_again(aw: AwEnv, url: str) -> subprocess.Popen[str]:
    """`agentwrap serve` again on the same port (the page's origin)."""
    port = url.rsplit(":", 1)[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentwrap", "serve", "--port", port], env=aw.env, cwd=aw.project,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert f"listening on {url}" in line, line
    assert httpx.get(url + "/healthz").status_code == 200
    return proc


# --- every field, whatever the server sends ---------------------------------------------------

EVIL = "<img src=x onerror=alert(1)>\x1b[31m\u202e\x00\x07\x9b[bold]x[/]\u200b<b>b</b>"
EVIL_SHOWN = "<img src=x onerror=alert(1)><ESC>[31m<U+202E><NUL><BEL><U+009B>[bold]x[/]<U+200B><b>b</b>"


def evil_api() -> FastAPI:
    """The page's routes, and an /api that answers with hostile text in every
    string field the page shows (the real store sanitizes content and refuses
    control characters in names and ids: this checks the page on its own)."""
    app = FastAPI()
    app.include_router(dashboard.router)
    now = time.time()
    msg = {"id": "0123456789abcdef" + EVIL, "session": EVIL, "content": EVIL, "source": EVIL,
           "sourceId": EVIL, "priority": EVIL, "status": EVIL, "detail": EVIL, "created": now,
           "expires": now + 300, "updated": now, "finished": None, "attempts": 1, "phase": None,
           "correlationId": None, "idempotencyKey": None, "depth": 0, "requireAck": None,
           "metadata": {}, "kind": "message"}
    summary = {"name": EVIL, "host": EVIL, "hostLiveness": "up", "unreachableSince": None,
               "profile": EVIL, "backend": EVIL, "liveness": EVIL, "state": EVIL,
               "pending": 1, "started": now, "ended": None, "exitCode": None}
    question = {"id": EVIL, "kind": EVIL, "title": EVIL, "highlighted": 1,
                "free_text_allowed": True, "tool": EVIL, "command": EVIL, "dialog": EVIL,
                "source": "screen", "questions": [{
                    "question": EVIL + "?", "header": EVIL, "multiSelect": False,
                    "options": [{"label": EVIL, "description": EVIL, "number": 1, "key": EVIL,
                                 "checked": None}]}]}
    metrics = {"byStatus": {}, "total": 1, "attempted": 1, "succeededFirstTry": 0,
               "succeededAfterRetry": 0, "escalated": 1, "failed": 0, "meanAttempts": 1.0,
               "meanLatencyS": None, "p95LatencyS": None}

    @app.post("/api/login")
    def login() -> dict[str, Any]:
        return {"token": "stub"}

    @app.get("/api/sessions")
    def sessions() -> dict[str, Any]:
        return {"sessions": [summary]}

    @app.get("/api/launch")
    def launch() -> dict[str, Any]:
        return {"configured": True, "choices": [{"name": EVIL, "profile": EVIL, "command": EVIL,
                                                 "args": [EVIL], "cwd": EVIL, "session": None}]}

    @app.get("/api/sessions/{name:path}/screen")  # a screen whose values are not the server's
    def screen(name: str) -> dict[str, Any]:
        return {"session": EVIL, "digest": EVIL, "at": now, "cols": 80, "rows": 2,
                "cursor": {"row": 0, "col": 0}, "title": EVIL, "styled": True, "lines": [
                    [{"text": EVIL, "fg": "red; background: url(x)", "bg": 99, "bold": "yes"}],
                    [{"text": "ok", "fg": 1, "bg": "#0000ff"}, "not a run", {"text": 7},
                     {"text": "x", "fg": "#ff0000;x", "bg": "javascript:alert(1)"}]]}

    @app.get("/api/sessions/{name:path}/input")  # before the next: a name may hold "/"
    def peek(name: str) -> dict[str, Any]:
        return {"inputs": [{**msg, "waitingBecause": EVIL, "ageS": 1.0, "ttlLeftS": 299.0}],
                "total": 1}

    @app.get("/api/sessions/{name:path}")
    def session(name: str) -> dict[str, Any]:
        return {**summary, "state": "waiting_input", "queueDepth": 1, "pendingByPriority": {EVIL: 1}, "metrics": metrics,
                "explanation": {"state": EVIL, "since": now, "reason": EVIL, "signal": EVIL,
                                "rule": EVIL, "evidence": EVIL, "quietMs": 0, "draft": False,
                                "question": question}}

    @app.get("/api/messages")
    def messages() -> dict[str, Any]:
        attempt = {"number": 1, "batchId": EVIL, "started": now, "finished": now + 1,
                   "channel": EVIL, "outcome": EVIL, "evidence": EVIL}
        return {"messages": [{**msg, "attemptLog": [attempt]}], "total": 1, "more": False}

    @app.websocket("/api/ws")  # the page's event stream
    async def events(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.receive_text()  # the auth frame
        await websocket.send_text(json.dumps({"type": "stream.ready", "lastEventId": "0"}))
        for kind in ("session.waiting_input", "message.escalated"):
            data = {"id": "1", "type": kind, "at": now, "session": EVIL, "messageId": EVIL,
                    "data": {"reason": EVIL, "rule": EVIL, "detail": EVIL,
                             "question": question}}
            await websocket.send_text(json.dumps(data))
        try:
            while True:
                await websocket.receive_text()
        except WebSocketDisconnect:
            pass

    return app


@pytest.fixture
def evil_server() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(evil_api(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def test_every_field_shows_hostile_text_as_text(evil_server: str, page: Browser) -> None:
    page.open(evil_server + "/#login=anything")
    fields = ("#session-list .session-name", "#session-list .session-host", "#sv-name", "#sv-why .reason", "#sv-why .evidence",
              "#queue .content", "#queue .waiting", "#history .content", "#history .msg-detail",
              "#history .attempts td.evidence-cell", "#toasts .toast-waiting .toast-body",
              "#question .q-kind", "#question .q-tool", "#question .q-id", "#question .q-title",
              "#question .q-command", "#question .q-header", "#question .q-label",
              "#question .q-desc")
    page.wait(lambda: all(page.text(where) for where in fields), "every field rendered")
    page.click("#history .attempt-log summary")
    for where in fields:
        assert page.text(where) == EVIL_SHOWN, (where, page.text(where))
    assert page.text("#question .q-text") == EVIL_SHOWN + "?"
    assert page.text("#sv-host") == "on " + EVIL_SHOWN
    assert page.css("#question .q-option.highlighted") and page.shown("#question .q-free")
    assert page.css("img") == [] and page.css("#main b") == [] and page.css("#toasts b") == []
    assert len(page.css("#history .content .ctl")) == 6
    # the screen: the text as text, and only the style values the page checks
    page.wait(lambda: page.text("#screen .term-row"), "the screen")
    assert page.text("#screen .term-row") == EVIL_SHOWN
    assert page.text("#screen-meta .screen-title") == EVIL_SHOWN
    styles = page.driver.execute_script(
        "return [...document.querySelectorAll('#screen span:not(.ctl)')]"
        ".filter((n) => !n.classList.contains('term-row'))"
        ".map((n) => [n.textContent.slice(0, 12), n.className, n.getAttribute('style')])")
    assert styles == [[EVIL_SHOWN[:12], "", None],
                      ["ok", "fg1", "background-color: rgb(0, 0, 255);"], ["x", "", None]], styles
    assert page.text("#launch-what") == f"{EVIL_SHOWN} {EVIL_SHOWN}  in {EVIL_SHOWN}"
    assert page.alert_text() is None
    page.shot("every-field")
    assert not problems(page)


def test_a_multi_select_card_sends_the_ticked_choices(
    aw: AwEnv, server: Served, page: Browser,
) -> None:
    """Claude's AskUserQuestion, the multi-select tab of two: one checkbox per box
    the agent shows (ticked as it shows them; "Type something" is a text field, not
    a box), and "Submit choices" posts exactly the ticked numbers. No supervisor
    runs for this registered session, so the answer is stored, not typed (the
    typing is proven on the real Claude Code in tests/e2e/test_answering.py)."""
    from test_answer import _features_tab, _waiting

    register(aw, "cc", profile="claude")
    q = _waiting(aw.paths, "cc", _features_tab())
    login(page, aw, server)
    page.click(card("cc"))
    page.wait(lambda: page.shown("#question") and page.one("#question .q-check"),
              "the multi-select card")
    assert "One of 2 questions" in page.text("#question .q-tabs")
    ticked = page.driver.execute_script(
        "return [...document.querySelectorAll('#question .q-check')]"
        ".map((b) => [b.dataset.number, b.checked, b.disabled])")
    assert ticked == [["1", False, False], ["2", True, False], ["3", False, False],
                      ["4", False, True]], ticked
    assert not page.css("#question .q-free")  # no free text beside the boxes
    page.click('#question label[for="q-box-1"]')  # tick Search
    page.click('#question label[for="q-box-2"]')  # untick Backups
    page.shot("question-multi-select")
    page.click("#question .q-send")
    page.wait(lambda: "Stored" in page.text("#answer-result"), "the answer stored")
    store = aw.store()
    try:
        (ev,) = store.events(0, session="cc", kinds=["session.answered"])
    finally:
        store.close()
    assert ev.data["answer"] == {"how": "options", "numbers": [1], "labels": ["Search"]}
    assert ev.data["questionId"] == q.id and ev.data["source"] == "http"
    assert not problems(page)


# --- the live screen, and starting and stopping sessions (issue 26) ---------------------------

HOSTILE_SCREEN = Path(__file__).resolve().parent / "support" / "hostile_screen.py"


def launch_entry(aw: AwEnv) -> None:
    """A [[dashboard.launch]] entry in the person's config: the hostile screen."""
    with aw.paths.config_file.open("a", encoding="utf-8") as f:
        f.write("\n[[dashboard.launch]]\nname = \"hostile screen\"\nprofile = \"generic\"\n"
                f"command = {json.dumps(sys.executable)}\n"
                f"args = [{json.dumps(str(HOSTILE_SCREEN))}]\n"
                f"cwd = {json.dumps(str(aw.project))}\nsession = \"hs\"\n")


def no_injection(page: Browser) -> None:
    """Nothing the screen held ran or became an element."""
    assert page.driver.execute_script("return window.__pwned === undefined")
    assert page.alert_text() is None
    assert page.css("img") == [] and page.css("#main b") == [] and page.css("#main i") == []
    assert page.css("#main a") == [] and len(page.css("script")) == PAGE_SCRIPTS  # the page's own


def test_the_screen_is_shown_live_and_hostile_text_stays_inert(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    aw.cli("run", "--detach", "--name", "hs", "--cols", "100", "--rows", "20", "--",
           sys.executable, str(HOSTILE_SCREEN), check=True)
    login(page, aw, server)
    page.click(card("hs"))
    page.wait(lambda: "type a line:" in page.text("#screen"), "the screen on the page")
    page.driver.execute_script("window.__sameDocument = 'yes'")

    # the colours, from the palette classes and the checked hex values
    assert page.text("#screen .fg1.t-bold") == "RED-BOLD"
    colour = page.driver.execute_script(
        "const n = [...document.querySelectorAll('#screen span')].find("
        "(s) => s.textContent === arguments[0]); return getComputedStyle(n)[arguments[1]]",
        "ORANGE-256", "color")
    assert colour == "rgb(255, 135, 0)"
    assert page.text("#screen .fg15") == "WHITE-ON-BLUE"
    assert page.text("#screen .fg-rev.bg-rev") == "REVERSED"
    # the hostile lines, as text
    text = page.text("#screen")
    assert "<script>window.__pwned='script'</script><img src=x onerror=" in text
    assert "[bold]rich markup[/] <b>not bold</b> &lt;b&gt;" in text
    assert "bidi: <U+202E>evil<U+202C> done" in text  # the override shown, not obeyed
    assert page.text("#screen-meta .screen-title") == "<script>window.__pwned='title'</script>"
    no_injection(page)
    page.shot("screen")

    # live: what is typed into the agent's terminal shows without a reload
    type_keys(aw, "hello <i>there</i>", name="hs")
    press(aw, "Enter", name="hs")
    page.wait(lambda: "got: hello <i>there</i>" in page.text("#screen"), "the screen updated")
    assert page.driver.execute_script("return window.__sameDocument") == "yes"
    no_injection(page)
    page.dark()
    page.shot("screen-dark")
    page.dark(False)
    page.phone()
    widths = page.driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"wider than a phone: {widths}"  # the screen scrolls itself
    page.shot("screen-phone")
    assert not problems(page)


def test_a_session_starts_from_the_list_and_stops_from_the_page(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    login(page, aw, server)
    page.wait(lambda: page.shown("#launch-none"), "how to list sessions to start")
    assert "[[dashboard.launch]]" in page.text("#launch-none")
    launch_entry(aw)
    page.driver.refresh()
    page.wait(lambda: page.shown("#launch-form"), "the launch list")
    assert page.text("#launch-choice") == "hostile screen"
    assert page.text("#launch-what") == f"{sys.executable} {HOSTILE_SCREEN}  in {aw.project}"
    page.shot("launch-list")

    page.click("#launch-button")
    page.wait(lambda: "Started hs" in page.text("#launch-result"), "the page's confirmation")
    page.wait(lambda: page.one(card("hs")), "the new session's card")
    page.wait(lambda: page.text("#sv-name") == "hs", "the new session selected")
    page.wait(lambda: "type a line:" in page.text("#screen"), "its screen")
    rec = aw.registry().get("hs")
    assert rec.liveness == "running" and rec.cwd == str(aw.project)
    page.shot("started")

    # stop: asked first; Cancel changes nothing
    page.click("#stop-button")
    page.wait(lambda: page.shown("#stop-confirm"), "the confirmation")
    assert "Stop hs?" in page.text("#stop-question")
    page.shot("stop-confirm")
    page.click("#stop-no")
    page.wait(lambda: not page.shown("#stop-confirm"), "the confirmation closed")
    assert aw.registry().get("hs").liveness == "running"
    page.click("#stop-button")
    page.click("#stop-yes")
    page.wait(lambda: "Stopped hs" in page.text("#stop-result"), "the page saying it stopped")
    assert aw.registry().get("hs").ended is not None
    page.wait(lambda: not page.one(card("hs")), "its card gone")
    page.shot("stopped")
    assert not problems(page)


def test_the_waiting_card_says_to_answer_below(aw: AwEnv, server: Served, page: Browser) -> None:
    """A profile's reason says "answer it in the terminal" (for the CLI); right
    above the card's own answer buttons the page says to answer there."""
    profile = aw.paths.user_patterns_dir / "standin.toml"
    text = profile.read_text(encoding="utf-8")
    assert 'message = "permission dialog"' in text
    profile.write_text(text.replace('message = "permission dialog"',
                                    'message = "permission dialog: answer it in the terminal"'),
                       encoding="utf-8")
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    login(page, aw, server)
    page.wait(lambda: page.text("#sv-name") == "sa", "sa selected")
    open_dialog(aw, page, 1)
    assert aw.registry().get("sa").state_reason == "permission dialog: answer it in the terminal"
    page.wait(lambda: page.text("#sv-why .reason") == "permission dialog: answer it below",
              "the reason pointing at the card")
    page.shot("waiting-answer-below")
    assert not problems(page)


# --- several hosts on one store (issue 23) ----------------------------------------------------


def test_every_hosts_sessions_with_their_host_and_a_silent_one_unreachable(
    aw: AwEnv, pg_url: str, sleeper: subprocess.Popen[bytes], page: Browser,
) -> None:
    """The page of alpha's serve shows alpha's, beta's and gamma's sessions, each
    with its host; beta stopped beating long ago: its session's state is
    unknown, its host unreachable since then, and the others are shown as they
    are. A message sent from the page to gamma's session is stored for it (the
    page names it HOST/NAME, percent-encoded as one path segment)."""
    aw.env.update({STORE_ENV: pg_url, HOST_ENV: "alpha"})
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    regs = {h: Registry(aw.paths.db_path, url=pg_url, host=h) for h in ("alpha", "beta", "gamma")}
    try:
        regs["alpha"].register(record("a1", **live))
        regs["beta"].register(record("b1"))
        regs["gamma"].register(record("c1"))
        regs["gamma"].set_state("c1", State.READY, signal="s", rule="r", reason="prompt",
                                evidence="", quiet_ms=0, draft=False, changed=True)
        hosts.beat(regs["beta"].db, "beta", 1.0, now=1_700_000_000.0)  # silent since then
        hosts.beat(regs["gamma"].db, "gamma", 3600.0)  # up for the whole test
    finally:
        for reg in regs.values():
            reg.close()
    with contextmanager(serve)(aw) as served:
        login(page, aw, served)
        page.wait(lambda: all(page.one(card(n)) for n in ("a1", "b1", "c1")), "three cards")
        assert [page.text(f"{card(n)} .session-host") for n in ("a1", "b1", "c1")] == [
            "alpha", "beta", "gamma"]
        page.wait(lambda: page.text(f"{card('b1')} .card-state").startswith("unknown"),
                  "beta's session unknown")
        down = page.text(f"{card('b1')} .host-down")
        assert down.startswith("unreachable since "), down
        assert page.css(f"{card('a1')} .host-down") == [] == page.css(f"{card('c1')} .host-down")
        assert page.one(card("c1")).get_attribute("data-state") == "ready"
        page.click(f"{card('b1')} button")
        page.wait(lambda: page.text("#sv-name") == "b1" and "on beta" in page.text("#sv-host"),
                  "b1 selected, on beta")
        assert "unreachable since" in page.text("#sv-host .host-down")
        assert not page.shown("#stop-button")  # its host is away: nothing to stop from here
        page.click(f"{card('c1')} button")
        page.wait(lambda: page.text("#sv-name") == "c1" and page.text("#sv-host") == "on gamma"
                  and page.text("#sv-state") == "ready", "c1 selected, on gamma, ready")
        page.one("#send-content").send_keys("to gamma's c1 from alpha's page")
        page.click("#send-button")
        page.wait(lambda: "Queued" in page.text("#send-result"), "the page's confirmation")
        page.wait(lambda: "to gamma's c1" in page.text("#queue"), "queued for c1, on the page")
        page.shot("several-hosts")
        assert not problems(page)
    store = open_store(aw.paths.db_path, QueueLimits(), url=pg_url)
    try:
        assert [m.content for m in store.peek("gamma/c1")] == ["to gamma's c1 from alpha's page"]
    finally:
        store.close()


def test_another_hosts_screen_is_kept_there_and_a_silent_hosts_state_is_not_stale(
    aw: AwEnv, pg_url: str, page: Browser,
) -> None:
    """Issue 35: the page of alpha's serve, on a session of beta (up) and one of
    gamma (silent since long ago), each with a screen saved on its own host only.
    The screen panel says what the API (and the CLI) say: the screen is kept on
    that host, not "No screen recorded yet." The silent host's session shows
    its host unreachable, never the verdict its supervisor stored before it went
    silent ("claude session file says 'idle'", its evidence)."""
    aw.env.update({STORE_ENV: pg_url, HOST_ENV: "alpha"})
    regs = {h: Registry(aw.paths.db_path, url=pg_url, host=h) for h in ("alpha", "beta", "gamma")}
    try:
        for host, name in (("beta", "b1"), ("gamma", "g1")):
            regs[host].register(record(name))
            regs[host].set_state(name, State.READY, signal="structured", rule="structured",
                                 reason="claude session file says 'idle'",
                                 evidence="❯ (the box)", quiet_ms=0, draft=False, changed=True)
        hosts.beat(regs["beta"].db, "beta", 3600.0)  # up for the whole test
        hosts.beat(regs["gamma"].db, "gamma", 1.0, now=1_700_000_000.0)  # silent since then
    finally:
        for reg in regs.values():
            reg.close()
    with contextmanager(serve)(aw) as served:
        login(page, aw, served)
        page.wait(lambda: page.one(card("b1")) and page.one(card("g1")), "both cards")
        page.click(f"{card('b1')} button")
        page.wait(lambda: page.text("#sv-name") == "b1" and page.shown("#screen-empty")
                  and "beta" in page.text("#screen-empty"), "b1's screen: kept on beta")
        empty = page.text("#screen-empty")
        assert "kept on its host 'beta'" in empty and "No screen recorded" not in empty, empty
        assert page.text("#sv-why .reason") == "claude session file says 'idle'"  # beta is up
        page.click(f"{card('g1')} button")
        page.wait(lambda: page.text("#sv-name") == "g1" and "gamma" in page.text("#screen-empty"),
                  "g1's screen: kept on gamma")
        assert "No screen recorded" not in page.text("#screen-empty")
        page.wait(lambda: "unreachable" in page.text("#sv-why .reason"), "g1: host unreachable")
        why = page.text("#sv-why")
        assert "session file" not in why and "the box" not in why, why
        assert "host 'gamma' is unreachable since 2023-11-14 22:13:20 UTC" in why, why
        assert page.text("#sv-state") == "unknown"
        assert page.text(f"{card('g1')} .card-state").startswith("unknown")
        assert "session file" not in page.text(f"{card('g1')}")
        page.shot("screens-of-other-hosts")
        assert not problems(page)

def address_card(address: str) -> str:
    return f'#session-list li[data-address="{address}"]'


def attr(page: Browser, selector: str, name: str) -> str | None:
    """An attribute of the first match, read at once (a redraw may replace the node)."""
    got = page.driver.execute_script(
        "const n = document.querySelector(arguments[0]);"
        " return n ? n.getAttribute(arguments[1]) : null", selector, name)
    return None if got is None else str(got)


def test_two_hosts_dev_are_two_cards_updated_and_addressed_separately(
    aw: AwEnv, pg_url: str, sleeper: subprocess.Popen[bytes], page: Browser,
) -> None:
    """alpha and beta each run a session ``dev``: the page of alpha's serve
    shows two cards, keyed HOST/NAME; beta's state change redraws beta's card
    only, a message queued for alpha's dev shows on alpha's card only, and
    what the page sends and stops names the card's session (beta's dev:
    stored for beta/dev; stopping it is beta's, never alpha's dev)."""
    aw.env.update({STORE_ENV: pg_url, HOST_ENV: "alpha"})
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    regs = {h: Registry(aw.paths.db_path, url=pg_url, host=h) for h in ("alpha", "beta")}
    try:
        for reg in regs.values():
            reg.register(record("dev", **live))
        regs["alpha"].set_state("dev", State.READY, signal="s", rule="r", reason="prompt",
                                evidence="", quiet_ms=0, draft=False, changed=True)
        hosts.beat(regs["beta"].db, "beta", 3600.0)  # up for the whole test
        with contextmanager(serve)(aw) as served:
            login(page, aw, served)
            a, b = address_card("alpha/dev"), address_card("beta/dev")
            page.wait(lambda: page.one(a) and page.one(b), "two cards, one per host's dev")
            assert len(page.css("#session-list li")) == 2
            assert [page.text(f"{c} .session-name") for c in (a, b)] == ["dev", "dev"]
            assert [page.text(f"{c} .session-host") for c in (a, b)] == ["alpha", "beta"]
            page.wait(lambda: attr(page, a, "data-state") == "ready"
                      and attr(page, b, "data-state") == "starting",
                      "alpha's dev ready, beta's starting")
            # beta's event: beta's card only
            regs["beta"].set_state("dev", State.BUSY, signal="s", rule="r", reason="working",
                                   evidence="", quiet_ms=0, draft=False, changed=True)
            page.wait(lambda: attr(page, b, "data-state") == "busy",
                      "beta's card busy")
            page.wait(lambda: page.text(f"{a} .card-why") == "prompt", "alpha's card as it was")
            assert attr(page, a, "data-state") == "ready"
            # a message for alpha's dev: alpha's card only
            aw.cli("send", "alpha/dev", "for alpha's dev", check=True)
            page.wait(lambda: page.text(f"{a} .badges") == "1", "alpha's card: one pending")
            assert page.text(f"{b} .badges") == ""
            # beta's dev selected: the page sends to beta/dev
            page.click(f"{b} button")
            page.wait(lambda: page.text("#sv-name") == "dev" and page.text("#sv-host") == "on beta"
                      and page.text("#sv-state") == "busy", "beta's dev selected")
            assert attr(page, b + " button", "aria-current") == "true"
            assert attr(page, a + " button", "aria-current") is None
            page.one("#send-content").send_keys("for beta's dev, from the page")
            page.click("#send-button")
            page.wait(lambda: "for beta's dev" in page.text("#queue"), "queued for beta's dev")
            page.wait(lambda: page.text(f"{b} .badges") == "1", "beta's card: one pending")
            assert page.text(f"{a} .badges") == "1"
            # stopping names beta's dev: refused here (beta's to stop), alpha's dev untouched
            page.click("#stop-button")
            assert "Stop beta/dev?" in page.text("#stop-question")
            page.click("#stop-yes")
            page.wait(lambda: "beta" in page.text("#stop-result.error"), "beta's to stop")
            page.shot("two-hosts-dev")
            assert not problems(page)
        assert sleeper.poll() is None
        assert regs["alpha"].get("dev").ended is None
    finally:
        for reg in regs.values():
            reg.close()
    store = open_store(aw.paths.db_path, QueueLimits(), url=pg_url)
    try:
        assert [m.content for m in store.peek("alpha/dev")] == ["for alpha's dev"]
        assert [m.content for m in store.peek("beta/dev")] == ["for beta's dev, from the page"]
    finally:
        store.close()
