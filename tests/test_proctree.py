"""/proc helpers: an agent's end is known from the kernel, and processes
that vanish while /proc is read are simply gone (no crash)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from support.waiting import wait_for

from agentwrap.terminal.proctree import _stat_fields, alive, zombie_status


def _zombie(code: int | None = None, sig: int | None = None) -> int:
    """A child of this process that has ended and is not reaped yet."""
    pid = os.fork()
    if pid == 0:
        if sig is not None:
            os.kill(os.getpid(), sig)
        os._exit(code or 0)
    wait_for(lambda: not alive(pid), what="the child to become a zombie")
    return pid


def test_a_zombies_exit_status_is_read_before_it_is_reaped() -> None:
    for pid, want in ((_zombie(code=7), 7), (_zombie(sig=signal.SIGKILL), 137)):
        try:
            assert zombie_status(pid) == want
        finally:
            os.waitpid(pid, 0)
        assert zombie_status(pid) is None  # reaped: gone, nothing to read


def test_a_live_process_has_no_exit_status() -> None:
    assert zombie_status(os.getpid()) is None and alive(os.getpid())


def test_a_stat_file_read_as_the_process_vanishes_is_no_process(tmp_path: Path) -> None:
    empty = tmp_path / "stat"
    empty.write_text("")
    assert _stat_fields(empty) == []
    assert _stat_fields(tmp_path / "missing") == []


def test_a_detached_daemon_is_found_by_its_launch_marker() -> None:
    """A process in a session of its own, re-parented away from the agent's tree
    (Cline's hub daemon), still carries the launch's environment marker."""
    import subprocess
    import uuid

    from agentwrap.terminal.proctree import descendants, marked

    marker = {"AGENTWRAP_SESSION": f"t-{uuid.uuid4().hex[:8]}", "AGENTWRAP_STATE_DIR": "/nowhere"}
    env = {**os.environ, **marker}
    # sh starts a daemon in a new session and exits: the daemon leaves sh's tree
    sh = subprocess.Popen(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 < /dev/null &"], env=env)
    sh.wait()
    def settled() -> list[int] | None:
        """The marked processes once each leads its own session: setsid(1) forks when it
        starts as a group leader, and the marked process seen first may be that parent."""
        try:
            got = marked(marker)
            return got if got and all(os.getsid(p) == p for p in got) else None
        except ProcessLookupError:
            return None

    found = wait_for(settled, what="the detached daemon")
    try:
        assert len(found) == 1 and found[0] not in descendants(os.getpid())
        assert os.getsid(found[0]) == found[0]
        # another launch's marker (same session name, other state dir) is not it
        assert marked({**marker, "AGENTWRAP_STATE_DIR": "/elsewhere"}) == []
        assert os.getpid() not in marked({"PATH": os.environ["PATH"]})  # never the caller
    finally:
        for pid in found:
            os.kill(pid, signal.SIGKILL)
