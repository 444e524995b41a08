"""The tmux backend against real tmux servers on private sockets.

Every test gets its own server (socket in a fresh temp dir); nothing here
talks to the user's default tmux server, and one test proves agentwrap does
not either.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from support.waiting import wait_for

from agentwrap.backends.base import KEYS, PASTE_END, PASTE_START
from agentwrap.backends.proctree import alive
from agentwrap.backends.tmux import TmuxTerminal
from agentwrap.errors import BackendError

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "support" / "term_probe.py"
STANDIN = ROOT / "tests" / "support" / "standin_agent.py"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")

T = TypeVar("T")


@dataclass
class Box:
    dir: Path
    socket: Path
    env: dict[str, str]

    def launch(self, argv: list[str], name: str = "t", **kw: int) -> TmuxTerminal:
        return TmuxTerminal.launch(self.socket, name, argv, env=self.env, cwd=self.dir, **kw)

    def probe(self, *args: str, name: str = "t", **kw: int) -> TmuxTerminal:
        return self.launch([sys.executable, str(PROBE), *args], name, **kw)


@pytest.fixture
def box() -> Iterator[Box]:
    d = Path(tempfile.mkdtemp(prefix="awtb-", dir="/tmp"))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(d),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "LC_CTYPE": "C.UTF-8",
        "SHELL": "/bin/sh",
        "PYTHONPATH": str(ROOT),
    }
    b = Box(dir=d, socket=d / "tmux.sock", env=env)
    try:
        yield b
    finally:
        subprocess.run(["tmux", "-S", str(b.socket), "kill-server"], capture_output=True, check=False)
        shutil.rmtree(d, ignore_errors=True)


def screen_has(term: TmuxTerminal, needle: str) -> bool:
    return needle in term.snapshot().text()


def reader(box: Box, *, bracketed: bool) -> tuple[TmuxTerminal, Path]:
    log = box.dir / "read.log"
    term = box.probe("read", str(log), *(["--bracketed"] if bracketed else []))
    wait_for(lambda: screen_has(term, "READY"), what="probe ready")
    return term, log


def log_bytes(log: Path) -> bytes:
    return log.read_bytes() if log.exists() else b""


def wait_log_endswith(log: Path, tail: bytes) -> bytes:
    wait_for(lambda: log_bytes(log).endswith(tail), what=f"{tail!r}")
    return log_bytes(log)


# --- input ---------------------------------------------------------------------------


LITERALS = ["Enter", "C-c", "$(x)", "a\tb", "héllo ✓ 日本 🚀", "/help", "Escape", "'\"; \\n"]


@pytest.mark.parametrize("text", LITERALS)
def test_send_text_arrives_literally(box: Box, text: str) -> None:
    term, log = reader(box, bracketed=False)
    term.send_text(text + "|END")
    assert wait_log_endswith(log, b"|END") == (text + "|END").encode()


def test_paste_of_key_names_arrives_literally(box: Box) -> None:
    term, log = reader(box, bracketed=True)
    text = "\n".join(LITERALS)
    term.paste(text)
    got = wait_log_endswith(log, PASTE_END)
    assert got == PASTE_START + text.encode() + PASTE_END


def test_send_key_sends_exactly_the_table_bytes(box: Box) -> None:
    term, log = reader(box, bracketed=False)
    expected = b""
    for key in KEYS:
        term.send_key(key)
        term.send_text("|")
        expected += KEYS[key] + b"|"
    assert wait_for(lambda: log_bytes(log) == expected and expected, what="all keys") == expected


@pytest.mark.parametrize("bad", ["Enterx", "C-z", "Enter Enter", "", "hello", "enter", "F1"])
def test_send_key_refuses_names_not_in_the_table(box: Box, bad: str) -> None:
    term, log = reader(box, bracketed=False)
    with pytest.raises(BackendError):
        term.send_key(bad)
    term.send_text("|END")
    assert wait_log_endswith(log, b"|END") == b"|END"


def test_multiline_paste_is_one_bracketed_paste(box: Box) -> None:
    term, log = reader(box, bracketed=True)
    text = "line one\nline two\n\nline four with Enter and C-c\n"
    term.paste(text)
    got = wait_log_endswith(log, PASTE_END)
    assert got == PASTE_START + text.encode() + PASTE_END
    assert got.count(PASTE_START) == 1 and b"\r" not in got


def test_paste_without_app_support_has_no_markers(box: Box) -> None:
    term, log = reader(box, bracketed=False)
    term.paste("a\nb")
    term.send_text("|END")
    assert wait_log_endswith(log, b"|END") == b"a\nb|END"


def test_multiline_paste_into_standin_is_one_message(box: Box) -> None:
    rlog = box.dir / "standin.jsonl"
    term = box.launch([sys.executable, str(STANDIN), "--log", str(rlog), "--startup", "0"])
    wait_for(lambda: screen_has(term, "? for shortcuts"), what="stand-in prompt")
    term.paste("first\nsecond Enter\nthird")
    wait_for(lambda: screen_has(term, "third"), what="paste shown")
    term.send_key("Enter")
    # the file exists a moment before its first line is in it
    wait_for(lambda: rlog.exists() and rlog.read_text().endswith("\n"), what="stand-in log")
    msgs = [json.loads(x)["text"] for x in rlog.read_text().splitlines()]
    assert msgs == ["first\nsecond Enter\nthird"]


# --- environment, size, exit -----------------------------------------------------------


@pytest.mark.parametrize("server", ["fresh", "already-running"])
def test_child_gets_exactly_the_env_passed(
    box: Box, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    # A variable only in this process's (or the running server's)
    # environment must not reach the pane; nor may the server's SHELL.
    monkeypatch.setenv("AW_SERVER_ONLY", "leaked")
    if server == "already-running":
        other = {**os.environ, "AW_SERVER_ONLY": "leaked", "SHELL": "/bin/bash", "DISPLAY": ":9"}
        subprocess.run(
            ["tmux", "-S", str(box.socket), "-f", "/dev/null", "new-session", "-d", "-s", "other",
             "sleep 600"], env=other, check=True,
        )
    box.env["AW_PASSED"] = "yes = really; $(not expanded)"
    out = box.dir / "env.json"
    term = box.probe("env", str(out))
    wait_for(lambda: screen_has(term, "ENV-DONE"), what="env dump")
    seen = json.loads(out.read_text())
    # a second session on the now-running server must not inherit it either
    out2 = box.dir / "env2.json"
    term2 = box.probe("env", str(out2), name="t2")
    wait_for(lambda: screen_has(term2, "ENV-DONE"), what="second env dump")
    # what tmux itself sets for every pane (PWD is the cwd we asked for)
    added_by_tmux = {"TERM", "TMUX", "TMUX_PANE", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "PWD"}
    for got in (seen, json.loads(out2.read_text())):
        assert "AW_SERVER_ONLY" not in got
        assert {k: v for k, v in got.items() if k not in added_by_tmux} == box.env
        assert got["TERM"] in ("tmux-256color", "screen-256color")
        assert Path(got["PWD"]) == box.dir


def test_exit_code_propagates(box: Box) -> None:
    term = box.probe("exit", "7")
    wait_for(lambda: not term.alive(), what="exit")
    assert term.exit_code() == 7


def test_killed_by_sigterm_is_143(box: Box) -> None:
    term = box.probe("sleep")
    wait_for(lambda: screen_has(term, "SLEEPING"), what="sleeping")
    pid = term.agent_pid()
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not term.alive(), what="death")
    assert term.exit_code() == 143


def test_resize_changes_what_the_child_sees(box: Box) -> None:
    out = box.dir / "size.txt"
    term = box.probe("size", str(out), cols=100, rows=30)
    wait_for(lambda: out.exists() and "SIZE 100 30" in out.read_text(), what="initial size")
    term.resize(90, 27)
    wait_for(lambda: "SIZE 90 27" in out.read_text(), what="resized")
    snap = term.snapshot()
    assert (snap.cols, snap.rows) == (90, 27)


def test_close_kills_the_whole_process_tree(box: Box) -> None:
    pidfile = box.dir / "pids"
    term = box.probe("spawn", str(pidfile))
    wait_for(pidfile.exists, what="pids")
    child, grandchild = map(int, pidfile.read_text().split())
    assert term.agent_pid() == child
    assert alive(child) and alive(grandchild)
    term.close()
    wait_for(lambda: not alive(child) and not alive(grandchild), timeout=10, what="tree gone")
    proc = subprocess.run(
        ["tmux", "-S", str(box.socket), "has-session", "-t", "=t"], capture_output=True,
        check=False,
    )
    assert proc.returncode != 0


def test_launch_refuses_a_duplicate_session(box: Box) -> None:
    box.probe("sleep")
    with pytest.raises(BackendError):
        box.probe("sleep")


# --- the user's own tmux server ---------------------------------------------------------


def test_never_touches_the_users_default_tmux_server(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A "user" default server, reachable the way a bare `tmux` finds it
    # (TMUX_TMPDIR), and a TMUX variable as if we ran inside it.
    tmpdir = box.dir / "usertmp"
    tmpdir.mkdir()
    user_env = {**os.environ, "TMUX_TMPDIR": str(tmpdir)}
    user_env.pop("TMUX", None)
    subprocess.run(["tmux", "new-session", "-d", "-s", "mine", "sleep 600"], env=user_env, check=True)
    try:
        default_sock = next(tmpdir.glob("tmux-*/default"))
        monkeypatch.setenv("TMUX_TMPDIR", str(tmpdir))
        monkeypatch.setenv("TMUX", f"{default_sock},1,0")
        term, _ = reader(box, bracketed=True)
        term.paste("x\ny")
        term.send_key("Enter")
        term.resize(80, 20)
        term.set_status("ready")
        term.snapshot()
        term.close()
        ls = subprocess.run(
            ["tmux", "list-sessions", "-F", "#{session_name}"], env=user_env,
            capture_output=True, text=True, check=True,
        )
        assert ls.stdout.split() == ["mine"]
        buffers = subprocess.run(
            ["tmux", "list-buffers"], env=user_env, capture_output=True, text=True, check=False
        )
        assert buffers.stdout == ""
        assert box.socket.exists()
    finally:
        subprocess.run(["tmux", "kill-server"], env=user_env, capture_output=True, check=False)
