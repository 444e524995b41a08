"""One-tap answer links against the real `agentwrap serve`, a stand-in agent's
dialog and headless Chromium in a phone's viewport (issue 40).

A link minted for the open question opens a page that shows it again (the
exact command, the options) and changes nothing; the tap is a POST from that
page, which the stand-in's dialog receives as the choice. Reused, expired,
forged and other-question links, and a POST from a foreign origin, do nothing
and say why, with a status code; a deny-listed command's Approve link is
refused while its Deny works. The dashboard at 390×844 has no horizontal
scroll and touch targets of at least 44 px, and its manifest and icons are
served from here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from conftest import AwEnv
from support.browser import Browser, chromium
from support.delivery_kit import send
from support.http_kit import Served, serve_for_a_page

from agentwrap.answers.links import TAP_PATH, LinkMaker, load_or_create_key
from agentwrap.answers.store import AnswerStore


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    yield from serve_for_a_page(aw)


@pytest.fixture
def page(request: pytest.FixtureRequest, browser: None) -> Iterator[Browser]:
    yield from chromium(request.node.name, width=390, height=844)


def recorded(aw: AwEnv) -> list[dict[str, Any]]:
    path = aw.log.with_name(aw.log.name + ".answers")
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def question(aw: AwEnv, name: str = "sa") -> dict[str, Any] | None:
    reg = aw.registry()
    try:
        return reg.get(name).question
    finally:
        reg.close()


def ask(aw: AwEnv, n: int, name: str = "sa") -> dict[str, Any]:
    """Have the stand-in open its dialog; the question the registry holds."""
    send(aw, name, f"please OPENDIALOG {n}", "--no-ack")
    aw.wait_state(name, "waiting_input")
    got: dict[str, Any] = {}

    def read() -> bool:
        q = question(aw, name)
        if q is not None:
            got.update(q)
        return q is not None

    aw.wait_for(read, what="the question read off the screen")
    return got


def links(aw: AwEnv, server: Served, q: dict[str, Any], name: str = "sa",
          **kw: Any) -> dict[str, str]:
    maker = LinkMaker(load_or_create_key(aw.paths), server.url, **kw)
    return dict(maker.links_for(name, "", q["id"], q["questions"][0]["options"]))


def answers(aw: AwEnv, name: str = "sa") -> list[str]:
    store = AnswerStore(aw.paths.db_path)
    try:
        return [a.source for a in store.recent(name)]
    finally:
        store.close()


def tap_post(url: str, **headers: str) -> httpx.Response:
    token = unquote(url.split(TAP_PATH, 1)[1])
    return httpx.post(url, data={"token": token}, headers=headers, timeout=60)


def no_side_scroll(page: Browser) -> None:
    widths = page.driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"wider than the phone: {widths}"


def small_targets(page: Browser, selector: str) -> list[str]:
    """The visible elements matching ``selector`` smaller than 44 px either way (to
    the pixel: a 44 px box laid out at 43.99999 is 44)."""
    return list(page.driver.execute_script("""
        return [...document.querySelectorAll(arguments[0])].filter((n) => {
          const r = n.getBoundingClientRect();
          return r.width > 0 && r.height > 0 && (Math.round(r.width) < 44 || Math.round(r.height) < 44);
        }).map((n) => `${n.id || n.className || n.tagName} ${n.getBoundingClientRect().width}x${n.getBoundingClientRect().height}`);
    """, selector))


def test_a_tap_on_a_link_answers_once_on_a_phone(aw: AwEnv, server: Served, page: Browser) -> None:
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    q = ask(aw, 1)
    got = links(aw, server, q)
    assert list(got) == ["1. Yes", "2. No", "Deny"]
    page.phone()
    page.open(got["1. Yes"])
    page.wait(lambda: page.shown("#tap-button"), "the link's page")
    assert page.text("#tap-command") == "touch x"
    assert page.text("#tap-session") == "sa"
    assert "1. Yes" in page.text("#tap-question") and "2. No" in page.text("#tap-question")
    assert page.text("#tap-button") == "1. Yes"
    no_side_scroll(page)
    assert small_targets(page, "button") == []
    page.shot("tap-page-phone")
    # opening it (twice: a link preview, a scanner) changed nothing
    page.open(got["1. Yes"])
    page.wait(lambda: page.shown("#tap-button"), "the link's page again")
    assert recorded(aw) == [] and answers(aw) == [] and question(aw) is not None

    page.click("#tap-button")
    page.wait(lambda: "Answered" in page.text("#tap-result"), "the answer applied")
    assert [c["choice"] for c in recorded(aw)] == ["chose 1. Yes"]  # the tool runs
    assert answers(aw) == ["link"]
    page.shot("tap-answered-phone")

    # the same dialog again (same question id): this notice's links are spent
    q2 = ask(aw, 1)
    assert q2["id"] == q["id"], "the stand-in's dialog is the same question"
    for label in ("1. Yes", "Deny"):
        r = tap_post(got[label])
        assert r.status_code == 409 and 'data-reason="used"' in r.text, r.text
        assert "used already" in r.text
    page.open(got["2. No"])
    page.wait(lambda: "used already" in page.text("#tap-result"), "a sibling link: used")
    assert [c["choice"] for c in recorded(aw)] == ["chose 1. Yes"] and question(aw) is not None


def test_forged_expired_other_question_and_foreign_links_do_nothing(
    aw: AwEnv, server: Served,
) -> None:
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    q = ask(aw, 1)
    good = links(aw, server, q)["1. Yes"]
    body, mac = good.rsplit(".", 1)
    forged = f"{body}.{mac[:-1]}{'A' if mac[-1] != 'A' else 'B'}"
    expired = links(aw, server, q, ttl_s=10, clock=lambda: time.time() - 60)["1. Yes"]
    other = dict(LinkMaker(load_or_create_key(aw.paths), server.url).links_for(
        "sa", "", "0123456789ab", q["questions"][0]["options"]))["1. Yes"]
    gone = dict(LinkMaker(load_or_create_key(aw.paths), server.url).links_for(
        "nobody", "", q["id"], q["questions"][0]["options"]))["1. Yes"]
    cases = [(forged, 403, "forged", "not a valid answer link"),
             (expired, 410, "expired", "expired at"),
             (other, 409, "stale", "asks something else now"),
             (gone, 410, "closed", "is gone")]
    for url, status, reason, says in cases:
        for r in (httpx.get(url, timeout=60), tap_post(url)):
            assert r.status_code == status, (reason, r.status_code, r.text)
            assert f'data-reason="{reason}"' in r.text and says in r.text, r.text
            assert "Content-Security-Policy" in r.headers
    r = tap_post(good, Origin="https://evil.example")
    assert r.status_code == 403 and 'data-reason="origin"' in r.text
    r = tap_post(good, **{"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403
    token = unquote(good.split(TAP_PATH, 1)[1])
    r = httpx.post(good, data={"token": token[:-3]}, timeout=60)  # the form's token: not this link's
    assert r.status_code == 403 and 'data-reason="forged"' in r.text
    assert recorded(aw) == [] and answers(aw) == [] and question(aw) is not None
    # after all that, the good link still answers (from the page's own origin)
    r = tap_post(good, Origin=server.url)
    assert r.status_code == 200 and "Answered" in r.text, r.text
    assert [c["choice"] for c in recorded(aw)] == ["chose 1. Yes"]


def test_a_deny_listed_commands_approve_link_is_refused_and_deny_works(
    aw: AwEnv, server: Served,
) -> None:
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG", "--dialog-command", "rm -rf /")
    aw.wait_state("sa", "ready")
    q = ask(aw, 1)
    assert q["command"] == "rm -rf /"
    got = links(aw, server, q)
    for label in ("1. Yes", "2. No"):
        for r in (httpx.get(got[label], timeout=60), tap_post(got[label])):
            assert r.status_code == 403 and 'data-reason="refused"' in r.text, r.text
            assert "deny-list" in r.text and "Deny still works" in r.text
            assert "rm -rf /" in r.text  # the question is shown, without a button
            assert 'id="tap-button"' not in r.text
    assert recorded(aw) == [] and answers(aw) == []
    r = httpx.get(got["Deny"], timeout=60)
    assert r.status_code == 200 and 'id="tap-button"' in r.text
    r = tap_post(got["Deny"])
    assert r.status_code == 200 and "Answered" in r.text, r.text
    assert [c["choice"] for c in recorded(aw)] == ["cancelled"]


def test_a_rule_that_denies_leaves_only_deny_to_a_link(aw: AwEnv, server: Served) -> None:
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    q = ask(aw, 1)
    got = links(aw, server, q)
    assert httpx.get(got["1. Yes"], timeout=60).status_code == 200  # no rule: the person decides
    with aw.paths.config_file.open("a", encoding="utf-8") as f:
        f.write('\n[[answer_rules]]\nname = "no touching"\ncommand = "touch *"\n'
                'answer = { deny = true }\n')
    r = tap_post(got["1. Yes"])
    # the rule decides first: refused by the link, or the question denied by the policy already
    assert r.status_code in (403, 410), r.text
    if r.status_code == 403:
        assert "your answer rule &#x27;no touching&#x27; denies this question" in r.text
    assert "chose 1. Yes" not in [c["choice"] for c in recorded(aw)]


def test_the_dashboard_on_a_phone_and_its_manifest(
    aw: AwEnv, server: Served, page: Browser,
) -> None:
    r = httpx.get(f"{server.url}/static/manifest.webmanifest", timeout=60)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/manifest+json")
    manifest = r.json()
    assert manifest["display"] == "standalone" and manifest["start_url"] == "/"
    for icon in manifest["icons"]:
        assert icon["src"].startswith("/static/")  # served here, nothing from elsewhere
        got = httpx.get(server.url + icon["src"], timeout=60)
        assert got.status_code == 200 and got.headers["content-type"] == icon["type"]
        assert got.content[:4] in (b"\x89PNG", b"<svg")
    aw.start_standin("sa", "--dialog-on", "OPENDIALOG")
    aw.wait_state("sa", "ready")
    page.phone()
    link = aw.cli("token", "--link", "--url", server.url, check=True).stdout.strip()
    page.open(link)
    page.wait(lambda: page.shown("#main") and page.text("#conn") == "live", "logged in")
    page.click('#session-list li[data-session="sa"] .session-card, '
               '#session-list li[data-session="sa"]')
    page.wait(lambda: page.text("#sv-name") == "sa", "sa selected")
    send(aw, "sa", "please OPENDIALOG 1", "--no-ack")
    page.wait(lambda: page.shown("#question") and page.one("#question .q-option"),
              "the question card")
    no_side_scroll(page)
    # (xterm.js's helper textarea is its invisible keyboard catcher, not a target)
    small = small_targets(page, "button, select, textarea:not(.xterm-helper-textarea), .q-option,"
                                " .session-card")
    assert small == [], small
    # the agent's screen: the live terminal (issue 42), or the read-only box without it
    assert (page.shown("#live-term") or page.shown("#screen")) and page.shown("#send-content")
    hrefs = page.driver.execute_script(
        "return [...document.querySelectorAll('link[href], script[src]')]"
        ".map((n) => n.href || n.src)")
    assert all(h.startswith(server.url) for h in hrefs), hrefs
    page.shot("dashboard-question-phone", full=False)
    page.click('#question .q-option[data-number="1"]')
    page.wait(lambda: "Answered" in page.text("#answer-result"), "answered from the phone")
    no_side_scroll(page)
    assert [c["choice"] for c in recorded(aw)] == ["chose 1. Yes"]
