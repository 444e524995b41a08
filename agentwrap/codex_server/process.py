"""Start and stop a private Codex app-server on a unix socket.

The server is the session's own: its socket lives in agentwrap's 0700 runtime
directory, and it reads the person's Codex configuration as the TUI would
(``CODEX_HOME`` from the environment) without changing it. The npm ``codex`` is
a node wrapper around the native binary and a SIGTERM'd server waits up to 45 s
for its clients (docs/codex-app-server.md), so the server runs in a process
group of its own and is stopped as a group: SIGTERM, then SIGKILL after a grace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import AppServerError

_PROBE_TIMEOUT_S = 20.0


def support_problem(codex: str, env: dict[str, str] | None = None) -> str | None:
    """Why this Codex cannot run on a private app-server, or None when it can:
    both ``codex app-server --listen unix://PATH`` and ``codex --remote`` must
    exist (Codex 0.169.0 has them; older releases lack one or both)."""
    checks = (([codex, "app-server", "--help"], "unix://"), ([codex, "--help"], "--remote"))
    for argv, needle in checks:
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, env=env,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`{' '.join(argv[1:])}` failed: {exc}"
        if done.returncode != 0 or needle not in done.stdout:
            return f"this Codex has no {needle!r} in `{' '.join(argv[1:])}`"
    return None


@dataclass
class AppServer:
    """A running ``codex app-server --listen unix://socket``."""

    process: subprocess.Popen[bytes]
    socket: Path

    @classmethod
    def start(
        cls,
        codex: str,
        socket: Path,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        log: Path | None = None,
        timeout: float = 30.0,
        extra_args: tuple[str, ...] = (),
    ) -> AppServer:
        """Start the server and wait until its socket accepts connections."""
        with contextlib.suppress(FileNotFoundError):
            socket.unlink()  # a dead server's; the directory is private
        out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [codex, "app-server", *extra_args, "--listen", f"unix://{socket}"],
                env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True,
            )
        except OSError as exc:
            raise AppServerError(f"cannot start Codex's app-server: {exc}") from exc
        finally:
            if log is not None and not isinstance(out, int):
                out.close()
        server = cls(process=proc, socket=socket)
        deadline = time.monotonic() + timeout
        while not socket.exists():
            if proc.poll() is not None:
                raise AppServerError(
                    f"Codex's app-server exited with {proc.returncode} before listening"
                    + (f" (log: {log})" if log else "")
                )
            if time.monotonic() > deadline:
                server.stop()
                raise AppServerError(f"Codex's app-server did not listen in {timeout:g} s")
            time.sleep(0.02)
        return server

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace: float = 2.0) -> None:
        """Stop the server's whole process group (the node wrapper and the binary)."""
        pgid = self.process.pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self._group_alive():
                time.sleep(0.05)
            if not self._group_alive():
                break
        self.process.poll()
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()

    def _group_alive(self) -> bool:
        self.process.poll()  # reap the leader, or the group never looks empty
        try:
            os.killpg(self.process.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
