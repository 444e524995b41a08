"""Keeping the session's app-server running (issue 24): started again on its socket when it died."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from ..codex_server.process import AppServer
from ..errors import AppServerError
from ..paths import Paths
from .launch import config_args, serves, socket_path


class AppServerKeeper:
    """Keeps the session's app-server running: the TUI without it only shows
    "Reconnecting to server…", and reconnects (to the same thread) as soon as
    a server listens on the socket again. So a server that died is started
    again on the same socket with the same overrides, and the session's record
    gets its new pid (``note_pid``). Meanwhile the state comes from the screen.
    ``pid()`` is the server's pid the record holds now; ``command``/``cwd`` the
    session's launch (the TUI's argv, its folder)."""

    CHECK_EVERY_S = 1.0

    def __init__(self, paths: Paths, name: str, command: list[str], cwd: Path,
                 env: dict[str, str], agent_pid: Callable[[], int | None],
                 pid: Callable[[], int | None], note_pid: Callable[[int], None]) -> None:
        self.paths, self.name, self.env = paths, name, env
        self.command, self.cwd = command, cwd
        self.agent_pid, self.pid, self.note_pid = agent_pid, pid, note_pid
        self._server: AppServer | None = None  # the one started here (reaped here)
        self.restarts = 0

    def turn(self, sup: object) -> float | None:
        sock = socket_path(self.paths, self.name)
        if self._server is not None:
            self._server.process.poll()  # reap a dead one
        if serves(self.pid(), sock):
            return self.CHECK_EVERY_S
        log = logging.getLogger("agentwrap.session")
        log.warning("codex app-server of %s is gone: starting it again on %s", self.name, sock)
        try:
            self._server = AppServer.start(
                self.command[0], sock, env=self._launch_env(), cwd=self.cwd,
                log=self.paths.logs_dir / f"codex-app-server-{self.name}.log",
                extra_args=tuple(config_args(self.command[1:])),
            )
        except AppServerError as exc:
            log.warning("codex app-server of %s did not start again: %s", self.name, exc)
            return self.CHECK_EVERY_S * 5
        self.restarts += 1
        self.note_pid(self._server.pid)
        return self.CHECK_EVERY_S

    def close(self, ended: object) -> None:
        """Nothing to close: the server outlives a supervisor that stops (the next
        one keeps it), and goes with the agent (:func:`.launch.stop_app_server`)."""

    def _launch_env(self) -> dict[str, str]:
        """The environment the session was launched with, as the TUI still has
        it (its API keys, ``CODEX_HOME``); the supervisor's own when unreadable
        (a supervisor host may have been started from another shell)."""
        pid = self.agent_pid()
        if pid is not None:
            try:
                raw = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                raw = b""
            pairs = [e.split(b"=", 1) for e in raw.split(b"\0") if b"=" in e]
            if pairs:
                return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}
        return self.env


__all__ = ["AppServerKeeper"]
