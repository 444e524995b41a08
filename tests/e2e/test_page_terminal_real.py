"""Real agents worked from the page's live terminal (issue 42).

Headless Chromium against a real ``agentwrap serve`` and the real Claude Code
and Codex (against the loopback model server), one agent start each: the
page's terminal shows the agent's prompt; "Type" mode types a prompt the
agent answers (the model server's reply seen in the page's terminal); Esc
pressed in the page interrupts a busy turn; a message queued while the person
holds the keyboard waits (no attempt spent) and goes in once after they give
it back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from support.browser import Browser, chromium
from support.http_kit import serve_process

from .conftest import AgentSession

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("browser")]

Make = Callable[..., AgentSession]


def tag() -> str:
    return f"PG{uuid.uuid4().hex[:8]}"


def term_text(page: Browser) -> str:
    return str(page.driver.execute_script("return window.agentwrapTerminal.text()"))


def keys(page: Browser, *what: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    box = page.one("#live-term .xterm-helper-textarea")
    ActionChains(page.driver).send_keys_to_element(box, *what).perform()


def typing(page: Browser) -> bool:
    return bool(page.driver.execute_script("return window.agentwrapTerminal.typing()"))


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_real_agent_is_worked_from_the_page(make_session: Make, agent: str) -> None:
    s = make_session(agent)
    # the grace covers the whole test: only the take-over's end lets the message in
    s.write_config("[delivery]\nreadiness_timeout_s = 2\nbackoff_s = [0.5]\nfallback_after = 2\n"
                   "notify_on_failure = false\n[limits]\nrate_per_minute = 1000\n")
    s.start()
    s.wait_state("ready", timeout=120)
    served = serve_process(s.env, s.workdir, s.root / "serve.log")
    _, url = next(served)
    browser = chromium(f"page-real-{agent}")
    page = next(browser)
    try:
        page.open(s.cli("token", "--link", "--url", url).stdout.strip())
        page.wait(lambda: page.shown("#main") and page.text("#conn") == "live", "logged in")
        page.click(f'#session-list li[data-session="{s.name}"] button')
        # the terminal opens at the prompt: the pane's bottom rows, as tmux shows them
        prompt = [x.strip() for x in s.screen().splitlines() if x.strip()][-1]
        page.wait(lambda: prompt in term_text(page), f"the prompt {prompt!r} in the page")

        # Type mode: a prompt typed in the page, answered by the model, seen in the page
        page.click("#term-type")
        page.wait(lambda: typing(page), "typing on")
        from selenium.webdriver.common.keys import Keys

        first, reply = tag(), tag()
        keys(page, f"[[reply: answered {reply}]] typed from the page {first}")
        page.wait(lambda: first in s.screen(), "the keys in the agent's box")
        keys(page, Keys.ENTER)
        s.wait_received(first, timeout=90)
        page.wait(lambda: f"answered {reply}" in term_text(page), "the model's reply in the page",
                  timeout=90)
        s.wait_state("ready", timeout=60)

        # Esc in the page interrupts a busy turn
        busy = tag()
        keys(page, f"[[slow: 90]] a long turn {busy}")
        page.wait(lambda: busy in s.screen(), "the long prompt in the box")
        keys(page, Keys.ENTER)
        s.wait_received(busy, timeout=90, settle=0.1)
        s.wait_state("busy", timeout=60)
        keys(page, Keys.ESCAPE)
        s.wait_state("ready", timeout=45)  # long before the 90 s turn would have ended
        assert "line 40" not in s.screen()

        # a queued message waits while the person holds the keyboard, then goes in once
        keys(page, "x", Keys.BACKSPACE)  # a key pressed, the box empty again
        queued = tag()
        sent_at = time.monotonic()
        mid = s.send_id(f"[[reply: Noted.]] queued while the page types {queued}")
        s.wait_until(lambda: time.monotonic() > sent_at + 8, 30, "several readiness timeouts")
        assert not s.received_with(queued)
        held = s.message(mid)
        assert held["status"] == "pending" and held["attempts"] == 0, held
        page.click("#term-type")  # given back
        page.wait(lambda: not typing(page), "read-only again")
        assert len(s.wait_received(queued, timeout=90)) == 1
        s.wait_until(lambda: s.message(mid)["status"] == "delivered", 90, "delivered")
        page.wait(lambda: queued in term_text(page), "the message in the page's terminal")
        assert len(s.received_with(queued)) == 1
    finally:
        browser.close()
        served.close()
