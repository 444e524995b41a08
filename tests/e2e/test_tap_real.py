"""A real agent (Claude Code, and Codex on agentwrap's app-server, where the
permission is the server's request answered by a reply) asks a permission; a
tap on the notice's Approve link, in headless Chromium in a phone's viewport,
approves it and the tool runs (issue 40).

The model server scripts the Bash call (``touch tool_ran.txt``); `agentwrap
serve` runs in the session's environment; the links are what a notifier gets
from :meth:`LinkMaker.links_for <agentwrap.answers.links.LinkMaker.links_for>`.
What the agent did is read from the project directory (the file the tool
creates) and the model server's next request (the tool result), never from
the screen alone.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable

import pytest
from support.browser import chromium

from agentwrap.answers.links import LinkMaker, load_or_create_key
from agentwrap.paths import Paths

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import PERMISSION, next_tool_result, on_app_server, open_permission

pytestmark = pytest.mark.e2e

Make = Callable[..., AgentSession]


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_permission_approved_by_a_tap_on_a_phone(make_session: Make, browser: None,
                                                 agent: str) -> None:
    s = make_session(agent)
    q, seen = open_permission(s)
    if agent == "codex":
        assert on_app_server(s), s.state()  # the default: the tap answers a server request
    log = (s.root / "serve.log").open("w", encoding="utf-8")
    serve = subprocess.Popen([sys.executable, "-m", "agentwrap", "serve", "--port", "0"],
                             env=s.env, cwd=s.workdir, stdout=subprocess.PIPE, stderr=log,
                             text=True)
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert "listening on http://" in line, line
        url = line.split("listening on ", 1)[1].split()[0]
        paths = Paths.from_env(s.env)
        links = dict(LinkMaker(load_or_create_key(paths), url).links_for(
            s.name, "", q["id"], q["questions"][0]["options"]))
        approve = next(u for label, u in links.items() if label.startswith("1. "))
        for page in chromium(f"test_{agent}_permission_approved_by_a_tap_on_a_phone", 390, 844):
            page.phone()
            page.open(approve)
            page.wait(lambda p=page: p.shown("#tap-button"), "the link's page")
            assert page.text("#tap-command") == PERMISSION[agent][2]
            assert not (s.workdir / TOOL_FILE).exists(), "opening the link ran the tool"
            page.shot(f"{agent}-tap-page")
            page.click("#tap-button")
            page.wait(lambda p=page: "Answered" in p.text("#tap-result"), "the answer applied",
                      timeout=90)
            page.shot(f"{agent}-tap-answered")
        s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created")
        assert next_tool_result(s, seen)
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
        log.close()
