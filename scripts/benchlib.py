"""Helpers shared by the benchmark scripts (scripts/bench_*.py).

Besides formatting: percentiles, polling, the stamp files the benchmark agents
write (one line per read() of their stdin), an isolated agentwrap environment
and the teardown of everything agentwrap started in it (one tmux server per
session, each with its socket in the runtime dir's ``tmux/`` folder, plus
supervisors and agents), which must run even after Ctrl-C or an error.
``--against COMMIT`` (another commit measured in the same run) is
bench_against.py's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Set by ``--against`` (bench_against.py) in each run's environment: the tree under test.
TREE_ENV = "AGENTWRAP_BENCH_TREE"
#: The agentwrap tree a benchmark measures (its agentwrap, native helpers and
#: test harness): this checkout, or the tree ``--against`` runs it on.
UNDER_TEST = Path(os.environ.get(TREE_ENV) or ROOT).resolve()


class Interrupted(Exception):
    """SIGTERM/SIGHUP: unwind through the teardown like Ctrl-C does."""


def raise_interrupted(signum: int, frame: FrameType | None) -> None:
    """The signal handler a benchmark installs for SIGTERM/SIGHUP."""
    raise Interrupted(signal.Signals(signum).name)


def step(res: dict[str, Any], key: str, fn: Callable[[], Any]) -> None:
    """``res[key] = fn()``; an error is reported in ``res["errors"]`` and the
    other steps go on, an interruption unwinds."""
    try:
        res[key] = fn()
    except (Exception, Interrupted) as exc:  # reported; the other steps go on
        res["errors"].append(f"{key}: {type(exc).__name__}: {exc}")
        if isinstance(exc, Interrupted):
            raise


def import_path(name: str, path: Path) -> ModuleType:
    """Import a file that is not on the path (the e2e harness's agents.py and
    model server) as module ``name``, so scripts reuse the tests' own code."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def json_safe(x: Any) -> Any:
    """NaN (no data) -> null: strict JSON has no NaN."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def write_json(path: str | Path, data: Any) -> None:
    """A benchmark's figures as a strict JSON file (``--json FILE``)."""
    Path(path).write_text(json.dumps(json_safe(data), indent=2) + "\n", encoding="utf-8")


def fmt(x: object, spec: str = ".2f") -> str:
    """A table cell: '-' for missing or NaN."""
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    return format(x, spec)


# --- statistics and polling --------------------------------------------------------------------


def pct(xs: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


def stats_ms(xs: list[float]) -> dict[str, float]:
    """Seconds in, milliseconds out: n, p50, p99, min, max."""
    ms = [x * 1000 for x in xs]
    return {
        "n": len(ms), "p50_ms": statistics.median(ms) if ms else float("nan"),
        "p99_ms": pct(ms, 99), "min_ms": min(ms) if ms else float("nan"),
        "max_ms": max(ms) if ms else float("nan"),
    }


def wait_until(cond: Callable[[], Any], timeout: float, what: str, poll: float = 0.005) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


class Poller:
    """A tmux pane (bench_answer, bench_tap): the pane, every ``interval`` s, in a thread: the first time a pattern shows
    (or stops showing) after a given moment."""

    def __init__(self, socket: str, target: str, interval: float) -> None:
        self.cmd = ["tmux", "-S", socket, "capture-pane", "-p", "-t", target]
        self.interval = interval
        self.frames: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            t = time.time()
            res = subprocess.run(self.cmd, capture_output=True, text=True, check=False)
            with self.lock:
                self.frames.append((t, res.stdout))
                del self.frames[:-400]
            self.stop.wait(self.interval)

    def first(self, after: float, pattern: re.Pattern[str], present: bool = True) -> float | None:
        with self.lock:
            frames = list(self.frames)
        return next((t for t, text in frames
                     if t >= after and bool(pattern.search(text.rstrip())) == present), None)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)


