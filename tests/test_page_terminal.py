"""The dashboard's live terminal and taking over a session from the page (issue 42).

`agentwrap serve` runs as a subprocess against real tmux sessions (a stand-in
agent, a hostile program); the page is a real headless Chromium that logs in
with the one-time link. The terminal shows the pane (its prompt, its size,
what streams), "Type" hands the page the keyboard (keys reach the agent,
Esc interrupts, queued messages wait for the person and go in after), a page
of another origin gets nothing, and a hostile screen stays inert. The
socket's rules are also checked without a browser, with a plain WebSocket
client. Waits are deadlines, never thresholds.
"""

from __future__ import annotations

import http.server
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import AwEnv
from support.browser import Browser, chromium
from support.delivery_kit import press, type_keys, write_config
from support.http_kit import Served, serve, serve_for_a_page
from support.page_kit import keys, login, problems, take_over, term_text

from agentwrap.terminal.live import Frame, clean_row, repaint

HOSTILE = Path(__file__).resolve().parent / "support" / "hostile_terminal.py"
ESC = "\x1b"


# --- the stream's rules, without tmux ------------------------------------------------


def test_a_row_keeps_its_colours_and_loses_every_other_sequence() -> None:
    row = (f"{ESC}[1;31mred{ESC}[0m {ESC}]52;c;Y3VybA=={ESC}\\clip {ESC}]8;;javascript:x{ESC}\\"
           f"link{ESC}]8;;\x07 {ESC}P+q544e{ESC}\\{ESC}[6n{ESC}[?1049h bell\x07 {ESC}c end")
    assert clean_row(row) == f"{ESC}[1;31mred{ESC}[0m clip link  bell  end"
    assert clean_row(f"{ESC}[38;2;1;2;3mtrue{ESC}[m") == f"{ESC}[38;2;1;2;3mtrue{ESC}[m"
    assert clean_row(f"cut {ESC}]52;c;unterminated") == "cut "


def frame(*lines: str, cursor: tuple[int, int] = (0, 0), cols: int = 20) -> Frame:
    return Frame(cols=cols, rows=len(lines), cursor=cursor, cursor_visible=True,
                 app_cursor=False, lines=lines)


def test_a_repaint_sends_the_changed_rows_only() -> None:
    first = repaint(None, frame("a", "b", "c"))
    assert all(f"{ESC}[{i};1H{ESC}[0m{x}" in first for i, x in ((1, "a"), (2, "b"), (3, "c")))
    assert repaint(frame("a", "b", "c"), frame("a", "b", "c")) == ""  # nothing: nothing sent
    diff = repaint(frame("a", "b", "c"), frame("a", "B", "c", cursor=(1, 1)))
    assert f"{ESC}[2;1H{ESC}[0mB" in diff and "a" not in diff and f"{ESC}[2;2H" in diff
    moved = repaint(frame("a", "b"), frame("a", "b", cursor=(1, 0)))
    assert moved.endswith(f"{ESC}[2;1H{ESC}[?25h")
    wider = repaint(frame("a", "b"), frame("a", "b", cols=30))  # a resize repaints all
    assert f"{ESC}[1;1H" in wider and f"{ESC}[2;1H" in wider


def _drawn(*frames: Frame) -> list[str]:
    """The rows a terminal shows after the repaints from one frame to the next."""
    import pyte

    class Screen(pyte.Screen):  # type: ignore[misc]
        def scroll_up(self, count: int = 1, *_: object) -> None:  # SU: pyte has none
            y, bottom = self.cursor.y, (self.margins or (0, self.lines - 1))[1]
            self.cursor.y = bottom
            for _ in range(count or 1):
                self.index()
            self.cursor.y = y

    class Stream(pyte.Stream):  # type: ignore[misc]
        csi: ClassVar[dict[str, str]] = {**pyte.Stream.csi, "S": "scroll_up"}

    screen = Screen(frames[0].cols, frames[0].rows)
    stream = Stream(screen)
    prev: Frame | None = None
    for f in frames:
        stream.feed(repaint(prev, f))
        prev = f
    return [row.rstrip() for row in screen.display]


