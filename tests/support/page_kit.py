"""What every dashboard test in Chromium does first and checks last: log in
as a person does, and read the console for a broken page.

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
