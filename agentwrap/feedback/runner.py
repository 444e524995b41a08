"""Running a feedback command: no shell, a timeout, an output cap, one at a time.

A command is an argv list (``{files}`` already expanded to one item per file),
started in the project dir with stdin closed and in a process group of its
own, so a timeout kills whatever it started too. Output (stdout and stderr
together, in order) is kept up to ``max_output`` bytes; the rest is read and
dropped so the command never blocks on a full pipe.

One source never runs twice at once: across processes (a hook and the
session's watcher may both want ruff) an ``flock`` on a per-project,
per-source lock file; inside the watcher, :class:`SourceWorker` keeps at most
one run queued behind the running one, and a newer burst replaces (and
widens) the queued run instead of adding another.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import Paths, private_dir
from .sources import FeedbackSource


@dataclass(frozen=True)
class RunResult:
    source: str
    argv: tuple[str, ...]
    exit_code: int | None  # None: it could not start, or timed out
    output: str
    timed_out: bool = False
    truncated: bool = False  # more output than max_output
    duration_s: float = 0.0
    error: str = ""  # why it did not start

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def run_command(
    argv: list[str], cwd: Path, *, timeout_s: float, max_output: int, source: str = "",
) -> RunResult:
    """Run ``argv`` in ``cwd`` and wait at most ``timeout_s``."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
        )
    except OSError as exc:
        return RunResult(source, tuple(argv), None, "", error=f"cannot run {argv[0]!r}: "
                         f"{exc.strerror or exc}")
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    kept = bytearray()
    truncated = timed_out = False
    deadline = start + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            room = max_output - len(kept)
            if room > 0:
                kept += chunk[:room]
            if len(chunk) > room:
                truncated = True
    finally:
        if timed_out:
            _kill_group(proc)
        proc.stdout.close()
        try:
            code: int | None = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            proc.wait()
            code = None
    text = kept.decode("utf-8", "replace")
    return RunResult(source, tuple(argv), None if timed_out else code, text, timed_out,
                     truncated, time.monotonic() - start)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def lock_path(paths: Paths, cwd: Path, source: str) -> Path:
    """The lock file of one source in one project (runtime dir, private)."""
    key = hashlib.sha256(str(cwd.resolve()).encode()).hexdigest()[:16]
    return private_dir(paths.runtime_dir / "feedback", repair=True) / f"{key}-{source}.lock"


def run_source(
    src: FeedbackSource, files: list[str], cwd: Path, lock: Path | None,
) -> RunResult:
    """One run of ``src`` on ``files``, holding its lock (waiting for another
    process's run of it at most the run's own timeout)."""
    argv = src.command(files)
    if lock is None:
        return run_command(argv, cwd, timeout_s=src.timeout_s, max_output=src.max_output,
                           source=src.name)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + src.timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return RunResult(src.name, tuple(argv), None, "", error="another run of it"
                                     " did not finish in time")
                time.sleep(0.05)
        return run_command(argv, cwd, timeout_s=src.timeout_s, max_output=src.max_output,
                           source=src.name)
    finally:
        os.close(fd)


@dataclass
class Job:
    files: list[str]
    trigger: str
    queued_at: float = field(default_factory=time.monotonic)


class SourceWorker:
    """Runs one source's (or one burst runner's) jobs on a thread of its own,
    one at a time; a job submitted while another waits replaces it, its files
    added to the newer job's."""

    def __init__(self, name: str, run: Callable[[Job], None]) -> None:
        self.name = name
        self._run = run
        self._cond = threading.Condition()
        self._queued: Job | None = None
        self._busy = False
        self._stopped = False
        self.superseded = 0  # jobs replaced by a newer one before they ran
        self.runs = 0
        self._thread = threading.Thread(target=self._loop, name=f"feedback:{name}",
                                        daemon=True)
        self._thread.start()

    def submit(self, files: list[str], trigger: str) -> None:
        with self._cond:
            if self._queued is not None:
                self.superseded += 1
                files = self._queued.files + files
            self._queued = Job(list(dict.fromkeys(files)), trigger)
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing runs or waits (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queued is not None or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._queued is None and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                job, self._queued = self._queued, None
                self._busy = True
            try:
                if job is not None:
                    self._run(job)
            except Exception:
                import logging

                logging.getLogger("agentwrap.feedback").exception("feedback run failed")
            finally:
                with self._cond:
                    self._busy = False
                    self.runs += 1
                    self._cond.notify_all()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout)