def test_a_screen_that_scrolled_is_scrolled_and_only_its_new_rows_are_sent() -> None:
    """A streaming reply scrolls the screen a line (or a few) at a time, above
    a prompt box that stays put: the repaint scrolls that region and sends the
    new rows, and whatever the frames, the terminal ends showing the last."""
    import random

    box = ("-" * 12, "> draft", "-" * 12)
    lines = [f"line {i} of the reply" for i in range(40)]

    def screen(top: int) -> Frame:
        return frame(*lines[top:top + 9], *box, cursor=(10, 7))

    before, after = screen(0), screen(3)
    out = repaint(before, after)
    assert f"{ESC}[1;9r{ESC}[3S{ESC}[r" in out  # the region above the box, up 3
    assert "line 3 of" not in out and all(f"line {i} of" in out for i in (9, 10, 11))
    assert len(out) < len(repaint(None, after)) / 2
    assert _drawn(before, after) == list(after.lines)
    full = frame(*lines[0:12]), frame(*lines[2:14])  # the whole screen scrolled: no region
    assert repaint(*full).startswith(f"{ESC}[?25l{ESC}[0m{ESC}[2S{ESC}[")  # no region
    assert _drawn(*full) == list(full[1].lines)
    rng = random.Random(42)
    for _ in range(300):  # any change at all: drawn as the new frame says
        words = ["", "a", "b", "ccc", "line 1 of the reply", "-" * 12]
        old = frame(*[rng.choice(words) for _ in range(8)])
        k = rng.randrange(0, 4)
        rows = [*old.lines[k:], *[rng.choice(words) for _ in range(k)]]
        for _ in range(rng.randrange(0, 3)):
            rows[rng.randrange(8)] = rng.choice(words)
        new = frame(*rows, cursor=(rng.randrange(8), rng.randrange(20)))
        assert _drawn(old, new) == list(new.lines), (old, new)


# --- a real pane -------------------------------------------------------------------------


def test_a_pane_is_read_as_tmux_renders_it_and_a_page_typing_is_a_person(aw: AwEnv) -> None:
    from agentwrap.sessions.lifecycle import tmux_socket_of
    from agentwrap.terminal.live import LivePane
    from agentwrap.terminal.tmux import TmuxTerminal

    aw.cli("run", "--detach", "--name", "hs", "--cols", "80", "--rows", "24", "--",
           sys.executable, str(HOSTILE), check=True)
    rec = aw.registry().get("hs")
    pane = LivePane.adopt(tmux_socket_of(aw.paths, rec), "hs")
    got = aw.wait_for(lambda: (f := pane.capture()) and "type a line:" in "".join(f.lines) and f,
                      30, "the hostile screen")
    assert (got.cols, got.rows) == (80, 24) and len(got.lines) == 24
    joined = "\n".join(got.lines)
    assert "RED-BOLD" in joined and "xxx:END" in joined
    plain = [re.sub(r"\x1b\[[0-9;:]*m", "", x) for x in got.lines]
    assert max(len(x) for x in plain) <= 80  # a huge line is rows of the pane's width
    stripped = "".join(plain)
    assert ESC not in stripped and "\x07" not in stripped  # SGR only: no OSC 52/8, no query

    # nobody attached, no page: nobody types; a page's key is a person's key
    term = TmuxTerminal.adopt(tmux_socket_of(aw.paths, rec), "hs")
    assert term.user_idle_s() is None
    pane.marker.touch()
    idle = term.user_idle_s()
    assert idle is not None and idle < 60
    pane.marker.unlink()
    assert term.user_idle_s() is None


# --- the socket, with a plain client ------------------------------------------------------


def ws_url(server: Served, session: str) -> str:
    return server.url.replace("http://", "ws://") + f"/api/ws/terminal?session={session}"


def frames_until(ws: Any, cond: Any, what: str) -> dict[str, Any]:
    """Frames from ``ws`` until one satisfies ``cond`` (the socket's own timeout is the deadline)."""
    while True:
        msg = json.loads(ws.recv(timeout=60))
        if cond(msg):
            return msg


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    yield from serve_for_a_page(aw)


