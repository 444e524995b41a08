"""Another host's live terminal on the hub's page (issues 38 and 42).

The hub's ``/api/ws/terminal`` streams a session of a joined host through
that host's link (``terminal_*`` requests, served by the host's
``sessions.hub_terminal``) with the frames, pacing and take-over of a local
page: read-only first, keys typed only once taken over, the take-over
audited on the session's own host, the end of the session and a host gone
said to the page. Real hub and host processes (support.hub_kit), the real
link over TLS, tmux stand-in sessions; the page in a real Chromium. What a
host sends is hostile data: the frame reader's rules run without tmux.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from typing import Any

import pytest
from conftest import AwEnv
from support.hub_kit import (  # the fixtures by their names: hub, alpha, beta, _stop_hosts
    HOSTS,
    Hub,
    HubApi,
    alpha_fixture,  # noqa: F401
    beat_fast,
    hub_fixture,  # noqa: F401
    spki_pin,
    start_session,
    stop_hosts,  # noqa: F401
)
from support.page_kit import keys, problems, take_over, term_text
from support.waiting import wait_for

from agentwrap.terminal.live import Frame, frame_from_wire, frame_to_wire

ESC = "\x1b"


# --- a host's frames, read as hostile data (no tmux) ----------------------------------


def frame(*lines: str, cursor: tuple[int, int] = (0, 0)) -> Frame:
    return Frame(cols=20, rows=len(lines), cursor=cursor, cursor_visible=True,
                 app_cursor=False, lines=lines)


def test_a_frame_crosses_the_link_with_its_unchanged_rows_left_out() -> None:
    first = frame("one", "two", "three")
    wire = frame_to_wire(first)
    assert wire["lines"] == ["one", "two", "three"]
    assert frame_from_wire(json.loads(json.dumps(wire))) == first
    second = frame("one", "TWO", "three", cursor=(1, 3))
    diff = frame_to_wire(second, first)
    assert diff["lines"] == [None, "TWO", None] and diff["cursor"] == [1, 3]
    assert frame_from_wire(diff, first) == second
    # a null row with nothing before it on the stream is blank, never another stream's
    assert frame_from_wire(diff).lines == ("", "TWO", "")


def test_a_hostile_hosts_frame_is_cleaned_or_refused() -> None:
    sneaky = frame_to_wire(frame(f"{ESC}]52;c;Y3VybA=={ESC}\\{ESC}[31mred{ESC}[0m{ESC}[6n"))
    assert frame_from_wire(sneaky).lines == (f"{ESC}[31mred{ESC}[0m",)  # SGR only survives
    long = frame_to_wire(frame("x" * 100_000))
    assert len(frame_from_wire(long).lines[0]) <= 20 * 32 + 64  # cut to what 20 columns hold
    good = frame_to_wire(frame("a", "b"))
    bad: list[tuple[str, Any]] = [
        ("cols", 0), ("cols", 10**6), ("cols", True), ("rows", "2"), ("rows", 3),
        ("cursor", [1]), ("cursor", [-1, 0]), ("cursor", "0,0"), ("lines", "ab"),
        ("lines", ["a", 7]), ("cursorVisible", "yes"), ("appCursor", None),
    ]
    for key, value in bad:
        with pytest.raises(ValueError):
            frame_from_wire({**good, key: value})
    for value in (None, [], "frame", 7):
        with pytest.raises(ValueError):
            frame_from_wire(value)


# --- the hub's socket, with a plain client ---------------------------------------------------


def one_host(hub: Hub, alpha: AwEnv) -> HubApi:
    hub.join(alpha, "alpha")
    beat_fast(alpha)
    start_session(alpha, "api")
    alpha.wait_state("api", "ready")
    api = HubApi(hub)
    wait_for(lambda: api.row("alpha", "api"), 90, "alpha's session listed by the hub",
             on_timeout=hub.log)
    return api


def hub_socket(hub: Hub, session: str) -> Any:
    from websockets.sync.client import connect

    ctx = ssl.create_default_context(cafile=str(hub.cert.ca))
    url = hub.url.replace("https://", "wss://") + f"/api/ws/terminal?session={session}"
    return connect(url, ssl=ctx, origin=hub.url, open_timeout=30)  # type: ignore[arg-type]


def frames_until(ws: Any, cond: Any) -> dict[str, Any]:
    while True:
        msg = json.loads(ws.recv(timeout=60))
        if cond(msg):
            return msg


def screen_of(frames: list[dict[str, Any]]) -> str:
    return "".join(f["data"] for f in frames if f["type"] == "screen")


def audit(aw: AwEnv) -> list[dict[str, Any]]:
    path = aw.paths.audit_log
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] \
        if path.exists() else []
    return [e for e in lines if str(e.get("event", "")).startswith("takeover")]


@pytest.mark.usefixtures("tmux")
def test_the_hubs_terminal_streams_a_remote_pane_and_types_only_once_taken_over(
        hub: Hub, alpha: AwEnv) -> None:
    api = one_host(hub, alpha)
    token = api.client.headers["Authorization"].removeprefix("Bearer ")
    with hub_socket(hub, "alpha%2Fapi") as ws:
        ws.send(json.dumps({"type": "auth", "token": token, "acks": True}))
        seen: list[dict[str, Any]] = []

        def prompt(m: dict[str, Any]) -> bool:
            seen.append(m)
            if m["type"] == "screen":
                ws.send(json.dumps({"type": "drawn", "seq": m["seq"]}))
            return "? for shortcuts" in screen_of(seen)

        first = frames_until(ws, prompt)
        assert (first["cols"], first["rows"]) == (100, 30)  # the remote pane's own size
        ws.send(json.dumps({"type": "keys", "data": "read-only?\r"}))
        refused = frames_until(ws, lambda m: m["type"] == "refused")
        assert "take over first" in refused["reason"]
        ws.send(json.dumps({"type": "takeover", "on": True}))
        frames_until(ws, lambda m: m["type"] == "takeover" and m["on"])
        ws.send(json.dumps({"type": "keys", "data": "typed through the hub\r"}))
        alpha.wait_for(lambda: "typed through the hub" in alpha.received(), 30,
                       "the keys in alpha's agent")
        # the agent's reply streams back to the hub's page
        seen.clear()
        frames_until(ws, lambda m: (seen.append(m) or True) and "OK, noted." in screen_of(seen))
    assert "read-only?" not in "".join(alpha.received())
    assert alpha.received().count("typed through the hub") == 1
    # the page left: the keyboard given back, both ends audited on alpha, the session's host
    events = alpha.wait_for(lambda: (e := audit(alpha)) and len(e) == 2 and e, 30,
                            "the take-over's audit lines on alpha")
    assert [e["event"] for e in events] == ["takeover_started", "takeover_ended"]
    assert events[0]["by"] == "hub:http" and events[0]["client"].startswith("127.0.0.1:")
    assert events[1]["reason"] == "page left" and events[1]["session"] == "api"
    assert events[1]["chars"] == len("typed through the hub\r")
    assert not (alpha.paths.runtime_dir / "api.takeover").exists()
    # the host closed the view the page had: nothing left open for the hub
    assert "api" in alpha.cli("ls", check=True).stdout


@pytest.mark.usefixtures("tmux")
def test_the_end_of_a_remote_session_and_its_host_gone_are_said_to_the_page(
        hub: Hub, alpha: AwEnv) -> None:
    from websockets.exceptions import ConnectionClosed

    api = one_host(hub, alpha)
    token = api.client.headers["Authorization"].removeprefix("Bearer ")
    start_session(alpha, "web")  # the supervisor host stays up when "api" ends (its link too)
    alpha.wait_state("web", "ready")
    wait_for(lambda: api.row("alpha", "web"), 90, "alpha's second session listed")
    with hub_socket(hub, "alpha%2Fapi") as ws:
        ws.send(json.dumps({"type": "auth", "token": token}))
        frames_until(ws, lambda m: m["type"] == "screen")
        alpha.cli("stop", "api", check=True)
        ended = frames_until(ws, lambda m: m["type"] == "ended")
        assert ended["reason"]
    # the supervisor host killed: its link is gone, the page is told to try again, and why
    for proc in HOSTS:
        proc.kill()
        proc.wait(30)
    got: Any = None
    deadline = 60
    for _ in range(deadline):
        with hub_socket(hub, "alpha%2Fweb") as ws:
            ws.send(json.dumps({"type": "auth", "token": token}))
            try:
                msg = json.loads(ws.recv(timeout=30))
            except ConnectionClosed:
                got = ws
                break
            assert msg["type"] == "screen"  # the link not yet seen dead: a frame, then
    assert got is not None and got.close_code == 1013, got and got.close_code
    assert "unreachable" in (got.close_reason or "")


@pytest.mark.usefixtures("tmux")
def test_a_host_serves_terminals_of_its_own_sessions_only_and_checks_every_value(
        hub: Hub, alpha: AwEnv) -> None:
    """Straight at the host's code behind the link: what a hostile hub could ask."""
    from agentwrap.errors import ForeignSession, SessionNotFound, SessionNotRunning
    from agentwrap.sessions.hub_requests import HostRequests
    from agentwrap.sessions.lifecycle import stop_many

    one_host(hub, alpha)
    host = HostRequests(alpha.paths, "alpha", stop=stop_many)
    with pytest.raises(ForeignSession):
        host("terminal_open", {"session": "beta/api"})
    with pytest.raises(SessionNotFound):
        host("terminal_open", {"session": "nobody"})
    viewer = host("terminal_open", {"session": "alpha/api"})["viewer"]
    look = host("terminal_look", {"viewer": viewer})
    assert look["frame"]["rows"] == 30 and any("? for shortcuts" in (x or "")
                                                for x in look["frame"]["lines"])
    again = host("terminal_look", {"viewer": viewer, "seen": look["changes"], "wait_s": 0.05})
    assert again.get("same") is True or again["frame"]["lines"].count(None) > 20
    for bad in ({"viewer": "../x"}, {"viewer": viewer, "seen": "1"},
                {"viewer": viewer, "wait_s": -1}, {"viewer": viewer, "extra": 1}):
        with pytest.raises(TypeError):
            host("terminal_look", bad)
    with pytest.raises(SessionNotRunning):
        host("terminal_look", {"viewer": "0123456789abcdef"})  # none such
    for bad in ({"session": "api", "by": "x\ny"}, {"session": "api", "by": "p", "idle_s": 0},
                {"session": "api", "by": "p", "idle_s": True}):
        with pytest.raises(TypeError):
            host("terminal_takeover", bad)
    kb = host("terminal_takeover", {"session": "api", "by": "person", "idle_s": 60})["keyboard"]
    for bad in ({"keyboard": kb, "kind": "exec", "data": "x"},
                {"keyboard": kb, "kind": "keys", "data": 7},
                {"keyboard": kb, "kind": "keys", "data": "x" * 200_001},
                {"keyboard": kb, "kind": "resize", "cols": "80", "rows": 24}):
        with pytest.raises(TypeError):
            host("terminal_input", bad)
    host("terminal_input", {"keyboard": kb, "kind": "keys", "data": "by the host's rules\r"})
    alpha.wait_for(lambda: "by the host's rules" in alpha.received(), 30, "typed")
    assert host("terminal_release", {"keyboard": kb, "reason": "done"}) == {"released": True}
    with pytest.raises(SessionNotRunning):  # given back: no more keys through it
        host("terminal_input", {"keyboard": kb, "kind": "keys", "data": "late\r"})
    assert host("terminal_close", {"viewer": viewer}) == {"closed": True}
    assert "late" not in "".join(alpha.received())
    assert [e["by"] for e in audit(alpha)] == ["hub:person", "hub:person"]
    host.terminals.shut()


