"""Looking for secrets where a local user could read them (issue 35, item 4).

A command line is every local user's to read (``ps -eo args``) for as long as
the process lives, so a session's sentinel values must be in no process's
argv: not on the machine while it runs (:func:`argv_holding`, and
:class:`ArgvWatch` doing that over and over in the background), not in any
``execve`` of its whole tree (:func:`strace_argv`, :func:`trace_holding`),
and in no file it leaves (:func:`files_holding`). The agent must still get
them: :func:`environ_of` reads its environment. Used by ``tests/test_secrets.py``
(the stand-in agent) and ``tests/e2e/test_secrets_real.py`` (the real ones).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import threading
from pathlib import Path
from types import TracebackType

#: A sentinel token: found nowhere but where a test put it.
TOKEN = re.compile(r"s3ntinel[0-9a-f]{16}")


def token() -> str:
    return f"s3ntinel{secrets.token_hex(8)}"


def sentinels() -> dict[str, str]:
    """Variables an agent is started with, each holding a token found nowhere else."""
    return {"ANTHROPIC_AUTH_TOKEN": token(), "OPENAI_API_KEY": token(),
            "GEMINI_API_KEY": token(), "AW_ODD_SECRET": f"x {token()}; $(true) 'q' = y"}


def tokens(values: dict[str, str]) -> list[bytes]:
    """The sentinel token in each value (one each)."""
    return [m.encode() for v in values.values() for m in TOKEN.findall(v)]


def argv_holding(toks: list[bytes]) -> list[str]:
    """Every process on the machine whose command line holds a token."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if any(t in cmdline for t in toks):
            words = cmdline.replace(b"\0", b" ")[:300]
            found.append(f"{entry.name}: {words!r}")
    return found


class ArgvWatch:
    """:func:`argv_holding` again and again in a thread while the block runs
    (a process that lives a moment, a hook's, is caught by the trace; this
    sees every process on the machine, traced or not): ``found`` is every
    command line that held a token, ``scans`` how many passes were made."""

    def __init__(self, toks: list[bytes], interval: float = 0.05) -> None:
        self.toks = toks
        self.interval = interval
        self.found: list[str] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for hit in argv_holding(self.toks):
                if hit not in self.found:
                    self.found.append(hit)
            self.scans += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> ArgvWatch:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def files_holding(root: Path, toks: list[bytes]) -> list[str]:
    """Every regular file under ``root`` that holds a token."""
    found = []
    for path in root.rglob("*"):
        try:
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if any(t in data for t in toks):
            found.append(str(path))
    return found


def environ_of(pid: int) -> dict[bytes, bytes]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(r.partition(b"=")[::2] for r in raw.split(b"\0") if r)


def strace_argv() -> list[str] | None:
    """``strace`` following every fork and logging each execve's argv whole
    (the environment only as a count: it rightly holds the values)."""
    exe = shutil.which("strace")
    if exe is None:
        return None
    probe = subprocess.run([exe, "-f", "-qq", "--seccomp-bpf", "-e", "trace=execve", "-o",
                            os.devnull, "true"], capture_output=True, check=False)
    seccomp = ["--seccomp-bpf"] if probe.returncode == 0 else []
    return [exe, "-f", "-qq", *seccomp, "-e", "trace=execve", "-s", "1000000"]


def execs(trace: Path) -> list[bytes]:
    """The ``execve`` lines of a trace :func:`strace_argv` wrote."""
    return [x for x in trace.read_bytes().splitlines() if b"execve(" in x]


def trace_holding(trace: Path, toks: list[bytes]) -> list[bytes]:
    """Every line of the trace that holds a token."""
    return [x for x in trace.read_bytes().splitlines() if any(t in x for t in toks)]
