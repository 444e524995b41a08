"""One long-lived tmux control-mode client per watched session (issue 42).

A page's live terminal used to cost a ``tmux`` process for every look at the
pane (and for every key typed): at a load of 20 on two cores, spawning them
was most of the latency (p99 644 ms). :class:`ControlClient` is one
``tmux -C attach-session`` kept open beside ``serve``: commands go down its
stdin and come back as ``%begin``/``%end`` blocks (no process per call), and
its ``%output`` notifications say *when* the pane changed, so a page is
repainted on change instead of on a timer.

Why it is not a person: the client has no terminal (tmux names it
``client-PID``; a person's client is a tty, :func:`.tmux.persons_in`), it never
sets a size (tmux leaves control clients out of window sizing until they
``refresh-client -C``), and it presses no key (its ``send-keys`` are the
take-over's, which the take-over marker already announces). The supervisor's
idle check counts only tty clients, so this reader never makes queued
messages wait, and the window keeps the size the session was given.

Each request ends with a sentinel (``display-message`` of a random token):
the answer is every block up to the sentinel's, however many blocks the
commands made (``if-shell`` runs its command as a block of its own). A
screen row that mimics a guard line cannot end a block early, since guards
are matched on tmux's own command number. When the client is gone (the
session ended, tmux dropped it) :meth:`ControlClient.cmd` says so and the
caller falls back to a ``tmux`` process per call, as before.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .tmux import tmux_binary

_BEGIN = re.compile(r"%begin (\d+) (\d+) (\d+)$")
_ANSWER_S = 5.0  # a request not answered in this long: the client is given up
_RESTART_S = 1.0  # a gone client is started again at most this often


def quote(arg: str) -> str:
    """``arg`` as one word of a tmux command line (single quotes; a quote
    inside as ``'"'"'``)."""
    return "'" + arg.replace("'", "'\"'\"'") + "'"


@dataclass
class Answer:
    """What a request printed: the shape of libtmux's ``tmux_cmd``."""

    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    returncode: int = 0


class ClientGone(Exception):
    """The control client is not there (any more): use a process per call."""


class ControlClient:
    """``tmux -C attach-session -t =SESSION`` on ``socket``, with its replies
    and change notifications read by a thread of its own."""

    def __init__(self, socket: Path, session: str) -> None:
        self.socket = socket
        self.session = session
        self.changes = 0  # bumped on each %output (and when the client goes)
        self._cond = threading.Condition()
        self._lock = threading.Lock()  # one request at a time
        self._blocks: queue.Queue[tuple[bool, list[str]] | None] = queue.Queue()
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self._closed = False
        self._start()

    # --- the process --------------------------------------------------------------

    def _start(self) -> None:
        self._started_at = time.monotonic()
        self._blocks = queue.Queue()
        try:
            proc = subprocess.Popen(
                [tmux_binary(), "-S", str(self.socket), "-f", "/dev/null", "-C",
                 "attach-session", "-t", f"={self.session}"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env={k: v for k, v in os.environ.items() if k != "TMUX"}, close_fds=True)
        except OSError:
            self._proc = None
            return
        self._proc = proc
        ready = threading.Event()
        threading.Thread(target=self._read, args=(proc, ready), daemon=True,
                         name=f"tmux-control-{self.session}").start()
        ready.wait(_ANSWER_S)  # attached (its session-changed) or gone

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _read(self, proc: subprocess.Popen[bytes], ready: threading.Event) -> None:
        assert proc.stdout is not None
        block: list[str] | None = None
        guard = ""
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if block is not None:
                if line in (f"%end {guard}", f"%error {guard}"):
                    self._blocks.put((line.startswith("%end"), block))
                    block = None
                else:
                    block.append(line)
                continue
            if line.startswith("%output "):
                self._bump()
            elif (m := _BEGIN.match(line)) is not None:
                block, guard = [], " ".join(m.groups())
            elif line.startswith("%session-changed"):
                ready.set()
            elif line.startswith(("%exit", "%layout-change", "%window-")):
                self._bump()
        proc.wait()
        ready.set()
        self._blocks.put(None)
        self._bump()

    def _bump(self) -> None:
        with self._cond:
            self.changes += 1
            self._cond.notify_all()

    # --- use ------------------------------------------------------------------------

    def wait_change(self, seen: int, timeout: float) -> int:
        """The change count once it differs from ``seen`` (or ``timeout`` passed)."""
        with self._cond:
            self._cond.wait_for(lambda: self.changes != seen or self._closed, timeout)
            return self.changes

    def cmd(self, *args: str) -> Answer:
        """Run ``args`` (tmux's argv: commands separated by ``";"``) through the
        client; :class:`ClientGone` when it is not there."""
        lines: list[str] = []
        words: list[str] = []
        for arg in [*args, ";"]:
            if arg == ";":
                if words:
                    lines.append(" ".join(words))
                words = []
            elif "\n" in arg or "\r" in arg:
                raise ClientGone("a word with a newline goes through a process")
            else:
                words.append(quote(arg))
        token = f"agentwrap-sync-{secrets.token_hex(8)}"
        lines.append(f"display-message -p {quote(token)}")
        with self._lock:
            if not self.alive:
                if self._closed or time.monotonic() - self._started_at < _RESTART_S:
                    raise ClientGone("the control client is gone")
                self._start()
                if not self.alive:
                    raise ClientGone("the control client did not start")
            proc = self._proc
            assert proc is not None and proc.stdin is not None
            try:
                proc.stdin.write(("\n".join(lines) + "\n").encode("utf-8"))
                proc.stdin.flush()
            except OSError as exc:
                raise ClientGone(str(exc)) from exc
            answer = Answer()
            while True:
                try:
                    got = self._blocks.get(timeout=_ANSWER_S)
                except queue.Empty:
                    proc.kill()
                    raise ClientGone("the control client did not answer") from None
                if got is None:
                    raise ClientGone("the control client left")
                ok, out = got
                if ok and out == [token]:
                    break
                if ok:
                    answer.stdout.extend(out)
                else:
                    answer.stderr.extend(out)
                    answer.returncode = 1
        while answer.stdout and answer.stdout[-1] == "":  # as libtmux gives it
            answer.stdout.pop()
        return answer

    def close(self) -> None:
        """Detach (the session itself goes on)."""
        self._closed = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()  # tmux detaches a control client at EOF
                proc.wait(timeout=2.0)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        self._bump()
