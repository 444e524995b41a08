"""The pty backend: PtyTerminal's relay run headless in a thread, and
``agentwrap run --backend pty`` driven through a real outer pty (pexpect),
so its stdin is a terminal exactly as when a person runs it.

Every headless test and the CLI tests that carry bytes run twice: with the
native relay (the C helper) and with the Python relay it falls back to.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pexpect
import pytest
from conftest import STANDIN, AwEnv
from support.waiting import wait_for

from agentwrap.errors import BackendError
from agentwrap.terminal.base import PASTE_END, PASTE_START
from agentwrap.terminal.proctree import alive, descendants
from agentwrap.terminal.pty import PtyTerminal

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "support" / "term_probe.py"
START_MARK = b"<<FLOOD-START-7f3a>>"
END_MARK = b"<<FLOOD-END-7f3a>>"



def probe(*args: str) -> list[str]:
    return [sys.executable, str(PROBE), *args]


# --- PtyTerminal with a headless relay --------------------------------------------------


@dataclass
class Relay:
    term: PtyTerminal
    thread: threading.Thread
    codes: list[int] = field(default_factory=list)

    def join(self) -> int:
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "relay did not end"
        return self.codes[0]

    def screen_has(self, needle: str) -> bool:
        return needle in self.term.snapshot().text()


@pytest.fixture
def tmp() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="awtp-", dir="/tmp"))
    yield d
    for f in d.iterdir():
        f.unlink()
    d.rmdir()


RELAYS = ("native", "python")


class Relays(list[Relay]):
    """The relays a test started, all of one kind (native or python)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind


@pytest.fixture(params=RELAYS)
def relays(request: pytest.FixtureRequest) -> Iterator[Relays]:
    started = Relays(request.param)
    yield started
    for r in started:
        r.term.close()
        r.thread.join(timeout=10)


def start_relay(
    relays: Relays, argv: list[str], cwd: Path, stdin_fd: int | None = None, **kw: int
) -> Relay:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "TERM": "xterm"}
    term = PtyTerminal(argv, env=env, cwd=cwd, relay=relays.kind, **kw)
    assert term.relay_kind == relays.kind
    relay = Relay(term, threading.Thread(target=lambda: None))
    relay.thread = threading.Thread(
        target=lambda: relay.codes.append(term.relay(stdin_fd, None)), daemon=True
    )
    relay.thread.start()
    relays.append(relay)
    wait_for(lambda: term._relaying or not relay.thread.is_alive(), what="relay running")
    return relay


def test_exit_code_passes_through(tmp: Path, relays: Relays) -> None:
    r = start_relay(relays, probe("exit", "7"), tmp)
    assert r.join() == 7
    assert r.term.exit_code() == 7
    assert not r.term.alive()


def test_signal_death_is_128_plus_n(tmp: Path, relays: Relays) -> None:
    r = start_relay(relays, probe("sleep"), tmp)
    wait_for(lambda: r.screen_has("SLEEPING"), what="sleeping")
    pid = r.term.agent_pid()
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    assert r.join() == 143


def test_send_after_exit_raises(tmp: Path, relays: Relays) -> None:
    r = start_relay(relays, probe("exit", "0"), tmp)
    r.join()
    with pytest.raises(BackendError):
        r.term.send_text("too late")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--bracketed"], PASTE_START + b"one\ntwo Enter\nthree" + PASTE_END),
        ([], b"one\rtwo Enter\rthree"),
        (["--bracketed", "--bracketed-off"], b"one\rtwo Enter\rthree"),
    ],
    ids=["enabled", "never-enabled", "enabled-then-disabled"],
)
def test_bracketed_markers_only_when_child_enabled_them(
    tmp: Path, relays: Relays, flags: list[str], expected: bytes
) -> None:
    log = tmp / "read.log"
    r = start_relay(relays, probe("read", str(log), *flags), tmp)
    wait_for(lambda: r.screen_has("READY"), what="probe ready")
    assert r.term.screen.bracketed_paste is (flags == ["--bracketed"])
    r.term.paste("one\ntwo Enter\nthree")
    got = wait_for(lambda: log.exists() and log.read_bytes() == expected, what=f"{expected!r}")
    assert got


