"""tmux backend: the agent runs in a session on agentwrap's own tmux server.

Why tmux: the agent outlives the person's terminal (detach, re-attach from
anywhere), and several people/processes can watch one agent. agentwrap talks
to its *own* server (``-S $XDG_RUNTIME_DIR/agentwrap/tmux.sock``, no user
config), never the user's default one, so nothing the user set up can change
how keys and pastes behave.

Text goes in only as a bracketed paste (``load-buffer`` + ``paste-buffer -p``)
or as hex bytes (``send-keys -H``); named keys come from a fixed table. So a
message that says ``Enter`` or ``C-c`` is typed as those letters.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import libtmux

from ..errors import AgentExited, BackendError, SessionNotFound, TmuxNotFound
from ..screen import Snapshot
from .base import key_bytes
from .proctree import kill_tree

_INFO_FMT = (
    "#{cursor_y}\t#{cursor_x}\t#{pane_width}\t#{pane_height}\t#{pane_dead}\t"
    "#{pane_dead_status}\t#{pane_pid}\t#{pane_dead_signal}\t#{pane_title}"
)


_DYING_GRACE_S = 2.0


def tmux_binary() -> str:
    path = shutil.which("tmux")
    if not path:
        raise TmuxNotFound("tmux is not installed (or not on PATH)")
    return path


def tmux_version() -> str:
    out = subprocess.run([tmux_binary(), "-V"], capture_output=True, text=True, check=False)
    return out.stdout.strip()


def pane_term() -> str:
    """The TERM inside panes: tmux-256color when terminfo knows it."""
    ok = subprocess.run(["infocmp", "tmux-256color"], capture_output=True, check=False)
    return "tmux-256color" if ok.returncode == 0 else "screen-256color"


def server_for(socket: Path) -> libtmux.Server:
    tmux_binary()
    return libtmux.Server(socket_path=str(socket), config_file="/dev/null")


class TmuxTerminal:
    """One agent in one tmux session (single window, single pane)."""

    backend = "tmux"

    def __init__(self, server: libtmux.Server, session: str, runtime_dir: Path) -> None:
        self.server = server
        self.session = session
        self.target = f"={session}:0.0"
        self.runtime_dir = runtime_dir
        self._exit_code: int | None = None
        self._dead = False
        self._dying_since: float | None = None

    # --- lifecycle --------------------------------------------------------------

    @classmethod
    def launch(
        cls,
        socket: Path,
        session: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        cols: int = 160,
        rows: int = 45,
    ) -> TmuxTerminal:
        """Start ``argv`` in a new detached session with exactly ``env``.

        tmux would otherwise give the pane its *server's* environment (whatever
        the first agentwrap process had), so every variable is passed with
        ``-e``. The command is passed as separate arguments so tmux executes it
        directly, without ``sh -c`` re-parsing it.
        """
        server = server_for(socket)
        live = server.is_alive()
        if live and server.has_session(session):
            raise BackendError(f"tmux session {session!r} already exists on {socket}")
        # Server-wide options go in the same invocation, before the pane
        # exists: a fast-exiting agent must still leave its exit status.
        args: list[str] = [
            "set-option", "-g", "remain-on-exit", "on", ";",
            "set-option", "-s", "escape-time", "10", ";",
            "set-option", "-g", "default-terminal", pane_term(), ";",
            # update-environment would copy DISPLAY, SSH_AUTH_SOCK, ... of
            # this client into the session, whatever ``env`` says
            "set-option", "-g", "update-environment", "", ";",
        ]
        # A pane starts from the server's global environment (that of the
        # process that started the server) and -e only adds to it: remove
        # every global variable the caller did not pass. A server started by
        # this invocation inherits ``client_env`` (below), which is ``env``.
        if live:
            for key in sorted(_global_env_names(server) - set(env)):
                args += ["set-environment", "-g", "-u", key, ";"]
        # tmux sets SHELL in the pane to its default-shell (the server's SHELL)
        shell = env.get("SHELL", "")
        if shell.startswith("/") and os.access(shell, os.X_OK):
            args += ["set-option", "-g", "default-shell", shell, ";"]
        args += ["new-session", "-d", "-s", session, "-c", str(cwd)]
        args += ["-x", str(cols), "-y", str(rows)]
        for key, value in env.items():
            if key in ("TMUX", "TMUX_PANE") or "=" in key:
                continue
            args += ["-e", f"{key}={value}"]
        args += ["--", *argv]
        client_env = {
            k: v for k, v in env.items() if k not in ("TMUX", "TMUX_PANE") and "=" not in k
        }
        proc = subprocess.run(
            [tmux_binary(), "-S", str(socket), "-f", "/dev/null", *args],
            env=client_env, capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise BackendError(f"tmux new-session failed: {proc.stderr.strip()}")
        term = cls(server, session, socket.parent)
        term._configure(cols, rows)
        return term

    @classmethod
    def adopt(cls, socket: Path, session: str) -> TmuxTerminal:
        """Attach to a running agentwrap session (supervisor restart)."""
        server = server_for(socket)
        if not (server.is_alive() and server.has_session(session)):
            raise SessionNotFound(f"no tmux session {session!r} on {socket}")
        return cls(server, session, socket.parent)

    def _configure(self, cols: int, rows: int) -> None:
        t = f"={self.session}"
        opts = [
            ("set-option", "-t", t, "default-size", f"{cols}x{rows}"),
            ("set-option", "-t", t, "status-right", " #{@agentwrap_state} "),
            ("set-option", "-t", t, "status-right-length", "60"),
            ("set-option", "-t", t, "status-left", "[#{session_name}] "),
            ("set-option", "-t", t, "history-limit", "10000"),
        ]
        for args in opts:
            self.server.cmd(*args)

    def kill(self) -> None:
        self.server.cmd("kill-session", "-t", f"={self.session}")

    def close(self) -> None:
        pid = self.agent_pid()
        if pid is not None and not self._dead:
            kill_tree(pid, signal.SIGTERM, grace=2.0)
        self.kill()

    # --- state --------------------------------------------------------------------

    def _info(self) -> list[str]:
        proc = self.server.cmd("display-message", "-p", "-t", self.target, _INFO_FMT)
        if proc.returncode != 0 or not proc.stdout:
            self._dead = True
            raise AgentExited(f"tmux session {self.session!r} is gone")
        return proc.stdout[0].split("\t", 8)

    def snapshot(self) -> Snapshot:
        # One tmux invocation for both the pane info and its contents.
        proc = self.server.cmd(
            "display-message", "-p", "-t", self.target, _INFO_FMT, ";",
            "capture-pane", "-p", "-e", "-t", self.target,
        )
        if proc.returncode != 0 or not proc.stdout:
            self._dead = True
            raise AgentExited(f"tmux session {self.session!r} is gone")
        info = proc.stdout[0].split("\t", 8)
        cy, cx, w, h, dead, status, _, sig = (info + [""] * 9)[:8]
        self._note_dead(dead, status, sig)
        return Snapshot.from_ansi(
            "\n".join(proc.stdout[1:]),
            cols=int(w),
            rows=int(h),
            cursor=(int(cy or 0), int(cx or 0)),
            title=info[8] if len(info) > 8 else "",
            at=time.monotonic(),
        )

    def _note_dead(self, dead: str, status: str, sig: str = "") -> None:
        """tmux can flag a pane dead (its pty closed) a moment before it has
        reaped the process; until the status is known the agent counts as
        still exiting, for at most ``_DYING_GRACE_S``."""
        if dead != "1":
            return
        if status.lstrip("-").isdigit():
            self._exit_code = int(status)
        elif sig.isdigit():
            self._exit_code = 128 + int(sig)  # killed by a signal, as a shell reports it
        else:
            now = time.monotonic()
            self._dying_since = self._dying_since or now
            self._nudge_server()
            if now - self._dying_since < _DYING_GRACE_S:
                return
        self._dead = True

    def _nudge_server(self) -> None:
        """tmux built with libutempter can miss the SIGCHLD of a pane whose
        process exits while utempter's own handler is installed (tmux/tmux
        #311, seen with 3.3a): the agent stays an unreaped zombie and its exit
        status never arrives. Another SIGCHLD makes tmux reap it."""
        proc = self.server.cmd("display-message", "-p", "#{pid}")
        pid = proc.stdout[0].strip() if proc.returncode == 0 and proc.stdout else ""
        if pid.isdigit():
            try:
                os.kill(int(pid), signal.SIGCHLD)
            except OSError:
                pass

    def alive(self) -> bool:
        if self._dead:
            return False
        try:
            info = self._info()
        except AgentExited:
            return False
        self._note_dead(info[4], info[5], info[7] if len(info) > 7 else "")
        return not self._dead

    def exit_code(self) -> int | None:
        if not self._dead:
            self.alive()
        return self._exit_code

    def agent_pid(self) -> int | None:
        try:
            pid = self._info()[6]
        except AgentExited:
            return None
        return int(pid) if pid.isdigit() else None

    def user_idle_s(self) -> float | None:
        """tmux records when each attached client last pressed a key."""
        proc = self.server.cmd("list-clients", "-t", f"={self.session}", "-F", "#{client_activity}")
        stamps = [int(x) for x in proc.stdout if x.strip().isdigit()]
        if not stamps:
            return None  # nobody attached: nobody typing
        return max(0.0, time.time() - max(stamps))

    def resize(self, cols: int, rows: int) -> None:
        self.server.cmd("resize-window", "-t", f"={self.session}:0", "-x", str(cols), "-y", str(rows))

    # --- input --------------------------------------------------------------------

    def _check(self, proc: libtmux.common.tmux_cmd, what: str) -> None:
        if proc.returncode != 0:
            if not self.alive():
                raise AgentExited(f"{what}: the agent has exited")
            raise BackendError(f"{what} failed: {' '.join(proc.stderr)}")

    def send_key(self, key: str) -> None:
        key_bytes(key)  # validates the name against the fixed table
        self._check(self.server.cmd("send-keys", "-t", self.target, key), f"send-keys {key}")

    def send_text(self, text: str) -> None:
        if not text:
            return
        data = text.encode("utf-8")
        for i in range(0, len(data), 512):
            hexed = [f"{b:02x}" for b in data[i : i + 512]]
            self._check(self.server.cmd("send-keys", "-t", self.target, "-H", *hexed), "send-keys")

    def paste(self, text: str, *, bracketed: bool = True) -> None:
        """load-buffer from a private file, then paste-buffer.

        ``-p`` makes tmux wrap the text in bracketed-paste markers when (and
        only when) the application enabled them; ``-r`` keeps LF as LF, since
        without it tmux turns every newline into a CR and each line submits.
        """
        name = f"aw-{secrets.token_hex(4)}"
        path = self.runtime_dir / f".{name}.paste"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
        try:
            flags = ["-p", "-r"] if bracketed else ["-r"]
            proc = self.server.cmd(
                "load-buffer", "-b", name, str(path), ";",
                "paste-buffer", "-d", *flags, "-b", name, "-t", self.target,
            )
            self._check(proc, "paste-buffer")
        finally:
            path.unlink(missing_ok=True)

    def pipe_output(self, fifo: Path) -> None:
        """Copy the pane's output to ``fifo`` so the supervisor wakes on
        output instead of polling (``pipe-pane -O``: output only)."""
        cmd = f"exec cat > {_shell_quote(str(fifo))}"
        self._check(self.server.cmd("pipe-pane", "-O", "-t", self.target, cmd), "pipe-pane")

    def set_status(self, text: str) -> None:
        """Shown in the tmux status bar of attached clients."""
        self.server.cmd("set-option", "-t", f"={self.session}", "@agentwrap_state", text)

    def display(self, message: str) -> None:
        self.server.cmd("display-message", "-t", self.target, "-d", "5000", message)


def _global_env_names(server: libtmux.Server) -> set[str]:
    """Names in a running tmux server's global environment."""
    names: set[str] = set()
    for line in server.cmd("show-environment", "-g").stdout:
        name = line.lstrip("-").split("=", 1)[0]
        if name:
            names.add(name)
    return names


def _shell_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"
