"""What every dashboard test in Chromium does first and checks last: log in
as a person does, read the console for a broken page, and drive the live
terminal (terminal.js) as a person does.

One copy for the dashboard, page-terminal and conversation tests, so a change
to the login link or to what counts as a broken page is made once.
"""

from __future__ import annotations

import subprocess
from typing import Any, Protocol

from support.browser import Browser
from support.http_kit import Served


class RunsCli(Protocol):
    """The test environment's ``agentwrap`` runner (conftest's ``AwEnv``)."""

    def cli(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]: ...


def login(page: Browser, aw: RunsCli, server: Served) -> None:
    """As a person does: open the link `agentwrap token --link` prints; the used
    code leaves the address bar."""
    link = aw.cli("token", "--link", "--url", server.url, check=True).stdout.strip()
    assert link.startswith(server.url + "/#login="), link
    page.open(link)
    page.wait(lambda: page.shown("#main") and page.text("#conn") == "live",
              "the dashboard, logged in, its event stream live")
    assert "#login=" not in page.driver.current_url


def problems(page: Browser) -> list[str]:
    """Console lines that mean the page broke: a script error or a CSP refusal."""
    return [line for line in page.console()
            if "Uncaught" in line or "Content Security Policy" in line or "Refused to" in line]


# --- the live terminal (terminal.js) ----------------------------------------------------


def term_text(page: Browser) -> str:
    return str(page.driver.execute_script("return window.agentwrapTerminal.text()"))


def keys(page: Browser, *what: str) -> None:
    """Keys pressed in the page's terminal, as a person presses them."""
    from selenium.webdriver.common.action_chains import ActionChains

    box = page.one("#live-term .xterm-helper-textarea")
    ActionChains(page.driver).send_keys_to_element(box, *what).perform()


def take_over(page: Browser) -> None:
    page.click("#term-type")
    page.wait(lambda: page.driver.execute_script("return window.agentwrapTerminal.typing()"),
              "typing on")
