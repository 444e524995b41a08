"""The native relay helper (agentwrap/terminal/_native/relay.c) on its own: a real
pty whose slave side plays the agent, the helper copying between the master,
a pipe standing in for the person's terminal, and the three pipes to the
supervisor. The pty backend tests drive it through PtyTerminal as well."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import threading
import time
import tty
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.waiting import wait_for

from agentwrap.errors import BackendError, RelayHelperMissing
from agentwrap.terminal import relay_helper
from agentwrap.terminal.relay_helper import (
    HelperEvents,
    HelperProcess,
    choose_helper,
    helper_status,
)


@pytest.fixture(scope="module")
def binary() -> Path:
    path, why = helper_status()
    assert path is not None, f"the native relay is not built: {why} (pip install -e . with gcc)"
    return path


class Sink(threading.Thread):
    """Drains a pipe (the person's terminal) into memory."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.data = bytearray()
        self.start()

    def run(self) -> None:
        while chunk := os.read(self.fd, 1 << 16):
            self.data += chunk


@dataclass
class Rig:
    helper: HelperProcess
    slave: int  # the agent's side of the pty
    person: Sink | None  # what reached the person's terminal
    keys_w: int | None = None  # the person's keyboard
    events: HelperEvents = field(default_factory=HelperEvents)

    def collect(self) -> HelperEvents:
        got = self.helper.read_events()
        e = self.events
        e.typed |= got.typed
        e.done += got.done
        e.gaps += got.gaps
        e.closed |= got.closed
        if got.bracketed is not None:
            e.bracketed = got.bracketed
        return e

    def agent_exits(self) -> int:
        os.close(self.slave)
        return self.helper.proc.wait(timeout=30)


@pytest.fixture
def rigs() -> Iterator[list[Rig]]:
    made: list[Rig] = []
    yield made
    for r in made:
        if r.helper.proc.poll() is None:
            r.helper.proc.kill()
        r.helper.close()


def make_rig(rigs: list[Rig], binary: Path, *, person: bool = True, keys: bool = False) -> Rig:
    master, slave = os.openpty()
    tty.setraw(slave)  # bytes pass unchanged (no ONLCR, no echo)
    out_r = out_w = keys_r = keys_w = None
    if person:
        out_r, out_w = os.pipe()
    if keys:
        keys_r, keys_w = os.pipe()
    helper = HelperProcess(binary, master, keys_r, out_w)
    for fd in (master, out_w, keys_r):
        if fd is not None:
            os.close(fd)  # the helper holds its own copies
    rig = Rig(helper, slave, Sink(out_r) if out_r is not None else None, keys_w)
    rigs.append(rig)
    return rig


def test_the_person_gets_every_byte_when_the_detectors_copy_overflows(
    rigs: list[Rig], binary: Path
) -> None:
    rig = make_rig(rigs, binary)
    data = random.Random(5).randbytes(4 * 1024 * 1024)
    view = memoryview(data)
    while view:  # nobody reads the tee meanwhile: it fills and the helper drops
        view = view[os.write(rig.slave, view[: 1 << 16]):]
    tee = bytearray()

    def drain_tee() -> None:  # the supervisor catches up as the agent exits
        while (chunk := rig.helper.read_output()) is not None:
            tee.extend(chunk)
            time.sleep(0.001)

    drain = threading.Thread(target=drain_tee, daemon=True)
    drain.start()
    assert rig.agent_exits() == 0
    drain.join(timeout=30)
    rig.person.join(timeout=30)  # type: ignore[union-attr]
    assert hashlib.sha256(rig.person.data).digest() == hashlib.sha256(data).digest()  # type: ignore[union-attr]
    events = rig.collect()
    assert events.closed
    assert events.gaps, "a full tee must be reported as a gap"
    assert 0 < len(tee) < len(data)
    assert tee[: events.gaps[0]] == data[: events.gaps[0]]  # bytes before the gap are exact
    pieces = list(rig.helper.split_at_gaps(bytes(tee)))
    assert None in pieces
    assert b"".join(p for p in pieces if p is not None) == tee
    last = pieces[-1]
    assert last and data.endswith(last)  # the final screen reached the supervisor


def test_split_at_gaps_cuts_at_the_reported_offsets(rigs: list[Rig], binary: Path) -> None:
    helper = make_rig(rigs, binary, person=False).helper
    helper._gaps.extend([0, 3, 3, 10, 14])
    assert list(helper.split_at_gaps(b"abcdef")) == [None, b"abc", None, None, b"def"]
    assert list(helper.split_at_gaps(b"ghijkl")) == [b"ghij", None, b"kl"]
    assert list(helper.split_at_gaps(b"mn")) == [b"mn", None]  # a gap right at the end
    assert list(helper.split_at_gaps(b"op")) == [b"op"]


def test_bracketed_paste_mode_is_tracked_across_reads(rigs: list[Rig], binary: Path) -> None:
    rig = make_rig(rigs, binary)
    os.write(rig.slave, b"hello \x1b[?20")  # split mid-sequence: two reads
    wait_for(lambda: rig.person is not None and rig.person.data.endswith(b"\x1b[?20"), what="half")
    os.write(rig.slave, b"04h world")
    wait_for(lambda: rig.collect().bracketed is True, what="bracketed on")
    os.write(rig.slave, b"\x1b[?2004l")
    wait_for(lambda: rig.collect().bracketed is False, what="bracketed off")
    rig.agent_exits()


class AgentReader(threading.Thread):
    """The agent reading its input: ``expect`` bytes, then it closes its fd."""

    def __init__(self, fd: int, expect: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.expect = expect
        self.data = bytearray()
        self.start()

    def run(self) -> None:
        try:
            while len(self.data) < self.expect and (chunk := os.read(self.fd, 1 << 16)):
                self.data += chunk
        finally:
            os.close(self.fd)


def test_injections_and_keys_reach_the_agent_in_order_and_are_confirmed(
    rigs: list[Rig], binary: Path
) -> None:
    rig = make_rig(rigs, binary, keys=True)
    big = b"x" * 200_000  # far more than the pty buffers: written in pieces
    total = len(b"first;" + big + b"typed;last")
    agent = AgentReader(os.dup(rig.slave), total)
    registered: list[int] = []
    rig.helper.inject(b"first;", registered.append)
    rig.helper.inject(big, registered.append)
    assert rig.keys_w is not None
    os.write(rig.keys_w, b"typed;")
    wait_for(lambda: rig.collect().typed, what="typing reported")
    rig.helper.inject(b"last", registered.append)
    wait_for(lambda: len(rig.collect().done) == 3, what="three confirmations")
    assert rig.events.done == registered == [1, 2, 3]
    # The helper takes keys and frames in the order they reach it; what it
    # guarantees is that nothing lands inside a block and blocks keep order.
    wait_for(lambda: len(agent.data) >= total, what="all bytes at the agent")
    got = bytes(agent.data)
    assert len(got) == total and got.count(b"typed;") == 1 and big in got
    assert got.replace(b"typed;", b"") == b"first;" + big + b"last"
    rig.agent_exits()


def test_the_relay_outlives_its_supervisor(rigs: list[Rig], binary: Path) -> None:
    """If the supervisor dies, the person keeps their agent until it exits."""
    rig = make_rig(rigs, binary)
    os.write(rig.slave, b"before ")
    wait_for(lambda: rig.person is not None and b"before" in rig.person.data, what="before")
    for fd in (rig.helper.tee_fd, rig.helper.events_fd, rig.helper._ctl_fd):
        os.close(fd)
    rig.helper.tee_fd = rig.helper.events_fd = rig.helper._ctl_fd = -1
    for i in range(50):  # enough to fill the tee several times over
        os.write(rig.slave, b"after %03d " % i + b"." * 60_000)
    os.write(rig.slave, b"THE END")
    wait_for(lambda: rig.person is not None and rig.person.data.endswith(b"THE END"), what="end")
    os.close(rig.slave)
    assert rig.helper.proc.wait(timeout=10) == 0


def test_a_stale_or_misused_binary_refuses_to_run(binary: Path) -> None:
    res = subprocess.run([str(binary), "0", "3", "4", "5", "6", "-1", "-1"],
                         capture_output=True, text=True, timeout=10, check=False)
    assert res.returncode == 64
    assert f"protocol {relay_helper.PROTOCOL} expected" in res.stderr
    res = subprocess.run([str(binary), relay_helper.PROTOCOL, "x", "4", "5", "6", "-1", "-1"],
                         capture_output=True, text=True, timeout=10, check=False)
    assert res.returncode == 64 and "bad file descriptor" in res.stderr


def test_relay_choice(binary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_helper("auto") == binary
    assert choose_helper("native") == binary
    assert choose_helper("python") is None
    with pytest.raises(BackendError, match="unknown relay"):
        choose_helper("fast")
    monkeypatch.setattr(relay_helper, "BINARY", tmp_path / "agentwrap-relay")
    assert choose_helper("auto") is None  # not built: fall back quietly
    with pytest.raises(RelayHelperMissing) as exc:
        choose_helper("native")
    assert "gcc" in exc.value.hint
    stale = tmp_path / "agentwrap-relay"
    stale.write_text("#!/bin/sh\necho 'protocol 0 expected' >&2\nexit 64\n")
    stale.chmod(0o755)
    path, why = helper_status()
    assert path is None and "stale" in why
    assert choose_helper("auto") is None
    stale.write_bytes(b"\x7fELF garbage for another machine")  # exec format error
    path, why = helper_status()
    assert path is None and "does not run here" in why
