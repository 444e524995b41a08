"""The page's conversation panel and its Ended sessions (issue 42).

A real ``agentwrap serve`` with a tmux stand-in agent, and a headless
Chromium logged in with the one-time link: the conversation lists the
delivered message (with its ACK) and the agent's reply after it; hostile
content (HTML, a script's attributes, escape and bidi characters) shows as
text and nothing of it runs; a stopped session stays listed as ended with its
exit code, why it ended and its last screen, and "Dismiss" forgets it; the
retention forgets it by itself. The stand-in has no transcript, so its side
comes from the last resort, the screen (Claude's transcript: the e2e
``tests/e2e/test_conversation_real.py`` and the recorded fixture in
``tests/test_conversation.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import AwEnv
from support.browser import Browser, chromium
from support.http_kit import Served, serve_for_a_page
from support.page_kit import login, problems

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>\u202e&amp;'


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    yield from serve_for_a_page(aw)


@pytest.fixture
def page(request: pytest.FixtureRequest, browser: None) -> Iterator[Browser]:
    yield from chromium(request.node.name)


def entries(page: Browser) -> list[dict[str, Any]]:
    got = page.driver.execute_script(
        "return [...document.querySelectorAll('#conversation > li')].map((n) => ({"
        "kind: n.dataset.kind, id: n.dataset.messageId || '', acked: n.dataset.acked || '',"
        "status: n.dataset.status || '', text: n.querySelector('.conv-text').textContent,"
        "head: n.querySelector('.conv-head').textContent}))")
    return list(got)


def test_the_conversation_lists_the_delivered_message_then_the_reply_as_text(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    aw.start_standin()
    aw.wait_state("sa", "ready")
    sent = aw.cli("send", "sa", f"look {HOSTILE}", "--ack", "--wait", "--timeout", "60",
                  "--json", check=True)
    mid = json.loads(sent.stdout)["id"]
    login(page, aw, server)
    page.click('#session-list li[data-session="sa"] button')

    def listed() -> list[dict[str, Any]] | None:
        got = entries(page)
        return got if any(e["kind"] == "reply" for e in got) else None

    got = page.wait(listed, "the message and the reply in the conversation")
    kinds = [e["kind"] for e in got]
    at = kinds.index("message")
    msg = got[at]
    assert (msg["id"], msg["status"], msg["acked"]) == (mid, "acknowledged", "true"), got
    assert "ACK" in msg["head"] and "no ACK" not in msg["head"]
    assert "reply" in kinds[at + 1:], got  # the agent's side after what it was sent
    # hostile text is text: shown as written (the store dropped the bidi override), never markup
    assert '<img src=x onerror="window.__pwned=1"><script>' in msg["text"]
    assert "\u202e" not in msg["text"] and "&amp;" in msg["text"]
    assert not page.css("#conversation img, #conversation script")
    assert page.driver.execute_script("return window.__pwned === undefined")
    page.shot("conversation", docs="dashboard")
    assert not problems(page)


def test_a_stopped_session_stays_listed_as_ended_until_dismissed(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    aw.start_standin()
    aw.wait_state("sa", "ready")
    login(page, aw, server)
    page.wait(lambda: page.one('#session-list li[data-session="sa"]'), "the running session")
    stopped = json.loads(aw.cli("stop", "sa", "--json", check=True).stdout)

    ended = '#ended-list li[data-session="sa"]'
    page.wait(lambda: page.shown(ended), "the session in the Ended section")
    assert not page.one('#session-list li[data-session="sa"]')  # not among the running
    card = page.text(ended)
    assert f"exit {stopped['exit_code']}" in card and "stopped by `agentwrap stop`" in card, card
    page.click(f"{ended} .ended-card")
    page.wait(lambda: "? for shortcuts" in page.text("#screen"), "its last screen, read-only")
    assert not page.shown("#stop-button")
    page.wait(lambda: "why it ended" in page.text("#sv-facts"), "why it ended, in its facts")
    page.shot("ended-session", docs="dashboard")

    page.click(f"{ended} .dismiss-button")
    page.wait(lambda: not page.one(ended), "dismissed: gone from the page")
    listed = json.loads(aw.cli("ls", "--all", "--json", check=True).stdout)
    assert not [r for r in listed if r["name"] == "sa"]
    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines() if x.strip()]
    assert [e for e in audit if e.get("event") == "dismissed" and e.get("by") == "http"]
    assert not problems(page)


@pytest.mark.usefixtures("tmux")
def test_the_retention_forgets_an_ended_session_by_itself(aw: AwEnv) -> None:
    aw.start_standin()
    aw.wait_state("sa", "ready")
    aw.cli("stop", "sa", check=True)
    listed = json.loads(aw.cli("ls", "--all", "--json", check=True).stdout)
    (rec,) = [r for r in listed if r["name"] == "sa"]
    assert rec["liveness"] == "ended" and "stopped by `agentwrap stop`" in rec["state_reason"]
    shown = aw.cli("ls", check=True)
    assert "sa" not in shown.stdout and "1 ended session kept" in shown.stderr

    with aw.paths.config_file.open("a", encoding="utf-8") as f:
        f.write("\n[sessions]\nkeep_ended_s = 1\n")
    aw.wait_for(lambda: not [r for r in json.loads(aw.cli("ls", "--all", "--json",
                                                          check=True).stdout)
                             if r["name"] == "sa"], 30, "the ended session forgotten")
    audit = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines() if x.strip()]
    assert [e for e in audit if e.get("event") == "dismissed" and e.get("by") == "retention"]
    assert not (aw.paths.runtime_dir / "sa.screen").exists()


def test_a_list_that_never_reached_the_server_is_fetched_again_by_itself(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    """The browser drops a request (a network change: ERR_NETWORK_CHANGED,
    which ended the 10-window benchmark at its 5th window; here a blocked
    URL): the page tries the session list again by itself, without waiting
    for an event that may never come."""
    aw.start_standin()
    aw.wait_state("sa", "ready")
    d = page.driver
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/api/sessions?all=true*"]})
    login(page, aw, server)
    page.wait(lambda: "Server unreachable" in page.text("body"), "the failed list said so")
    assert not page.one('#session-list li[data-session="sa"]')
    d.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    page.wait(lambda: page.one('#session-list li[data-session="sa"]'), "the list, fetched again",
              timeout=30)
