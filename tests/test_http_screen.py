"""The dashboard's live view and its start/stop (issue 26), through the HTTP API.

A real tmux session runs a program whose screen is hostile (colours, HTML
and script tags, rich markup, a bidi override, OSC title and link, a bell):
``GET /api/sessions/{name}/screen`` gives its rows as styled runs with the
colours kept and no escape sequence left, the event stream says
``session.screen`` when it changes, and sessions listed in the person's own
``[[dashboard.launch]]`` start and stop through the API (nothing else can be
started). The parsing and the checks on read-back are tested on their own
too. Waits are deadlines, never thresholds.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import AwEnv
from support.delivery_kit import press, type_keys
from support.http_kit import InProcess, Served, in_process, register, serve

from agentwrap.config import load_config
from agentwrap.errors import ConfigError
from agentwrap.terminal.styles import (
    Run,
    Style,
    check_runs,
    read_document,
    rows_from_ansi,
)
from agentwrap.terminal.vscreen import VirtualScreen

HOSTILE = Path(__file__).resolve().parent / "support" / "hostile_screen.py"


def launch_config(aw: AwEnv, **extra: str) -> None:
    """The person's own config: one launch entry, the hostile screen in the project."""
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    lines = ["[[dashboard.launch]]", 'name = "hostile screen"', 'profile = "generic"',
             f"command = {json.dumps(sys.executable)}", f"args = [{json.dumps(str(HOSTILE))}]",
             f"cwd = {json.dumps(str(aw.project))}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    aw.paths.config_file.write_text("\n".join(lines) + "\n", encoding="utf-8")


def start_hostile(aw: AwEnv, name: str = "hs") -> None:
    aw.cli("run", "--detach", "--name", name, "--cols", "100", "--rows", "20", "--",
           sys.executable, str(HOSTILE), check=True)


def runs_of(line: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["text"]: r for r in line}


def screen_text(screen: dict[str, Any]) -> str:
    return "\n".join("".join(r["text"] for r in line) for line in screen["lines"])


def wait_screen(api: InProcess, name: str, cond: Any, what: str) -> dict[str, Any]:
    got: list[dict[str, Any]] = [{}]

    def ok() -> bool:
        r = api.get(f"/api/sessions/{name}/screen")
        got[0] = r.json()
        return r.status_code == 200 and bool(cond(got[0]))

    deadline = time.monotonic() + 30
    while not ok():
        assert time.monotonic() < deadline, f"{what}: last {got[0]}"
        time.sleep(0.05)
    return got[0]


# --- the screen, parsed and checked -------------------------------------------------------


def test_sgr_is_kept_as_styles_and_every_other_sequence_dropped() -> None:
    text = ("\x1b[1;31mred\x1b[0m \x1b[38;5;208mo\x1b[38:2::1:2:3mt\x1b[0m \x1b[7;44mrv\x1b[m"
            "\x1b]0;<b>title\x07\x1b[2J\x1b[Hx\x07\u202e\n\x1b[92mcarried\n")
    first, second = rows_from_ansi(text)
    assert first == (
        Run("red", Style(fg=1, bold=True)), Run(" "), Run("o", Style(fg="#ff8700")),
        Run("t", Style(fg="#010203")), Run(" "), Run("rv", Style(bg=4, reverse=True)),
        Run("x\ufffd\u202e"))
    assert second == (Run("carried", Style(fg=10)),)  # the style carries to the next row


def test_a_document_read_back_keeps_only_checked_values() -> None:
    doc = {"digest": "<script>", "at": "now", "cols": 10**9, "cursor": [1, "x"],
           "title": "t\x1b]0;x", "lines": [
               [{"text": "a\x1b[31m\x00b", "fg": "red;background:url(x)", "bg": 3, "bold": "yes"},
                {"text": "c", "fg": "#A0B0C0", "bg": 16, "italic": True},
                {"text": "d", "fg": "#a0b0c0", "bg": True, "reverse": 1},
                "not a run", {"no": "text"}],
               "not a row"]}
    screen = read_document(json.dumps(doc).encode())
    assert screen is not None
    assert (screen.digest, screen.at, screen.cols, screen.cursor) == ("", 0.0, 0, (1, 0))
    assert screen.title == "t\ufffd]0;x"
    assert screen.lines == (
        (Run("a\ufffd[31m\ufffdb", Style(bg=3)), Run("c", Style(italic=True)),
         Run("d", Style(fg="#a0b0c0"))),
        ())
    assert read_document(b"\xff") is None and read_document(b"[1]") is None
    assert check_runs([[{"text": "x" * 5000}]])[0][0].text == "x" * 1000


def test_the_pty_screen_keeps_its_colours() -> None:
    screen = VirtualScreen(40, 3)
    screen.feed(b"\x1b[1;31mred\x1b[0m \x1b[2mdim\x1b[0m \x1b[38;5;208m\xe4\xb8\xadx\x1b[0m\r\n"
                b"\x1b[44m  blue  \x1b[0m")
    snap = screen.snapshot()
    assert snap.styled_rows() == (
        (Run("red", Style(fg=1, bold=True)), Run(" "), Run("dim", Style(dim=True)), Run(" "),
         Run("中x", Style(fg="#ff8700"))),
        (Run("  blue  ", Style(bg=4)),),
        ())


# --- the endpoint, on a real session ---------------------------------------------------------


@pytest.fixture
def served(aw: AwEnv) -> Iterator[Served]:
    yield from serve(aw)


def test_the_screen_endpoint_shows_the_live_screen_with_its_colours(
    aw: AwEnv, served: Served
) -> None:
    start_hostile(aw)
    api = in_process(aw)
    screen = wait_screen(api, "hs", lambda s: "type a line:" in screen_text(s), "the screen")
    assert (screen["session"], screen["cols"], screen["rows"], screen["styled"]) == \
        ("hs", 100, 20, True)
    colours = runs_of(screen["lines"][1])
    assert colours["RED-BOLD"] == {"text": "RED-BOLD", "fg": 1, "bold": True}
    assert colours["ORANGE-256"] == {"text": "ORANGE-256", "fg": "#ff8700"}
    assert colours["WHITE-ON-BLUE"] == {"text": "WHITE-ON-BLUE", "fg": 15, "bg": "#0000ff"}
    assert colours["REVERSED"] == {"text": "REVERSED", "reverse": True}
    text = screen_text(screen)
    assert "<script>window.__pwned='script'</script><img src=x onerror=" in text  # as text
    assert "[bold]rich markup[/] <b>not bold</b>" in text
    assert "bidi: \u202eevil\u202c done" in text
    assert "a link and a bell" in text and "javascript:window" not in text  # OSC 8 dropped
    assert screen["title"] == "<script>window.__pwned='title'</script>"
    raw = json.dumps(screen)
    assert "\\u001b" not in raw and "\\u0007" not in raw  # no escape, no bell: none at all
    assert all(not any(0 <= ord(c) < 32 or 127 <= ord(c) < 160 for c in r["text"])
               for line in screen["lines"] for r in line)

    # it changes as the screen does, and the event stream says so
    with served.client() as c, c.stream("GET", "/api/events?session=hs",
                                        timeout=httpx.Timeout(60)) as r:
        lines = r.iter_lines()
        assert next(lines).startswith("retry:")
        type_keys(aw, "hello <i>there</i>", name="hs")
        press(aw, "Enter", name="hs")
        after = wait_screen(api, "hs", lambda s: "got: hello <i>there</i>" in screen_text(s),
                            "the typed line on the screen")
        assert after["digest"] != screen["digest"]
        seen = screen_events(lines, after["digest"])
    assert seen["session"] == "hs" and seen["data"]["digest"] == after["digest"]
    assert seen["id"].isdigit()  # resuming there misses nothing stored


def screen_events(lines: Iterator[str], digest: str) -> dict[str, Any]:
    """Read the stream until a session.screen event with ``digest`` (each read
    is bounded by the client's timeout; the server writes a keepalive often)."""
    deadline = time.monotonic() + 60
    event: dict[str, Any] = {}
    for line in lines:
        assert time.monotonic() < deadline, "no session.screen event with the new digest"
        if line.startswith("event: "):
            event["type"] = line[len("event: "):]
        elif line.startswith("data: "):
            event.update(json.loads(line[len("data: "):]))
        elif line == "":
            if event.get("type") == "session.screen" and event["data"]["digest"] == digest:
                return event
            event = {}
    raise AssertionError("the stream ended")


def test_no_screen_yet_is_409_and_an_unknown_session_404(aw: AwEnv) -> None:
    register(aw, "fake")
    api = in_process(aw)
    r = api.get("/api/sessions/fake/screen")
    assert r.status_code == 409 and "no screen recorded" in r.json()["detail"], r.text
    assert api.get("/api/sessions/nope/screen").status_code == 404
    assert api.get("/api/sessions/fake/screen", auth=False).status_code == 401


# --- starting and stopping -----------------------------------------------------------------


def test_a_listed_session_starts_and_stops_through_the_api(aw: AwEnv) -> None:
    """Against the real server: the agent and its supervisor start in the server's
    environment, as they do for a person."""
    launch_config(aw, session="hs")
    served = serve(aw)
    try:
        with next(served).client() as api:
            listed_session_starts_and_stops(aw, api)
    finally:
        served.close()


def listed_session_starts_and_stops(aw: AwEnv, api: httpx.Client) -> None:
    listed = api.get("/api/launch").json()
    assert listed == {"configured": True, "choices": [{
        "name": "hostile screen", "profile": "generic", "command": sys.executable,
        "args": [str(HOSTILE)], "cwd": str(aw.project), "session": "hs"}]}

    r = api.post("/api/sessions", json={"launch": "hostile screen"})
    assert r.status_code == 201, r.text
    assert (r.json()["name"], r.json()["profile"], r.json()["liveness"]) == \
        ("hs", "generic", "running")
    wait_screen(in_process(aw), "hs", lambda s: "type a line:" in screen_text(s),
                "the started screen")
    rec = aw.registry().get("hs")
    assert rec.cwd == str(aw.project) and rec.command[-1] == str(HOSTILE)

    again = api.post("/api/sessions", json={"launch": "hostile screen"})
    assert again.status_code == 409 and again.json()["error"] == "Session name taken", again.text
    other = api.post("/api/sessions", json={"launch": "hostile screen", "name": "hs-2"})
    assert other.status_code == 201 and other.json()["name"] == "hs-2", other.text

    stopped = api.post("/api/sessions/hs/stop")
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["liveness"] == "ended" and stopped.json()["ended"]
    assert api.post("/api/sessions/hs/stop").status_code == 409
    assert api.post("/api/sessions/nope/stop").status_code == 404
    assert api.post("/api/sessions/hs-2/stop").status_code == 200
    events = [json.loads(x) for x in aw.paths.audit_log.read_text().splitlines()]
    assert [(e["event"], e["session"], e["by"]) for e in events
            if e["event"] in ("started", "stopped")] == [
        ("started", "hs", "http"), ("started", "hs-2", "http"),
        ("stopped", "hs", "http"), ("stopped", "hs-2", "http")]


@pytest.mark.parametrize("body", [
    {"launch": "not listed"},
    {"launch": "hostile screen", "command": "rm -rf ~"},  # only an entry's name is taken
    {"launch": "hostile screen", "cwd": "/"},
    {"launch": "hostile screen", "name": "bad name; rm"},
    {"launch": 1},
    {},
])
def test_nothing_but_a_listed_entry_starts(aw: AwEnv, body: dict[str, Any]) -> None:
    launch_config(aw)
    api = in_process(aw)
    r = api.post("/api/sessions", json=body)
    assert r.status_code == 400, r.text
    assert aw.registry().list(include_ended=True) == []
    assert api.post("/api/sessions", json={"launch": "hostile screen"}, auth=False) \
        .status_code == 401


def test_without_a_list_nothing_starts(aw: AwEnv) -> None:
    api = in_process(aw)
    assert api.get("/api/launch").json() == {"choices": [], "configured": False}
    r = api.post("/api/sessions", json={"launch": "anything"})
    assert r.status_code == 400 and "[[dashboard.launch]]" in r.json()["hint"], r.text


def test_only_the_persons_own_config_lists_launches(aw: AwEnv) -> None:
    (aw.project / ".agentwrap.toml").write_text(
        '[[dashboard.launch]]\nname = "x"\nprofile = "claude"\ncwd = "/"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[dashboard\] may only be set in your own"):
        load_config(aw.paths, aw.project)


@pytest.mark.parametrize(("entry", "error"), [
    ('name = "x"\nprofile = "claude"', "needs a name and a cwd"),
    ('name = "x"\ncwd = "/"', "needs a profile or a command"),
    ('name = "x"\ncwd = "/"\nprofile = "claude"\nargs = "--yes"', "args: must be a list"),
    ('name = "x"\ncwd = "/"\nprofile = "claude"\nshell = "sh -c"', "shell: unknown key"),
])
def test_a_bad_launch_entry_is_a_config_error(aw: AwEnv, entry: str, error: str) -> None:
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text(f"[[dashboard.launch]]\n{entry}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=error):
        load_config(aw.paths)