# --- the hub's page, in Chromium ------------------------------------------------------------


@pytest.mark.usefixtures("tmux", "browser")
def test_the_hubs_page_shows_a_remote_terminal_and_types_into_it(
        hub: Hub, alpha: AwEnv) -> None:
    from selenium.webdriver.common.keys import Keys
    from support.browser import chromium

    one_host(hub, alpha)
    link = hub.aw.cli("token", "--link", "--url", hub.url, check=True).stdout.strip()
    flags = (f"--ignore-certificate-errors-spki-list={spki_pin(hub.cert.cert)}",)
    with contextlib.contextmanager(chromium)("hub-remote-terminal", flags=flags) as page:
        page.open(link)
        page.wait(lambda: page.shown("#main") and page.text("#conn") == "live",
                  "logged in on the hub's page, live")
        row = '#session-list li[data-host="alpha"][data-session="api"] button'
        page.wait(lambda: page.one(row), "alpha's session on the hub's page")
        page.click(row)
        page.wait(lambda: "? for shortcuts" in term_text(page), "alpha's prompt in the terminal")
        keys(page, "not typed")  # read-only first
        take_over(page)
        keys(page, "hello from the hub's page", Keys.ENTER)
        alpha.wait_for(lambda: "hello from the hub's page" in alpha.received(), 30,
                       "the prompt in alpha's agent")
        page.wait(lambda: "OK, noted." in term_text(page), "the reply, streamed back")
        page.shot("hub-remote-terminal")
        assert "not typed" not in "".join(alpha.received())
        assert not problems(page)
