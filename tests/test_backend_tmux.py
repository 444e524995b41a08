"""The tmux backend against real tmux servers on private sockets.

Every test gets its own server (socket in a fresh temp dir); nothing here
talks to the user's default tmux server, and one test proves agentwrap does
not either.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pexpect
import pytest
from support.waiting import wait_for

from agentwrap.errors import AgentExited, BackendError
from agentwrap.terminal.base import KEYS, PASTE_END, PASTE_START
from agentwrap.terminal.proctree import alive, descendants
from agentwrap.terminal.tmux import TmuxTerminal

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "support" / "term_probe.py"
STANDIN = ROOT / "tests" / "support" / "standin_agent.py"

pytestmark = pytest.mark.usefixtures("tmux")  # the tmux layer (tests/conftest.py)

T = TypeVar("T")

F_GETPIPE_SZ = 1032  # Linux fcntl: a pipe's capacity


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
        assert box.socket.exists()  # agentwrap's own server, the one in use
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
        assert not box.socket.exists()  # its server ended with its session, socket removed
    finally:
        subprocess.run(["tmux", "kill-server"], env=user_env, capture_output=True, check=False)


# --- a dead or dying pane ------------------------------------------------------------------


def pane_format(box: Box, fmt: str, name: str = "t") -> str:
    return subprocess.run(
        ["tmux", "-S", str(box.socket), "display-message", "-p", "-t", f"={name}:0.0", fmt],
        capture_output=True, text=True, check=False,
    ).stdout.strip()


def fifo_is_full(fd: int) -> bool:
    """Less than a page of room left in a pipe: the next write of its writer
    (``cat`` copying a spewing pane) blocks, and tmux must buffer."""
    queued = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
    return bool(queued > fcntl.fcntl(fd, F_GETPIPE_SZ) - os.sysconf("SC_PAGE_SIZE"))


def pipe_writer_blocked(box: Box) -> bool:
    """The pipe-pane copier (``cat``, a child of the tmux server) sleeps in
    the kernel's pipe write: the fifo has no room for what it holds. Small
    writes can fill a pipe with less than its byte size queued, so the byte
    count alone does not say so; where the kernel hides ``wchan`` (it reads
    "0"), the count is the fallback."""
    server = int(subprocess.run(
        ["tmux", "-S", str(box.socket), "display-message", "-p", "#{pid}"],
        capture_output=True, text=True, check=True,
    ).stdout.strip())
    for pid in descendants(server):
        try:
            if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"cat\0"):
                continue
            if Path(f"/proc/{pid}/wchan").read_text().endswith("pipe_write"):
                return True
        except OSError:
            continue
    return False


def test_agent_killed_while_its_output_is_stuck_is_dead_at_once(box: Box) -> None:
    # issue 14: with the pipe-pane fifo full, tmux 3.3a kept pane_dead at 0
    # for minutes after the agent was killed; alive() trusted only pane_dead.
    term = box.probe("spew")
    fifo = box.dir / "out.fifo"
    os.mkfifo(fifo)
    reader_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # opened, never read
    try:
        term.pipe_output(fifo)
        wait_for(lambda: pipe_writer_blocked(box) or fifo_is_full(reader_fd),
                 what="pipe-pane fifo full, its writer blocked")
        pid = term.agent_pid()
        assert pid is not None and term.alive()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not alive(pid), what="the agent gone (zombie or reaped)")
        # no waiting for tmux: the first look after the process is gone says so
        assert not term.alive()
        assert term.exit_code() == 137
        assert_refuses_input(term)
        assert pane_format(box, "#{pane_pid}") == str(pid), "the tmux server went down"
    finally:
        os.close(reader_fd)


def assert_refuses_input(term: TmuxTerminal) -> None:
    """A paste, a named key and typed text: each refused with AgentExited."""
    with pytest.raises(AgentExited):
        term.paste("into a dying pane\nsecond line")
    with pytest.raises(AgentExited):
        term.send_key("Enter")
    with pytest.raises(AgentExited):
        term.send_text("typed")


def dead_pane_next_to_a_live_one(box: Box) -> tuple[TmuxTerminal, TmuxTerminal]:
    """A session whose agent exited (remain-on-exit keeps the dead pane) on
    the same server as a live one, which a server crash would take down."""
    other = box.probe("sleep", name="other")
    term = box.probe("exit", "0")
    wait_for(lambda: pane_format(box, "#{pane_dead}") == "1", what="dead pane")
    return term, other


def test_no_input_goes_into_a_dead_pane(box: Box) -> None:
    # tmux 3.3a segfaults on paste-buffer (and named keys) into a dead pane
    term, other = dead_pane_next_to_a_live_one(box)
    assert_refuses_input(term)
    assert other.alive() and term.exit_code() == 0
    assert term.exiting() and not other.exiting()


def test_the_pane_is_checked_again_inside_the_server(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pane may die between the check and the paste: tmux itself tests
    # pane_dead right before it pastes (if-shell -F), with no gap in between.
    term, other = dead_pane_next_to_a_live_one(box)
    monkeypatch.setattr(term, "alive", lambda: True)  # as if it died just after the check
    assert_refuses_input(term)
    assert other.alive()
    buffers = subprocess.run(
        ["tmux", "-S", str(box.socket), "list-buffers"], capture_output=True, text=True,
        check=False,
    )
    assert buffers.stdout == "", "an unpasted buffer was left behind"


# --- what a person attached sees ------------------------------------------------------------


def test_the_state_is_shown_in_the_status_line(box: Box) -> None:
    term = box.probe("sleep", cols=80, rows=20)
    term.set_status("agentwrap: ready")
    assert "agentwrap: ready" in pane_format(box, "#{T:status-right}")
    client = pexpect.spawn(
        "tmux", ["-S", str(box.socket), "attach-session", "-t", "=t"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color",
             "LANG": "C.UTF-8"},
        dimensions=(20, 80), timeout=30,
    )
    try:
        client.expect_exact("agentwrap: ready")
        term.set_status("agentwrap: busy")  # redrawn for the attached client
        client.expect_exact("agentwrap: busy")
    finally:
        client.close()


def test_focus_events_are_passed_to_the_agent(box: Box) -> None:
    box.probe("sleep")
    out = subprocess.run(
        ["tmux", "-S", str(box.socket), "show-options", "-s", "-v", "focus-events"],
        capture_output=True, text=True, check=False,
    )
    assert out.stdout.strip() == "on"


def test_standin_redraws_at_the_new_size(box: Box) -> None:
    # A person's client attaching at another size resizes the pane; a real
    # TUI redraws for the new width, and so must the stand-in.
    rlog = box.dir / "standin.jsonl"
    term = box.launch([sys.executable, str(STANDIN), "--log", str(rlog), "--startup", "0"],
                      cols=160, rows=45)
    wait_for(lambda: "─" * 160 in term.snapshot().text(), what="rules at 160 columns")
    term.resize(100, 30)

    def redrawn() -> bool:
        lines = term.snapshot().text().split("\n")
        rules = [x.rstrip() for x in lines if x.startswith("─")]
        return rules == ["─" * 100] * 2 and lines[-1].strip() == "? for shortcuts"

    wait_for(redrawn, what="rules at 100 columns")
