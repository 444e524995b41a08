"""Process-tree helpers: stopping an agent means stopping everything it spawned.

Claude Code and Gemini live on for 1-2 s after their tmux session is killed,
and Codex can leave an app-server daemon behind, so closing a session walks
``/proc`` for descendants instead of trusting one kill.

A daemon that detaches (a new session, re-parented to init: Cline's
``cline --cline-hub-daemon``) escapes that walk, but not its environment:
every process the agent starts inherits the marker ``agentwrap run`` puts in
the agent's (``AGENTWRAP_SESSION`` with ``AGENTWRAP_STATE_DIR``), so
:func:`marked` finds them by it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def _stat_fields(path: Path) -> list[str]:
    """The fields of a ``/proc/PID/stat`` after the command name (state
    first), or none. A process exiting while it is read can give an error or
    an empty file: both mean it is gone."""
    try:
        stat = path.read_text()
    except OSError:
        return []
    # the command name may contain spaces and parens: split after the last ')'
    return stat[stat.rfind(")") + 2 :].split() if ")" in stat else []


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry / "stat")
        if len(fields) < 2:
            continue  # gone while we looked
        kids.setdefault(int(fields[1]), []).append(int(entry.name))
    return kids


def descendants(pid: int) -> list[int]:
    kids = _children_map()
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in kids.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    return bool(fields) and fields[0] != "Z"


def zombie_status(pid: int) -> int | None:
    """The exit status of ``pid`` if it has exited but nobody reaped it yet
    (a zombie), as a shell reports it: the code, or 128+N for signal N.

    The kernel keeps a zombie's wait status in ``/proc/PID/stat`` (field 52,
    Linux 3.5+), so an agent's end is known before its parent (tmux) gets
    round to reaping it; None for a live or vanished process.
    """
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    if len(fields) < 50 or fields[0] != "Z" or not fields[49].isdigit():
        return None
    status = int(fields[49])
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def start_time(pid: int) -> str | None:
    """Kernel start time of a process (clock ticks since boot): with the pid
    it identifies a process for good, so a reused pid is never mistaken for a
    live supervisor."""
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    return fields[19] if len(fields) > 19 else None


def started_at(pid: int | None = None) -> float | None:
    """When process ``pid`` (None: this one) was started, in epoch seconds, to
    the kernel's clock tick (10 ms); None when it is gone. An agent starts a
    hook process at its event: that time orders two hooks whose processes ran
    in another order (one in the background, a loaded machine)."""
    fields = _stat_fields(Path(f"/proc/{'self' if pid is None else pid}/stat"))
    if len(fields) <= 19 or not fields[19].isdigit():
        return None
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return time.time() - max(0.0, age)


def _environ(pid: str) -> dict[bytes, bytes]:
    """The environment a process started with (only our own processes' are
    readable); empty when it is gone or not ours."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)


def _ancestors(pid: int) -> set[int]:
    out = {pid}
    while pid > 1:
        fields = _stat_fields(Path(f"/proc/{pid}/stat"))
        if len(fields) < 2:
            break
        pid = int(fields[1])
        out.add(pid)
    return out


def marked(marker: dict[str, str]) -> list[int]:
    """Live processes whose environment holds every ``marker`` pair: all that
    one launch started, detached daemons too. The caller and its ancestors are
    left out (``agentwrap stop`` run from inside the session)."""
    want = {k.encode(): v.encode() for k, v in marker.items()}
    mine = _ancestors(os.getpid())
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        env = _environ(entry.name)
        if env and all(env.get(k) == v for k, v in want.items()) and alive(int(entry.name)):
            out.append(int(entry.name))
    return out


def kill_pids(pids: list[int], sig: int = signal.SIGTERM, grace: float = 2.0) -> None:
    """Signal every pid, wait up to ``grace`` for them to go, then SIGKILL the rest."""
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    for p in pids:
        if alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def kill_tree(pid: int, sig: int = signal.SIGTERM, grace: float = 2.0) -> None:
    """Stop ``pid`` and everything below it."""
    kill_pids([pid, *descendants(pid)], sig, grace)