def test_injected_text_never_interleaves_with_the_persons_keys(
    tmp: Path, relays: Relays
) -> None:
    log = tmp / "read.log"
    keys_r, keys_w = os.pipe()
    r = start_relay(relays, probe("read", str(log)), tmp, stdin_fd=keys_r)
    wait_for(lambda: r.screen_has("READY"), what="probe ready")
    person = [f"k{i:04d};".encode() for i in range(400)]
    blocks = [f"<I{t}-{j:02d}:{'x' * 3000}>" for t in range(3) for j in range(8)]

    def type_keys() -> None:
        for k in person:
            os.write(keys_w, k)
            if int(k[1:5]) % 50 == 0:
                time.sleep(0.001)

    def inject(t: int) -> None:
        for b in blocks[t * 8 : (t + 1) * 8]:
            r.term.send_text(b)

    threads = [threading.Thread(target=type_keys)]
    threads += [threading.Thread(target=inject, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    total = sum(map(len, person)) + sum(len(b) for b in blocks)
    wait_for(lambda: log.exists() and log.stat().st_size >= total, what="all input")
    got = log.read_text()
    assert len(got) == total
    found = re.findall(r"<I\d-\d\d:x{3000}>", got)
    assert sorted(found) == sorted(blocks)  # every block arrived whole
    assert re.sub(r"<I\d-\d\d:x{3000}>", "", got) == b"".join(person).decode()
    idle = r.term.user_idle_s()
    assert idle is not None and idle >= 0
    os.close(keys_w)
    os.close(keys_r)


def test_virtual_screen_recovers_after_a_flood(tmp: Path, relays: Relays) -> None:
    info = tmp / "flood.json"
    r = start_relay(
        relays, probe("flood", str(2_000_000), "3", str(info), "--then", *probe("sleep")),
        tmp, cols=80, rows=24,
    )
    # Nobody looks at the screen during the flood, so the backlog overflows.
    # Once the child has written it all, the relay has read all but what the
    # pty buffers hold (far less than the 2 MB).
    wait_for(info.exists, what="flood written")
    wait_for(lambda: r.screen_has("SLEEPING"), what="redraw")
    assert r.term.screen.resyncs >= 1
    snap = r.term.snapshot()
    assert (snap.cols, snap.rows) == (80, 24)
    assert "SLEEPING" in snap.text()
    assert snap.text().count("\n") == 23


# --- `agentwrap run --backend pty` through a real outer pty ----------------------------------


class Outer:
    """``agentwrap run --backend pty`` in a pexpect pty; a thread drains its
    output (into memory, or only into a hash for the big stream)."""

    def __init__(self, aw: AwEnv, argv: list[str], *, name: str, profile: str = "generic",
                 cols: int = 100, rows: int = 30, hash_only: bool = False,
                 relay: str = "auto") -> None:
        env = {**aw.env, "TERM": "xterm-256color"}
        (aw.project / ".agentwrap.toml").write_text(f'[run]\nrelay = "{relay}"\n')
        self.log = aw.paths.supervisor_log(name)
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "agentwrap", "run", "--backend", "pty", "--name", name, "--profile", profile,
             "--", *argv],
            env=env, cwd=str(aw.project), dimensions=(rows, cols), use_poll=True,
        )
        self.data = bytearray()
        self.hash_only = hash_only
        self.lock = threading.Lock()
        self.eof = threading.Event()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        fd = self.child.child_fd
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self.eof.set()
                return
            with self.lock:
                self.data += chunk

    def seen(self, needle: bytes) -> bool:
        with self.lock:
            return needle in self.data

    def wait_seen(self, needle: bytes, timeout: float = 30) -> None:
        wait_for(lambda: self.seen(needle), timeout, what=repr(needle))

    def type(self, data: bytes) -> None:
        os.write(self.child.child_fd, data)

    def exit_status(self, timeout: float = 60) -> int:
        wait_for(self.eof.is_set, timeout, what="agentwrap run to end")
        self.child.wait()
        if self.child.signalstatus is not None:
            return 128 + int(self.child.signalstatus)
        return int(self.child.exitstatus)

    def agent_pid(self) -> int:
        def agent() -> list[int]:  # the agent, not the native relay (also a child)
            return [p for p in descendants(self.child.pid) if b"agentwrap-relay" not in _cmdline(p)]

        return int(wait_for(agent, what="agent pid")[0])

    def relay_used(self) -> str:
        """The relay the run logged it uses."""
        line = wait_for(lambda: re.search(r"pty relay: (\w+)", self.log.read_text())
                        if self.log.exists() else None, what="relay logged")
        return str(line.group(1))

    def close(self) -> None:
        if self.child.isalive():
            self.child.close(force=True)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.fixture
def outers() -> Iterator[list[Outer]]:
    made: list[Outer] = []
    yield made
    for o in made:
        o.close()


@pytest.mark.parametrize("relay", RELAYS)
def test_cli_exit_code_passes_through(aw: AwEnv, outers: list[Outer], relay: str) -> None:
    o = Outer(aw, probe("exit", "7"), name="px", relay=relay)
    outers.append(o)
    assert o.relay_used() == relay
    assert o.exit_status() == 7
    o.wait_seen(b"BYE")
    rec = aw.registry().get("px")
    assert rec.liveness == "ended" and rec.exit_code == 7