def test_the_socket_refuses_other_origins_and_keys_without_a_take_over(
    aw: AwEnv, server: Served
) -> None:
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect

    aw.start_standin()
    aw.wait_state("sa", "ready")
    host = server.url.removeprefix("http://")
    with pytest.raises(InvalidStatus):  # refused before the handshake is accepted
        connect(ws_url(server, "sa"), origin="http://evil.example",  # type: ignore[arg-type]
                additional_headers={"Authorization": f"Bearer {server.token}"})
    with connect(ws_url(server, "sa"), origin=f"http://{host}") as ws:  # type: ignore[arg-type]
        ws.send(json.dumps({"type": "auth", "token": "wrong"}))
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
        assert ws.close_code == 4401

    with connect(ws_url(server, "sa"), origin=f"http://{host}") as ws:  # type: ignore[arg-type]
        ws.send(json.dumps({"type": "auth", "token": server.token}))
        first = frames_until(ws, lambda m: m["type"] == "screen", "a screen")
        assert (first["cols"], first["rows"]) == (100, 30)
        ws.send(json.dumps({"type": "keys", "data": "read-only?\r"}))
        refused = frames_until(ws, lambda m: m["type"] == "refused", "the refusal")
        assert "take over first" in refused["reason"]
        ws.send(json.dumps({"type": "takeover", "on": True}))
        frames_until(ws, lambda m: m["type"] == "takeover" and m["on"], "the keyboard")
        ws.send(json.dumps({"type": "keys", "data": "typed on the socket\r"}))
        aw.wait_for(lambda: "typed on the socket" in aw.received(), 30, "the keys in the agent")
    assert "read-only?" not in "".join(aw.received())
    # the page left: the take-over ended, both ends audited
    events = aw.wait_for(lambda: (e := takeover_audit(aw)) and len(e) == 2 and e, 30,
                         "the take-over's audit lines")
    assert [e["event"] for e in events] == ["takeover_started", "takeover_ended"]
    assert events[1]["reason"] == "page left" and events[1]["session"] == "sa"
    assert events[1]["chars"] == len("typed on the socket\r") and events[1]["duration_s"] >= 0
    assert events[0]["by"] == "http" and events[0]["client"].startswith("127.0.0.1:")
    assert not (aw.paths.runtime_dir / "sa.takeover").exists()


def takeover_audit(aw: AwEnv) -> list[dict[str, Any]]:
    path = aw.paths.audit_log
    if not path.exists():
        return []
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [e for e in lines if str(e.get("event", "")).startswith("takeover")]


# --- the page ----------------------------------------------------------------------------


@pytest.fixture
def page(request: pytest.FixtureRequest, browser: None) -> Iterator[Browser]:
    yield from chromium(request.node.name)


