"""``hand_to_host`` (sessions/lifecycle.py): a session handed to the supervisor
host waits for a host that is still starting, however long its start takes
at load, and not for one that died. The stand-in host here is a real process
that claims the session in the registry (what the host's adoption records)
only once the short ``wait_s`` is over: on 6b594c1..c39d4d3 the hand-over
gave up after ``wait_s`` while the host it had started was still coming up
(``run --detach`` failed "did not take" at a load of 15 on 2 cores)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from conftest import AwEnv

from agentwrap.errors import SessionNotRunning
from agentwrap.sessions import lifecycle
from agentwrap.sessions.registry import SessionRecord

WAIT_S = 0.3

#: A host that starts slowly: it claims the session once WAIT_S is over (the
#: monotonic clock is system-wide), then serves on till it is ended.
SLOW_HOST = """
import sys, time
from pathlib import Path
from agentwrap.sessions.registry import Registry
until = float(sys.argv[3])
while time.monotonic() < until:
    time.sleep(0.02)
Registry(Path(sys.argv[1])).claim_supervisor(sys.argv[2])
time.sleep(600)
"""


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The stand-in hosts ``spawn_host`` started (ended after the test)."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def register(aw: AwEnv, name: str) -> None:
    reg = aw.registry()
    reg.register(SessionRecord(name=name, profile="standin", backend="tmux", command=["x"],
                               cwd=str(aw.project), started=time.time()))
    reg.close()


def test_a_host_still_starting_past_the_wait_is_waited_for(
        aw_no_tmux: AwEnv, spawned: list[subprocess.Popen[bytes]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    register(aw_no_tmux, "s")
    until = time.monotonic() + 3 * WAIT_S

    def slow_host(paths: object) -> subprocess.Popen[bytes]:
        p = subprocess.Popen([sys.executable, "-c", SLOW_HOST, str(aw_no_tmux.paths.db_path), "s",
                              repr(until)], start_new_session=True)
        spawned.append(p)
        return p

    monkeypatch.setattr(lifecycle, "spawn_host", slow_host)
    reg = aw_no_tmux.registry()
    try:
        pid = lifecycle.hand_to_host(aw_no_tmux.paths, "s", reg, wait_s=WAIT_S)
    finally:
        reg.close()
    assert time.monotonic() >= until  # it did come after the short wait was over
    assert pid == spawned[0].pid


def test_a_host_that_died_is_not_waited_for(
        aw_no_tmux: AwEnv, spawned: list[subprocess.Popen[bytes]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    register(aw_no_tmux, "s")

    def dead_host(paths: object) -> subprocess.Popen[bytes]:
        p = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
        spawned.append(p)
        return p

    monkeypatch.setattr(lifecycle, "spawn_host", dead_host)
    reg = aw_no_tmux.registry()
    try:
        with pytest.raises(SessionNotRunning, match="did not take 's'"):
            # start_s as long as the pytest-timeout: only the host's death ends the wait
            lifecycle.hand_to_host(aw_no_tmux.paths, "s", reg, wait_s=WAIT_S, start_s=3600)
    finally:
        reg.close()