def test_cli_signal_death_is_128_plus_n(aw: AwEnv, outers: list[Outer]) -> None:
    o = Outer(aw, probe("sleep"), name="ps")
    outers.append(o)
    o.wait_seen(b"SLEEPING")
    os.kill(o.agent_pid(), signal.SIGTERM)
    assert o.exit_status() == 143


@pytest.mark.parametrize("relay", RELAYS)
def test_cli_window_resize_reaches_the_child(aw: AwEnv, outers: list[Outer], relay: str) -> None:
    out = aw.root / "size.txt"
    o = Outer(aw, probe("size", str(out)), name="pw", cols=100, rows=30, relay=relay)
    outers.append(o)
    o.wait_seen(b"SIZE 100 30")
    o.child.setwinsize(33, 91)  # the kernel sends SIGWINCH to agentwrap
    o.wait_seen(b"SIZE 91 33")
    o.child.setwinsize(20, 70)
    o.wait_seen(b"SIZE 70 20")
    assert out.read_text().split("\n")[-2] == "SIZE 70 20"
    os.kill(o.agent_pid(), signal.SIGTERM)
    assert o.exit_status() == 143


@pytest.mark.parametrize("relay", RELAYS)
def test_cli_persons_keys_reach_the_child_raw(aw: AwEnv, outers: list[Outer], relay: str) -> None:
    log = aw.root / "keys.log"
    o = Outer(aw, probe("read", str(log)), name="pk", relay=relay)
    outers.append(o)
    o.wait_seen(b"READY")
    o.type(b"abc\x03\x1a\x1c\rdef")  # Ctrl-C/Z/\ are bytes for the agent, not signals
    wait_for(lambda: log.exists() and log.read_bytes() == b"abc\x03\x1a\x1c\rdef", what="keys")
    assert o.child.isalive()
    log.with_name("keys.log.stop").touch()
    assert o.exit_status() == 0


@pytest.mark.parametrize("relay", RELAYS)
def test_cli_50mb_stream_passes_through_intact(aw: AwEnv, outers: list[Outer], relay: str) -> None:
    info = aw.root / "flood.json"
    size = 50 * 1024 * 1024
    t0 = time.monotonic()
    o = Outer(aw, probe("flood", str(size), "42", str(info)), name="pf", relay=relay)
    outers.append(o)
    assert o.relay_used() == relay
    assert o.exit_status(timeout=240) == 0
    elapsed = time.monotonic() - t0
    data = bytes(o.data)
    start = data.index(START_MARK) + len(START_MARK)
    end = data.index(END_MARK, start)
    want = json.loads(info.read_text())
    assert end - start == want["bytes"] == size
    assert hashlib.sha256(data[start:end]).hexdigest() == want["sha256"]
    print(f"\n50 MB through the {relay} pty relay: {elapsed:.1f} s")


def test_cli_state_detection_recovers_after_a_flood(aw: AwEnv, outers: list[Outer]) -> None:
    info = aw.root / "flood.json"
    standin = [sys.executable, str(STANDIN), "--log", str(aw.log), "--startup", "0"]
    o = Outer(aw, probe("flood", str(4_000_000), "7", str(info), "--then", *standin),
              name="pr", profile="standin")
    outers.append(o)
    o.wait_seen(END_MARK, timeout=120)
    aw.wait_state("pr", "ready", timeout=60)
    res = aw.cli("send", "pr", "after the flood", "--wait", "--timeout", "60")
    assert res.returncode == 0, res.stderr
    got = aw.received()
    assert len(got) == 1 and "\nafter the flood" in got[0]
    o.type(b"\x04")  # Ctrl-D on an empty box: the stand-in exits
    assert o.exit_status() == 0
    rec = aw.registry().get("pr")
    assert rec.state == "exited" and rec.liveness == "ended"
    assert not alive(o.child.pid)


def test_a_dead_native_relay_hands_over_to_the_python_one(tmp: Path) -> None:
    """Killing agentwrap-relay must not strand the person: keys keep flowing."""
    log = tmp / "read.log"
    keys_r, keys_w = os.pipe()
    relays = Relays("native")
    try:
        r = start_relay(relays, probe("read", str(log)), tmp, stdin_fd=keys_r)
        wait_for(lambda: r.screen_has("READY"), what="probe ready")
        os.write(keys_w, b"before;")
        wait_for(lambda: log.exists() and log.read_bytes() == b"before;", what="keys via helper")
        helper = r.term._helper
        assert helper is not None
        helper.proc.kill()
        wait_for(lambda: r.term.relay_kind == "python", what="hand-over")
        os.write(keys_w, b"after;")
        r.term.send_text("injected")
        wait_for(lambda: log.read_bytes() == b"before;after;injected", what="keys via python")
        log.with_name("read.log.stop").touch()
        assert r.join() == 0
    finally:
        for rel in relays:
            rel.term.close()
        os.close(keys_w)
        os.close(keys_r)
