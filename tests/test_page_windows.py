"""Many windows of the dashboard in one Chromium (issue 42): each lists the
sessions and sees its events.

Chromium keeps six HTTP/1.1 connections per host and profile. A page that
held one for its event stream (SSE over fetch) in every window left the
windows after the fifth with no connection for their requests: the list
never came. The page's events now go over one WebSocket per page, which
Chromium does not count against those six. Eight windows of one browser (one
profile, one login in localStorage) against a real ``serve``; each shows its
own session and sees a message sent to it with the CLI without a reload.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from conftest import AwEnv
from support.browser import Browser, chromium
from support.delivery_kit import send
from support.http_kit import Served, register, serve_for_a_page
from support.page_kit import login, problems

WINDOWS = 8  # more than Chromium's six connections per host


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    yield from serve_for_a_page(aw)


@pytest.fixture
def page(request: pytest.FixtureRequest, browser: None) -> Iterator[Browser]:
    yield from chromium(request.node.name)


def card(name: str) -> str:
    return f'#session-list li[data-session="{name}"]'


def browser_connections(port: int) -> int:
    """TCP connections established to the server's port (the browser's, each counted once)."""
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return len(out.splitlines())


def test_eight_windows_each_list_the_sessions_and_see_their_events(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    names = [f"w{i}" for i in range(WINDOWS)]
    for name in names:
        register(aw, name)
    login(page, aw, server)  # one login: the other windows share its localStorage
    d = page.driver
    handles = [d.current_window_handle]
    d.get(f"{server.url}/#session={names[0]}")
    for name in names[1:]:
        d.switch_to.new_window("window")
        handles.append(d.current_window_handle)
        d.get(f"{server.url}/#session={name}")
    for handle, name in zip(handles, names, strict=True):
        d.switch_to.window(handle)
        page.wait(lambda: page.text("#conn") == "live", f"the window of {name}: its stream live")
        page.wait(lambda: all(page.one(card(n)) for n in names), f"the window of {name}: the list")
    port = int(server.url.rsplit(":", 1)[1])
    held = browser_connections(port)

    sent = {name: send(aw, name, f"for the window of {name}") for name in names}
    for handle, name in zip(handles, names, strict=True):
        d.switch_to.window(handle)
        page.wait(lambda n=name: page.one(f'#queue li[data-id="{sent[n]}"]'),
                  f"the window of {name}: its message, from the event stream")
        assert f"for the window of {name}" in page.text(f'#queue li[data-id="{sent[name]}"]')
        assert not problems(page)
    # every window's stream is a WebSocket of its own, and the requests still went
    assert held >= WINDOWS, f"{held} connections for {WINDOWS} windows"