def test_the_terminal_shows_the_prompt_and_what_the_agent_streams(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    aw.start_standin()
    aw.wait_state("sa", "ready")
    login(page, aw, server)
    page.click('#session-list li[data-session="sa"] button')
    page.wait(lambda: "? for shortcuts" in term_text(page), "the prompt in the live terminal")
    assert page.driver.execute_script("return window.agentwrapTerminal.size()") == \
        {"cols": 100, "rows": 30}  # the pane's own size
    assert page.shown("#live-term") and not page.shown("#screen")
    assert page.one("#term-type").get_attribute("aria-pressed") == "false"  # read-only first
    type_keys(aw, "streamed from tmux")
    press(aw, "Enter")
    page.wait(lambda: "OK, noted." in term_text(page), "the reply, streamed")
    assert "❯ streamed from tmux" in term_text(page)
    page.shot("live-terminal", docs="dashboard")
    assert not problems(page)


def test_take_over_types_into_the_agent_and_esc_interrupts(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    from selenium.webdriver.common.keys import Keys

    aw.start_standin("sa", "--busy", "30", "--esc-interrupts")
    aw.wait_state("sa", "ready")
    login(page, aw, server)
    page.click('#session-list li[data-session="sa"] button')
    page.wait(lambda: "? for shortcuts" in term_text(page), "the live terminal")
    keys(page, "not typed")  # read-only: nothing reaches the agent
    take_over(page)
    page.shot("typing")
    keys(page, "hello from the page", Keys.ENTER)
    aw.wait_for(lambda: "hello from the page" in aw.received(), 30, "the prompt in the agent")
    page.wait(lambda: "esc to interrupt" in term_text(page), "the agent busy on it")
    keys(page, Keys.ESCAPE)
    page.wait(lambda: "Interrupted by user" in term_text(page), "Esc reached the agent")
    assert "not typed" not in "".join(aw.received())
    page.click("#term-type")  # give it back
    page.wait(lambda: not page.driver.execute_script("return window.agentwrapTerminal.typing()"),
              "read-only again")
    ended = aw.wait_for(lambda: [e for e in takeover_audit(aw) if e["event"] == "takeover_ended"],
                        30, "the end audited")
    assert ended[0]["reason"] == "given back"
    assert not problems(page)


def test_a_queued_message_waits_while_the_person_types_and_goes_in_after(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    # a long grace: the message waits for as long as the page holds the keyboard (and a
    # window shut that long is not a failed attempt, as for a person typing in tmux)
    write_config(aw, typing_grace_ms=3_600_000, readiness_timeout_s=600)
    aw.start_standin()
    aw.wait_state("sa", "ready")
    login(page, aw, server)
    page.click('#session-list li[data-session="sa"] button')
    page.wait(lambda: "? for shortcuts" in term_text(page), "the live terminal")
    take_over(page)
    from selenium.webdriver.common.keys import Keys

    keys(page, "x", Keys.BACKSPACE)  # a key pressed, the box empty again: no draft to see
    sent_at = time.time()
    aw.cli("send", "sa", "queued while the person types", check=True)
    why = aw.wait_for(lambda: "a person took over" in (q := aw.cli("queue", "sa").stdout) and q,
                      30, "the queue saying why it waits")
    assert "queued while the person types" in why
    # the supervisor has looked at the pane twice since (its heartbeat), and typed nothing
    aw.wait_for(lambda: aw.registry().get("sa").heartbeat > sent_at + 2, 30, "two heartbeats")
    assert aw.received() == []
    page.click("#term-type")  # the person gives the keyboard back: it goes in
    aw.wait_for(lambda: len(aw.received()) == 1, 60, "delivered after")
    assert "queued while the person types" in aw.received()[0]
    page.wait(lambda: "queued while the person types" in term_text(page), "on the page too")


class _EvilPage(http.server.BaseHTTPRequestHandler):
    target = ""
    token = ""

    def do_GET(self) -> None:
        body = f"""<!doctype html><script>
window.__log = [];
const ws = new WebSocket({json.dumps(self.target)});
ws.onopen = () => {{ window.__log.push('open');
  ws.send(JSON.stringify({{type: 'auth', token: {json.dumps(self.token)}}}));
  ws.send(JSON.stringify({{type: 'takeover', on: true}}));
  ws.send(JSON.stringify({{type: 'keys', data: 'from evil\\r'}})); }};
ws.onmessage = (e) => window.__log.push('message');
ws.onclose = (e) => window.__log.push('close ' + e.code);
</script>""".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_page_of_another_origin_cannot_take_over(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    aw.start_standin()
    aw.wait_state("sa", "ready")
    # the worst case: the other site even knows the token
    handler = type("Evil", (_EvilPage,), {"target": ws_url(server, "sa"), "token": server.token})
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        page.open(f"http://127.0.0.1:{evil.server_address[1]}/")
        log = page.wait(lambda: (g := page.driver.execute_script("return window.__log")) and
                        any(x.startswith("close") for x in g) and g, "the socket closed")
        assert "open" not in log and "message" not in log, log
    finally:
        evil.shutdown()
    assert takeover_audit(aw) == [] and aw.received() == []
    assert "from evil" not in aw.cli("state", "sa", "--screen").stdout


def test_a_hostile_screen_stays_inert_in_the_terminal(
    aw: AwEnv, server: Served, page: Browser
) -> None:
    # whatever writes to the clipboard or opens a window, recorded before the page runs
    page.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
        window.__calls = [];
        const note = (what) => function () { window.__calls.push(what); };
        if (navigator.clipboard) {
          navigator.clipboard.writeText = note('clipboard.writeText');
          navigator.clipboard.write = note('clipboard.write');
        }
        document.execCommand = note('execCommand');
        window.open = note('window.open');
        window.alert = note('alert');
    """})
    aw.cli("run", "--detach", "--name", "hs", "--cols", "100", "--rows", "24", "--",
           sys.executable, str(HOSTILE), check=True)
    login(page, aw, server)
    page.click('#session-list li[data-session="hs"] button')
    page.wait(lambda: "type a line:" in term_text(page), "the hostile screen in the terminal")
    shown = term_text(page)
    assert "<script>window.__pwned='script'</script>" in shown and "RED-BOLD" in shown
    assert "clipboard set" in shown and "xxxx:END" in shown
    # click every cell of the link's row, as a person might: no link opens
    from selenium.webdriver.common.action_chains import ActionChains

    rows = page.css("#live-term .xterm-rows > div")
    link_row = next(r for r in rows if "a link" in r.text)
    ActionChains(page.driver).move_to_element(link_row).click().perform()
    type_keys(aw, "still alive", name="hs")
    press(aw, "Enter", name="hs")
    page.wait(lambda: "got: still alive" in term_text(page), "the terminal still live")
    assert page.driver.execute_script("return window.__pwned === undefined")
    assert page.driver.execute_script("return window.__calls") == []
    assert page.driver.execute_script(
        "return document.querySelectorAll('#live-term a, #live-term script, #live-term img').length"
    ) == 0
    assert not page.one("#live-term .xterm").get_attribute("title")
    page.shot("hostile-terminal")
    assert not problems(page)


def test_a_take_over_ends_after_the_idle_time(aw: AwEnv) -> None:
    from websockets.sync.client import connect

    write_config(aw)
    with aw.paths.config_file.open("a", encoding="utf-8") as f:
        f.write("\n[serve]\ntakeover_idle_s = 0.5\n")
    served = next(gen := serve(aw))
    try:
        aw.start_standin()
        aw.wait_state("sa", "ready")
        with connect(ws_url(served, "sa"),
                     additional_headers={"Authorization": f"Bearer {served.token}"}) as ws:
            ws.send(json.dumps({"type": "takeover", "on": True}))
            frames_until(ws, lambda m: m["type"] == "takeover" and m["on"], "the keyboard")
            ended = frames_until(ws, lambda m: m["type"] == "takeover" and not m["on"], "its end")
            assert ended["reason"] == "idle"
            ws.send(json.dumps({"type": "keys", "data": "after the end\r"}))
            frames_until(ws, lambda m: m["type"] == "refused", "keys refused once it ended")
        assert [e["reason"] for e in takeover_audit(aw) if e["event"] == "takeover_ended"] == ["idle"]
        assert aw.received() == []
    finally:
        gen.close()


def test_the_idle_time_must_be_positive(aw: AwEnv) -> None:
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text("[serve]\ntakeover_idle_s = 0\n", encoding="utf-8")
    out = aw.cli("doctor")
    assert "serve.takeover_idle_s: must be more than 0" in out.stdout + out.stderr


def test_a_page_of_another_origin_cannot_log_in_nor_use_up_the_code(
    aw: AwEnv, server: Served
) -> None:
    import httpx

    link = aw.cli("token", "--link", "--url", server.url, check=True).stdout.strip()
    code = link.split("#login=", 1)[1]
    evil = httpx.post(f"{server.url}/api/login", json={"code": code},
                      headers={"Origin": "http://evil.example"})
    assert evil.status_code == 401 and "another site" in evil.json()["detail"]
    own = httpx.post(f"{server.url}/api/login", json={"code": code},
                     headers={"Origin": server.url})
    assert own.status_code == 200 and own.json()["token"]