class Stamps:
    """A stamp file: ``ready T`` once, then ``T NBYTES`` per read() of the agent's
    stdin, T from ``time.monotonic()`` (CLOCK_MONOTONIC is system-wide on Linux,
    so the agent's stamps compare with the benchmark's)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.reads: list[tuple[float, int]] = []
        self.ready = False

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].decode().splitlines():
            if line.startswith("ready"):
                self.ready = True
                continue
            t, n = line.split()
            self.reads.append((float(t), int(n)))

    def first_after(self, t0: float) -> float | None:
        self.poll()
        return next((t for t, _ in self.reads if t >= t0), None)

    def bytes_after(self, t0: float) -> int:
        return sum(n for t, n in self.reads if t >= t0)


# --- an isolated agentwrap -----------------------------------------------------------------------


def isolated_env(work: Path, aw_root: Path) -> dict[str, str]:
    """This process's environment with HOME and the XDG dirs under ``work``
    (keep ``work`` short: tmux sockets live in it) and ``aw_root`` first on
    PYTHONPATH. Creates ``work/h``."""
    env = dict(os.environ)
    env.update(
        HOME=str(work / "h"), XDG_CONFIG_HOME=str(work / "c"), XDG_STATE_HOME=str(work / "s"),
        XDG_RUNTIME_DIR=str(work / "r"),
        PYTHONPATH=str(aw_root) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    for k in ("TMUX", "TMUX_PANE", "AGENTWRAP_SESSION", "COLUMNS", "LINES"):
        env.pop(k, None)
    (work / "h").mkdir(exist_ok=True)
    return env


# --- processes -----------------------------------------------------------------------------------


def tmux_sockets(runtime_dir: Path) -> list[Path]:
    """agentwrap's tmux server sockets under ``runtime_dir`` (``Paths.runtime_dir``):
    one per session in ``tmux/``, and the single shared ``tmux.sock`` of older versions."""
    tdir = runtime_dir / "tmux"
    found = sorted(tdir.glob("*.sock")) if tdir.is_dir() else []
    legacy = runtime_dir / "tmux.sock"
    return found + ([legacy] if legacy.exists() else [])


def tmux_server_pid(socket: Path, timeout: float = 5.0) -> int | None:
    try:
        proc = subprocess.run(["tmux", "-S", str(socket), "display-message", "-p", "#{pid}"],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.strip()
    return int(out) if proc.returncode == 0 and out.isdigit() else None


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def pid_mentions(pid: int, marker: str) -> bool:
    """Does the process's command line or environment mention ``marker`` (the
    benchmark's temp dir)? Guards every kill against a recycled pid."""
    m = marker.encode()
    for part in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as f:
                if m in f.read():
                    return True
        except OSError:
            continue
    return False


def _pids_mentioning(text: str) -> set[int]:
    """The pids whose command line mentions ``text``."""
    found: set[int] = set()
    needle = text.encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                if needle in f.read():
                    found.add(int(entry.name))
        except OSError:
            continue
    return found - {os.getpid()}


def kill_pid(pid: int, marker: str | None = None, sig: int = signal.SIGKILL) -> bool:
    """Signal ``pid`` if it is alive (and, with ``marker``, ours)."""
    if pid <= 1 or not pid_alive(pid) or (marker is not None and not pid_mentions(pid, marker)):
        return False
    try:
        os.kill(pid, sig)
        return True
    except OSError:
        return False


def kill_proc(proc: subprocess.Popen[bytes]) -> None:
    """A process this script started in a session of its own: TERM, then KILL, its group."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            pass
        try:
            proc.wait(timeout=2)
            return
        except subprocess.TimeoutExpired:
            continue


def teardown_agentwrap(env: Mapping[str, str], marker: str, extra_pids: Iterable[int] = ()) -> list[str]:
    """Kill everything agentwrap started in the isolated environment ``env``:
    every supervisor and agent pid the registry knows (and ``extra_pids``),
    then every tmux server with a socket in its runtime dir. Each kill is
    checked against ``marker`` (the temp dir) so a recycled pid is left alone.
    Returns what it had to kill, for a note."""
    from agentwrap.paths import Paths

    paths = Paths.from_env(env)
    pids = set(extra_pids)
    try:
        from agentwrap.sessions.registry import Registry

        if paths.db_path.exists():
            reg = Registry(paths.db_path)
            try:
                for rec in reg.list(include_ended=True):
                    pids.update(p for p in (rec.supervisor_pid, rec.agent_pid) if p)
            finally:
                reg.close()
    except Exception:  # noqa: BLE001 - cleanup goes on with what it has
        pass
    killed: list[str] = []
    sockets = tmux_sockets(paths.runtime_dir)
    servers = {s: tmux_server_pid(s) for s in sockets}
    for pid in sorted(pids - {p for p in servers.values() if p}):  # supervisors and agents first
        if kill_pid(pid, marker):
            killed.append(f"pid {pid}")
    # what a supervisor started beside its agent and lets outlive it (Codex's
    # app-server, listening in the runtime dir, stopped by `stop` or `adopt`)
    for pid in sorted(_pids_mentioning(str(paths.runtime_dir)) - pids):
        if kill_pid(pid, marker):
            killed.append(f"pid {pid} (runtime dir)")
    for socket, server in servers.items():
        try:
            subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True,
                           timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if server is not None:
            killed.append(f"tmux server {server} ({socket.name})")
            deadline = time.monotonic() + 2
            while pid_alive(server) and time.monotonic() < deadline:
                time.sleep(0.02)
            kill_pid(server, marker)
    return killed
