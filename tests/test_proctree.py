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
