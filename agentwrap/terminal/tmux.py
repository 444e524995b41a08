"""tmux backend: the agent runs in a session on agentwrap's own tmux server.

Why tmux: the agent outlives the person's terminal (detach, re-attach from
anywhere), and several people/processes can watch one agent. agentwrap talks
to its *own* servers, one per session (``-S
$XDG_RUNTIME_DIR/agentwrap/tmux/NAME.sock``, no user config), never the user's
default one, so nothing the user set up can change how keys and pastes behave,
and a crashing server (tmux 3.3a segfaults on a paste into a dead pane) takes
one agent down, not every supervised one.

Text goes in only as a bracketed paste (``load-buffer`` + ``paste-buffer -p``)
or as hex bytes (``send-keys -H``); named keys come from a fixed table. So a
message that says ``Enter`` or ``C-c`` is typed as those letters.

Nothing is ever typed into a dead or dying pane: the agent's process is
checked first (``pane_dead``, its exit status, its pid in ``/proc``), and the
paste itself runs under a ``pane_dead`` test inside the server (``if-shell
-F``), so the pane cannot die between the check and the paste.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import libtmux

from ..errors import AgentExited, BackendError, SessionNotFound, TmuxNotFound
from ..paths import private_dirs
from . import launcher
from .base import key_bytes
from .proctree import alive as pid_alive
from .proctree import kill_tree, zombie_status
from .screen import Snapshot

# One display-message answers everything about the pane at once: where the
# cursor is, the size, whether the agent is gone (and how), whether a person is
# attached and when one last pressed a key (session_activity: tmux updates it
# on client keys), and the title last (it may hold tabs). Who is attached is
# the client list, not its count: only a client with a terminal is a person
# (:func:`persons_in`), so a page's control-mode reader (:mod:`.control`) is not.
_INFO_FMT = (
    "#{cursor_y}\t#{cursor_x}\t#{pane_width}\t#{pane_height}\t#{pane_dead}\t"
    "#{pane_dead_status}\t#{pane_pid}\t#{pane_dead_signal}\t#{session_attached_list}\t"
    "#{session_activity}\t#{pane_title}"
)
_INFO_FIELDS = 11


_NO_TTY = re.compile(r"client-\d+$")  # what tmux names a client without a terminal


def persons_in(attached_list: str) -> int:
    """How many of ``#{session_attached_list}``'s clients are people: those
    with a terminal. A control-mode client without one (a page's reader,
    :mod:`.control`) has no keyboard: it is never a person at it."""
    return sum(1 for name in attached_list.split(",") if name and not _NO_TTY.match(name))


class Reply(Protocol):
    """What a tmux call answers (libtmux's ``tmux_cmd``, or a control client's)."""

    @property
    def stdout(self) -> list[str]: ...
    @property
    def stderr(self) -> list[str]: ...
    @property
    def returncode(self) -> int | str | None: ...


# A page holding the keyboard (issue 42, :mod:`.live`): NAME.takeover beside
# the socket, touched on each of its keys
TAKEOVER_SUFFIX = ".takeover"
_HOLD_DEFAULT_S = 120.0  # a marker without its idle limit: [serve] takeover_idle_s's default
_HOLD_SLACK_S = 5.0  # serve ends an idle take-over on its next look, a moment after the limit

_DYING_GRACE_S = 2.0
_FRESH_S = 0.05  # a liveness judgement this recent answers alive() without asking tmux

# Expands to something other than "0" once the pane's process is gone: the
# pane is dead (its pty closed), or tmux has reaped the process (its status or
# signal is set; tmux 3.3a leaves pane_dead at 0 while pipe-pane output is
# still buffered, though the process is long gone).
_GONE_COND = "#{pane_dead}#{pane_dead_status}#{pane_dead_signal}"
_GONE_MARK = "agentwrap: pane gone"


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
        self._judged_at = -1.0  # when a snapshot last judged the agent alive
        self._judged_pid: int | None = None  # the agent's pid at that judgement
        self._clients = 0  # attached persons (tty clients), at the last look
        self._activity = 0.0  # when one of them last pressed a key (epoch s)
        self._via: Callable[..., Reply] | None = None

    def route(self, via: Callable[..., Reply] | None) -> None:
        """Run this terminal's tmux commands through ``via`` (a page's
        control-mode client, :mod:`.control`) instead of a process each."""
        self._via = via

    def _cmd(self, *args: str) -> Reply:
        return self.server.cmd(*args) if self._via is None else self._via(*args)

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
        the first agentwrap process had), and a value on a command line is
        any local user's to read (``ps``; the tmux server keeps the argv of
        the client that started it for the whole session): so the values go
        in a private file that the pane's first program, :mod:`.launcher`,
        reads, removes and lays over the pane's environment before it execs
        the agent. No argv of tmux, of its server or of the pane holds one.
        The command is passed as separate arguments so tmux executes it
        directly, without ``sh -c`` re-parsing it.
        """
        private_dirs(socket.parent)
        server = server_for(socket)
        live = server.is_alive()
        if live and server.has_session(session):
            raise BackendError(f"tmux session {session!r} already exists on {socket}")
        # Server-wide options go in the same invocation, before the pane
        # exists: a fast-exiting agent must still leave its exit status.
        args: list[str] = [
            "set-option", "-g", "remain-on-exit", "on", ";",
            "set-option", "-s", "escape-time", "10", ";",
            # agents that ask for focus reports (Claude Code) get them
            "set-option", "-s", "focus-events", "on", ";",
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
        client_env = {
            k: v for k, v in env.items() if k not in ("TMUX", "TMUX_PANE") and "=" not in k
        }
        env_file = _env_file(socket.parent, session, client_env)
        args += ["new-session", "-d", "-s", session, "-c", str(cwd)]
        args += ["-x", str(cols), "-y", str(rows)]
        args += ["--", *_launcher_argv(env_file), "--", *argv]
        try:
            proc = subprocess.run(
                [tmux_binary(), "-S", str(socket), "-f", "/dev/null", *args],
                env=client_env, capture_output=True, text=True, check=False,
            )
        except BaseException:
            env_file.unlink(missing_ok=True)
            raise
        if proc.returncode != 0:
            env_file.unlink(missing_ok=True)  # no pane: nobody reads it
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

    @property
    def _session_target(self) -> str:
        """The session, for options. ``-t =NAME`` is refused by tmux 3.3a's
        set-option (it resolves a pane target): ``=NAME:`` is the session of
        its current window, matched exactly."""
        return f"={self.session}:"

    def _configure(self, cols: int, rows: int) -> None:
        """Session options, in one tmux call whose failure is an error: with
        a wrong target they used to be skipped silently, and the state never
        showed in the status line."""
        t = self._session_target
        args: list[str] = []
        for opt, value in (
            ("default-size", f"{cols}x{rows}"),
            ("status-left", "[#{session_name}] "),
            ("status-left-length", "40"),
            # the agent's state as the supervisor sees it (set_status)
            ("status-right", " #{?@agentwrap_state,#{@agentwrap_state},agentwrap} "),
            ("status-right-length", "60"),
            ("history-limit", "10000"),
        ):
            args += ["set-option", "-t", t, opt, value, ";"]
        proc = self._cmd(*args[:-1])
        if proc.returncode != 0:
            raise BackendError(f"configuring tmux session failed: {' '.join(proc.stderr)}")

    def kill(self) -> None:
        self._cmd("kill-session", "-t", f"={self.session}")
        remove_idle_socket(self.server)
        for left in self.runtime_dir.glob(f".{self.session}-*.env"):  # a launcher never ran
            left.unlink(missing_ok=True)

    def close(self) -> None:
        pid = self.agent_pid()
        if pid is not None and not self._dead:
            kill_tree(pid, signal.SIGTERM, grace=2.0)
        self.kill()

    # --- state --------------------------------------------------------------------

    def _info(self, *, judge: bool = True) -> list[str]:
        proc = self._cmd("display-message", "-p", "-t", self.target, _INFO_FMT)
        return self._read_info(proc, judge=judge)

    def _read_info(self, proc: Reply, *, judge: bool = True) -> list[str]:
        """The ``_INFO_FMT`` line of a tmux answer (its first line): who is
        attached and their last key are kept for :meth:`user_idle_s`, and with
        ``judge`` whether the agent is gone (:meth:`_judge`), with the time of
        that judgement, so :meth:`alive` right after needs no call of its own."""
        if proc.returncode != 0 or not proc.stdout:
            self._dead = True
            raise AgentExited(f"tmux session {self.session!r} is gone")
        info = proc.stdout[0].split("\t", _INFO_FIELDS - 1)
        attached, activity = (info + [""] * _INFO_FIELDS)[8:10]
        self._clients = persons_in(attached)
        self._activity = float(activity) if activity.isdigit() else 0.0
        if judge:
            self._judge(info)
            self._judged_at = time.monotonic()
        return info

    def snapshot(self) -> Snapshot:
        # One tmux invocation for both the pane info and its contents.
        proc = self._cmd(
            "display-message", "-p", "-t", self.target, _INFO_FMT, ";",
            "capture-pane", "-p", "-e", "-t", self.target,
        )
        info = self._read_info(proc)
        cy, cx, w, h = (info + [""] * _INFO_FIELDS)[:4]
        return Snapshot.from_ansi(
            "\n".join(proc.stdout[1:]),
            cols=int(w),
            rows=int(h),
            cursor=(int(cy or 0), int(cx or 0)),
            title=info[10] if len(info) > 10 else "",
            at=time.monotonic(),
        )

    def capture_styled(self, fmt: str) -> tuple[list[str], list[str]]:
        """``fmt`` expanded (tab-separated fields) and the visible screen with its
        colours (``capture-pane -e``), with the pane info in the same tmux call,
        so liveness is judged as by :meth:`snapshot` and the key a watching page
        types next needs no call of its own to check it (:meth:`alive`)."""
        proc = self._cmd(
            "display-message", "-p", "-t", self.target, _INFO_FMT, ";",
            "display-message", "-p", "-t", self.target, fmt, ";",
            "capture-pane", "-p", "-e", "-t", self.target,
        )
        self._read_info(proc)
        return (proc.stdout[1].split("\t") if len(proc.stdout) > 1 else []), proc.stdout[2:]

    def _judge(self, info: list[str]) -> None:
        """Decide from one ``_INFO_FMT`` reading whether the agent is gone.

        ``pane_dead == 1`` alone is not enough: tmux 3.3a keeps a pane "alive"
        while ``pipe-pane`` output is buffered (issue 14: 119 s with Gemini)
        although it has reaped the process and set ``pane_dead_signal``. So the
        agent is gone once tmux has its exit status or signal, once its pid is
        gone or a zombie, or once the pane is dead. A zombie's status is read
        from ``/proc``; a dead pane whose status is not known yet (tmux flags
        the pty closed a moment before it reaps) counts as still exiting, for
        at most ``_DYING_GRACE_S``.
        """
        if self._dead:
            return
        _, _, _, _, dead, status_s, pid_s, sig_s = (info + [""] * 8)[:8]
        self._judged_pid = int(pid_s) if pid_s.isdigit() else None
        if status_s.lstrip("-").isdigit():
            self._exit_code = int(status_s)
        elif sig_s.isdigit():
            self._exit_code = 128 + int(sig_s)  # killed by a signal, as a shell reports it
        else:
            pid_gone = pid_s.isdigit() and not pid_alive(int(pid_s))
            if dead != "1" and not pid_gone:
                return
            code = zombie_status(int(pid_s)) if pid_s.isdigit() else None
            if code is not None:
                self._exit_code = code
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
        proc = self._cmd("display-message", "-p", "#{pid}")
        pid = proc.stdout[0].strip() if proc.returncode == 0 and proc.stdout else ""
        if pid.isdigit():
            try:
                os.kill(int(pid), signal.SIGCHLD)
            except OSError:
                pass

    def alive(self) -> bool:
        if self._dead:
            return False
        if (self._dying_since is None and time.monotonic() - self._judged_at < _FRESH_S
                and (self._judged_pid is None or pid_alive(self._judged_pid))):
            return True  # the snapshot just taken judged it (one tmux call, not two),
            # and its process has not gone since (a /proc read, not a tmux call)
        try:
            self._info()
        except AgentExited:
            return False
        return not self._dead

    def exiting(self) -> bool:
        """Gone, or on its way: also a dead pane whose exit status tmux has
        not published yet (which :meth:`alive` still counts as alive)."""
        return not self.alive() or self._dying_since is not None

    def exit_code(self) -> int | None:
        if not self._dead:
            self.alive()
        return self._exit_code

    def agent_pid(self) -> int | None:
        try:
            pid = self._info(judge=False)[6]
        except AgentExited:
            return None
        return int(pid) if pid.isdigit() else None

    def user_idle_s(self) -> float | None:
        """Seconds since a person last pressed a key in this session (tmux's
        session_activity, or a page's take-over: :meth:`_page_idle_s`); None
        when nobody is attached and no page took over, so nobody types.
        Asked together with the pane's liveness, so the input that usually
        follows needs no second tmux call."""
        if self._dead:
            return None
        try:
            self._info()
        except AgentExited:
            return None
        page = self._page_idle_s()
        if not self._clients:
            return page
        tmux = max(0.0, time.time() - self._activity)
        return tmux if page is None else min(tmux, page)

    def held(self) -> bool:
        """A page holds the keyboard: its take-over marker is there and younger
        than the idle limit written in it (after which ``serve`` ends a
        take-over itself: a marker left by a ``serve`` that died holds nothing)."""
        marker = self.runtime_dir / f"{self.session}{TAKEOVER_SUFFIX}"
        try:
            with open(marker, "rb") as f:
                text = f.read(64).decode("ascii", "replace").strip()
            age = time.time() - marker.stat().st_mtime
        except OSError:
            return False
        try:
            limit = float(text)
        except ValueError:
            limit = _HOLD_DEFAULT_S
        return age < limit + _HOLD_SLACK_S

    def _page_idle_s(self) -> float | None:
        """Seconds since the person taking over from a page last pressed a
        key (the take-over marker's mtime, :mod:`.live`); None when no page
        holds the keyboard."""
        try:
            at = (self.runtime_dir / f"{self.session}{TAKEOVER_SUFFIX}").stat().st_mtime
        except OSError:
            return None
        return max(0.0, time.time() - at)

    def resize(self, cols: int, rows: int) -> None:
        self._cmd("resize-window", "-t", f"={self.session}:0", "-x", str(cols), "-y", str(rows))

    # --- input --------------------------------------------------------------------

    def _check(self, proc: Reply, what: str) -> None:
        if proc.returncode != 0:
            if not self.alive():
                raise AgentExited(f"{what}: the agent has exited")
            raise BackendError(f"{what} failed: {' '.join(proc.stderr)}")

    def _input(self, what: str, command: str, *before: str) -> None:
        """Run the input ``command`` (one tmux command line) only into a live pane.

        tmux 3.3a segfaults on a paste or named key into a dead pane (issue 8:
        with remain-on-exit, 6 of 6), and text typed into a dying one is lost.
        So first the agent itself is checked (exit status, pid, zombie), then
        the command runs under ``if-shell -F`` on the pane's state *inside*
        the server, where nothing can happen between the test and the input.
        ``before`` (e.g. a load-buffer) runs first in the same invocation.
        """
        if not self.alive():
            raise AgentExited(f"{what}: the agent has exited")
        proc = self._cmd(
            *before,
            "if-shell", "-F", "-t", self.target, _GONE_COND,
            f"display-message -p '{_GONE_MARK}'", command,
        )
        if _GONE_MARK in proc.stdout:
            self.alive()  # record the exit status while tmux still has it
            raise AgentExited(f"{what}: the agent has exited")
        self._check(proc, what)

    def send_key(self, key: str) -> None:
        key_bytes(key)  # validates the name against the fixed table
        self._input(f"send-keys {key}", f"send-keys -t {self.target} {key}")

    def send_text(self, text: str) -> None:
        if not text:
            return
        data = text.encode("utf-8")
        for i in range(0, len(data), 512):
            hexed = " ".join(f"{b:02x}" for b in data[i : i + 512])
            self._input("send-keys", f"send-keys -t {self.target} -H {hexed}")

    def paste(self, text: str, *, bracketed: bool = True) -> None:
        """load-buffer from a private file, then paste-buffer.

        ``-p`` makes tmux wrap the text in bracketed-paste markers when (and
        only when) the application enabled them; ``-r`` keeps LF as LF, since
        without it tmux turns every newline into a CR and each line submits.
        The buffer has a random name and ``-d`` deletes it once pasted; one
        left unpasted because the agent is gone is deleted here.
        """
        name = f"aw-{secrets.token_hex(4)}"
        path = self.runtime_dir / f".{name}.paste"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
        try:
            flags = "-p -r" if bracketed else "-r"
            self._input(
                "paste-buffer",
                f"paste-buffer -d {flags} -b {name} -t {self.target}",
                "load-buffer", "-b", name, str(path), ";",
            )
        except AgentExited:
            self._cmd("delete-buffer", "-b", name)
            raise
        finally:
            path.unlink(missing_ok=True)

    def pipe_output(self, fifo: Path) -> None:
        """Copy the pane's output to ``fifo`` so the supervisor wakes on
        output instead of polling (``pipe-pane -O``: output only)."""
        cmd = f"exec cat > {_shell_quote(str(fifo))}"
        self._check(self._cmd("pipe-pane", "-O", "-t", self.target, cmd), "pipe-pane")

    def set_status(self, text: str) -> None:
        """Shown at the right of the tmux status line of attached clients
        (``status-right`` renders ``@agentwrap_state``); tmux redraws it."""
        proc = self._cmd("set-option", "-t", self._session_target, "@agentwrap_state", text)
        if proc.returncode != 0:
            raise BackendError(f"set-option failed: {' '.join(proc.stderr)}")

    def display(self, message: str) -> None:
        """A message on the status line of attached clients for 5 s. tmux reads
        the message as a format, where ``#(...)`` runs a shell command and
        ``#{...}`` expands: every ``#`` is doubled, so text from an agent's
        screen is shown, never run."""
        try:
            self._cmd("display-message", "-t", self.target, "-d", "5000",
                            tmux_literal(message))
        except (OSError, libtmux.exc.LibTmuxException) as exc:
            raise BackendError(f"display-message failed: {exc}") from None


def tmux_literal(text: str) -> str:
    """``text`` as a tmux format that shows exactly it, on one line: ``#``
    doubled (no ``#(...)`` command, no ``#{...}`` expansion), white space and
    control characters folded to single spaces."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat.replace("#", "##")


def remove_idle_socket(server: libtmux.Server) -> None:
    """Remove the socket of a server that has exited. tmux 3.3a leaves the
    file behind when its last session ends; with one server per session
    they would pile up in the runtime dir. A live server keeps its socket."""
    if server.socket_path and not server.is_alive():
        Path(server.socket_path).unlink(missing_ok=True)


#: What tmux sets in every pane itself, over the session's environment (as it
#: did over ``-e``): the launcher must not lay the caller's values over these.
PANE_OWN = frozenset({"TERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "TMUX", "TMUX_PANE",
                      "PWD", "SHELL"})


def _env_file(folder: Path, session: str, env: Mapping[str, str]) -> Path:
    """A private file with ``env`` (but :data:`PANE_OWN`) for the pane's
    launcher: created exclusively, 0600 from the start, in the 0700 tmux dir."""
    path = folder / f".{session}-{secrets.token_hex(8)}.env"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        data = launcher.encode({k: v for k, v in env.items() if k not in PANE_OWN})
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
    return path


def _launcher_argv(env_file: Path) -> list[str]:
    """The pane's first program (:mod:`.launcher`): this Python, isolated
    (``-I``: no ``PYTHON*`` variable, no user site) and without ``site``
    (``-S``: it imports nothing but ``os`` and ``sys``)."""
    return [sys.executable, "-I", "-S", launcher.__file__, str(env_file)]


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
