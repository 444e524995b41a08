"""A question of an agent in a container answered from the page (issue 39).

Real Claude Code in a Podman container (``test_container_claude``'s set-up), a real
``agentwrap serve`` and headless Chromium: Claude's permission question, with the
hook's exact command, shows as the session's card on the page; a click on option 1
applies the answer once and the tool runs inside the container (its file appears
in the mounted project).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from support import container as box
from support.browser import chromium
from support.http_kit import serve_process

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import wait_question
from .test_container_claude import PASSED, container_name, into_a_box, stored_answers

pytestmark = [pytest.mark.e2e, pytest.mark.container, pytest.mark.usefixtures("browser")]
Make = Callable[..., AgentSession]


@pytest.fixture(scope="module")
def image(container: None) -> str:
    return box.build_images().agent


def test_a_boxed_agents_question_is_answered_from_its_card_on_the_page(
        make_session: Make, image: str) -> None:
    s = make_session("claude")
    into_a_box(s, image, PASSED)
    served = None
    browser = None
    try:
        s.start()
        s.wait_state("ready", timeout=120)
        assert box.running(container_name(s))
        served = serve_process(s.env, s.workdir, s.root / "serve.log")
        _, url = next(served)
        browser = chromium("container-page")
        page = next(browser)
        page.open(s.cli("token", "--link", "--url", url).stdout.strip())
        page.wait(lambda: page.shown("#main") and page.text("#conn") == "live", "logged in")
        page.click(f'#session-list li[data-session="{s.name}"] button')

        command = f"touch {TOOL_FILE} && echo from-the-page"
        directive = "Bash " + json.dumps({"command": command, "description": "scripted"})
        assert s.send(f"[[call: {directive}]] please", "--wait", "--timeout", "90").returncode == 0
        wait_question(s)
        page.wait(lambda: page.shown("#question") and page.one("#question .q-option")
                  and page.text("#question .q-command") == command, "the question's card")
        page.shot("boxed-question-card")
        page.click('#question .q-option[data-number="1"]')
        s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} made inside")
        s.wait_until(lambda: [a[0] for a in stored_answers(s)] == ["applied"], 60,
                     "one answer, from the page (http), applied")
        assert stored_answers(s) == [("applied", "http")]
        page.wait(lambda: not page.shown("#question"), "the card gone once answered")
    finally:
        if browser is not None:
            browser.close()
        if served is not None:
            served.close()
        box.remove(container_name(s))
