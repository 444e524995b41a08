"""pty backend: agentwrap is a transparent relay between the person and the agent.

One writer owns every write to the agent: the person's keys and agentwrap's
injections go through one ordered buffer, so injected bytes can never
interleave with what the person types, and it records when the person last
typed (delivery waits for them to pause). Writes are non-blocking, so a
child that stops reading while flooding output can never deadlock the relay.

Two relays do this. The native one (``relay_helper``: a small C program,
built at install time) copies bytes as fast as ``script(1)`` and tees a copy
here for the virtual screen; the Python one (``_loop`` below) runs in this
process when the helper was not built. Either way there is no separate
server: the process running the relay is the supervisor, and its lifetime
is the agent's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import select
import signal
import struct
import termios
import threading
import time
import tty
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

import pexpect

from ..errors import AgentExited, AgentNotFound, BackendError
from .base import PASTE_END, PASTE_START, key_bytes
from .proctree import kill_tree
from .relay_helper import HelperEvents, HelperProcess, choose_helper
from .screen import Snapshot
from .vscreen import VirtualScreen

log = logging.getLogger("agentwrap.pty")

READ_SIZE = 65536
_BATCH_READS = 16
# After reading the helper's tee, let it fill for this long: a wake-up per
# few ms rather than per 4 KB write (the person's terminal is not affected,
# only the detector's copy; during a flood the helper sends tails anyway).
_TEE_BATCH_S = 0.002


def terminal_size(fd: int) -> tuple[int, int] | None:
    """(cols, rows) of the terminal on ``fd``, or None if it is not one."""
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:
        return None
    return (cols, rows) if cols and rows else None


class PtyTerminal:
    backend = "pty"

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        cols: int = 160,
        rows: int = 45,
        relay: str = "auto",
    ) -> None:
        self._helper_binary = choose_helper(relay)
        self.relay_kind = "python" if self._helper_binary is None else "native"
        try:
            self.child = pexpect.spawn(
                argv[0], list(argv[1:]), env=dict(env), cwd=str(cwd),
                dimensions=(rows, cols), use_poll=True,
            )
        except pexpect.ExceptionPexpect as exc:
            raise AgentNotFound(f"cannot start {argv[0]!r}: {exc}") from None
        self.child.delaybeforesend = None  # pexpect sleeps 50 ms per send otherwise
        self.fd: int = self.child.child_fd
        os.set_blocking(self.fd, False)
        self.screen = VirtualScreen(cols, rows)
        self._out = bytearray()  # bytes waiting to be written to the agent
        self._written = 0  # total bytes written to the agent so far
        self._queued = 0  # total bytes ever queued
        self._waiters: deque[tuple[int, threading.Event]] = deque()
        self._inject: deque[tuple[bytes, threading.Event]] = deque()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._out_r, self._out_w = os.pipe()  # readable when output arrived
        os.set_blocking(self._out_r, False)
        os.set_blocking(self._out_w, False)
        self._out_flag = False
        self._winch = False
        self.last_user_input = 0.0
        self.last_output = time.monotonic()
        self._eof = threading.Event()
        self._exit_code: int | None = None
        # The relay thread and the supervisor thread both ask whether the agent
        # lives; each ask may reap it (waitpid). Unserialised, the loser saw
        # ECHILD before the winner had stored the status, and recorded exit 0.
        self._reap_lock = threading.Lock()
        self._relaying = False
        self._relay_ended = threading.Event()
        self._helper: HelperProcess | None = None
        self._acks: dict[int, threading.Event] = {}  # injection id -> written (native)

    # --- the relay ------------------------------------------------------------------

    def relay(self, stdin_fd: int | None = None, stdout_fd: int | None = None) -> int:
        """Copy bytes until the agent exits; return its exit code.

        With ``stdin_fd`` a terminal, it is put in raw mode (Ctrl-C reaches
        the agent as a byte) and restored afterwards, and SIGWINCH resizes the
        agent. Without, the relay runs headless (tests, benchmarks).
        """
        saved = None
        old_winch = None
        if stdin_fd is not None and os.isatty(stdin_fd):
            saved = termios.tcgetattr(stdin_fd)
            tty.setraw(stdin_fd)
            old_winch = signal.signal(signal.SIGWINCH, self._on_winch)
            self._sync_size(stdin_fd)
        self._relaying = True
        try:
            if self._helper_binary is not None:
                if not self._loop_helper(self._helper_binary, stdin_fd, stdout_fd):
                    # The helper died under a live agent: never strand the
                    # person, carry on in Python from here.
                    log.error("the native relay ended while the agent runs; relaying in Python")
                    self.relay_kind = "python"
                    self._loop(stdin_fd, stdout_fd)
            else:
                self._loop(stdin_fd, stdout_fd)
        finally:
            self._relaying = False
            self._relay_ended.set()
            if saved is not None and stdin_fd is not None:
                termios.tcsetattr(stdin_fd, termios.TCSAFLUSH, saved)
            if old_winch is not None:
                signal.signal(signal.SIGWINCH, old_winch)
        return self._reap()

    def _on_winch(self, signum: int, frame: object) -> None:
        self._winch = True
        self._wake()

    def _sync_size(self, fd: int) -> None:
        size = terminal_size(fd)
        if size is not None:
            self.resize(*size)

    def _on_wake(self, stdin_fd: int | None) -> None:
        _drain(self._wake_r)
        if self._winch and stdin_fd is not None:
            self._winch = False
            self._sync_size(stdin_fd)

    def _note_output(self) -> None:
        self.last_output = time.monotonic()
        if not self._out_flag:
            self._out_flag = True
            try:
                os.write(self._out_w, b"o")
            except BlockingIOError:
                pass

    # --- native relay: the helper copies, this thread keeps the screen --------------

    def _loop_helper(self, binary: Path, stdin_fd: int | None, stdout_fd: int | None) -> bool:
        """Run the helper until the agent's side closes: True. False if the
        helper ended while the agent still runs (crashed, killed)."""
        helper = self._helper = HelperProcess(binary, self.fd, stdin_fd, stdout_fd)
        poller = select.poll()
        for fd in (helper.tee_fd, helper.events_fd, self._wake_r):
            poller.register(fd, select.POLLIN)
        closed = ended = False
        try:
            while not (helper.tee_eof and helper.events_eof):
                try:
                    ready = poller.poll(1000)
                except InterruptedError:
                    continue
                if any(fd == self._wake_r for fd, _ in ready):
                    self._on_wake(stdin_fd)
                data = helper.read_output()  # tee first, then the events that precede it
                got = helper.read_events()
                closed |= got.closed
                self._apply(got)
                if data:
                    for piece in helper.split_at_gaps(data):
                        if piece is None:
                            self.screen.discontinuity()
                        else:
                            self.screen.feed(piece, track_paste_mode=False)
                    self._note_output()
                    time.sleep(_TEE_BATCH_S)
                for fd, eof in ((helper.tee_fd, helper.tee_eof), (helper.events_fd, helper.events_eof)):
                    if eof:
                        with contextlib.suppress(KeyError):
                            poller.unregister(fd)
            ended = True
        finally:
            if not ended:  # this side failed: do not leave a copier behind
                helper.proc.kill()
            helper.close()
            self._helper = None
            self._finish_waiters()  # what the helper did not confirm is re-checked by delivery
            agent_gone = closed or not self._child_alive()
            if agent_gone or not ended:
                self._eof.set()
        return agent_gone

    def _apply(self, got: HelperEvents) -> None:
        if got.typed:
            self.last_user_input = time.monotonic()
        if got.bracketed is not None:
            self.screen.bracketed_paste = got.bracketed
        if got.done:
            with self._lock:
                acks = [self._acks.pop(i, None) for i in got.done]
            for done in acks:
                if done is not None:
                    done.set()

    # --- Python relay: used when the helper was not built ----------------------------

    def _loop(self, stdin_fd: int | None, stdout_fd: int | None) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        if stdin_fd is not None:
            poller.register(stdin_fd, select.POLLIN)
        want_out = False
        while True:
            if self._inject:  # unlocked peek; _take_injections locks
                self._take_injections()
            if bool(self._out) != want_out:
                want_out = bool(self._out)
                mask = select.POLLIN | (select.POLLOUT if want_out else 0)
                poller.modify(self.fd, mask)
            try:
                events = poller.poll(1000)
            except InterruptedError:
                continue
            for fd, ev in events:
                if fd == self.fd:
                    readable = ev & (select.POLLIN | select.POLLHUP | select.POLLERR)
                    if readable and not self._read_agent(stdout_fd):
                        self._finish_waiters()
                        return
                    if ev & select.POLLOUT:
                        self._flush_to_agent()
                elif fd == self._wake_r:
                    self._on_wake(stdin_fd)
                elif fd == stdin_fd:
                    data = _read(stdin_fd)
                    if data is None:
                        continue
                    if not data:
                        poller.unregister(stdin_fd)
                        stdin_fd = None
                        continue
                    self.last_user_input = time.monotonic()
                    self._queue(data)

    def _read_agent(self, stdout_fd: int | None) -> bool:
        """Copy what the agent wrote to the person's terminal; False at EOF.

        A pty hands out at most ~4 KB per read, so under a flood the fixed
        per-chunk cost dominates: read until the pty is empty (up to
        ``_BATCH_READS`` reads), then write and feed the batch once.
        """
        chunks: list[bytes] = []
        eof = False
        for _ in range(_BATCH_READS):
            try:
                data = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno != errno.EIO:  # EIO: the agent closed its side, it exited
                    raise
                data = b""
            if not data:
                eof = True
                break
            chunks.append(data)
        if chunks:
            batch = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            if stdout_fd is not None:
                _write_all(stdout_fd, batch)
            self.screen.feed(batch)
            self._note_output()
        if eof:
            self._eof.set()
            return False
        return True

    def _queue(self, data: bytes, done: threading.Event | None = None) -> None:
        self._out += data
        self._queued += len(data)
        if done is not None:
            self._waiters.append((self._queued, done))
        self._flush_to_agent()

    def _flush_to_agent(self) -> None:
        while self._out:
            try:
                n = os.write(self.fd, self._out)
            except BlockingIOError:
                break
            except OSError:
                self._out.clear()
                break
            del self._out[:n]
            self._written += n
        while self._waiters and self._waiters[0][0] <= self._written:
            self._waiters.popleft()[1].set()

    def _take_injections(self) -> None:
        with self._lock:
            items = list(self._inject)
            self._inject.clear()
        for data, done in items:
            self._queue(data, done)

    def _finish_waiters(self) -> None:
        with self._lock:
            items = [done for _, done in self._inject]
            self._inject.clear()
            items += self._acks.values()
            self._acks.clear()
        for done in items:
            done.set()
        while self._waiters:
            self._waiters.popleft()[1].set()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"w")
        except BlockingIOError:
            pass

    # --- the seam ----------------------------------------------------------------------

    def _send(self, data: bytes, timeout: float = 10.0) -> None:
        if self._eof.is_set():
            raise AgentExited("the agent has exited")
        if not self._relaying:
            raise BackendError("the pty relay is not running")
        done = threading.Event()
        helper = self._helper
        if helper is not None:

            def register(ident: int) -> None:
                with self._lock:
                    self._acks[ident] = done

            helper.inject(data, register)
        else:
            with self._lock:
                self._inject.append((data, done))
            self._wake()
        if not done.wait(timeout):
            raise BackendError(f"the agent did not read {len(data)} bytes within {timeout:.0f} s")
        if self._eof.is_set():
            raise AgentExited("the agent exited while input was being written")

    def send_text(self, text: str) -> None:
        self._send(text.encode("utf-8"))

    def send_key(self, key: str) -> None:
        self._send(key_bytes(key))

    def paste(self, text: str, *, bracketed: bool = True) -> None:
        data = text.encode("utf-8")
        if bracketed and self.screen.bracketed_paste:
            data = PASTE_START + data + PASTE_END
        else:
            data = data.replace(b"\n", b"\r")
        self._send(data)

    def snapshot(self) -> Snapshot:
        return self.screen.snapshot()

    def output_fd(self) -> int:
        """Readable when output arrived since :meth:`clear_output`."""
        return self._out_r

    def clear_output(self) -> None:
        # Drain first, then re-arm. The other order loses the signal for good:
        # the relay can set the flag and write its byte between the two steps,
        # the drain swallows the byte, and the flag stays set, so the relay
        # never signals again. Output that lands between drain and re-arm is
        # covered by the snapshot the supervisor takes for this signal.
        _drain(self._out_r)
        self._out_flag = False

    def alive(self) -> bool:
        return not self._eof.is_set() and self._child_alive()

    def _child_alive(self) -> bool:
        with self._reap_lock:
            return bool(self.child.isalive())

    def exit_code(self) -> int | None:
        if self.alive():
            return None
        return self._reap()

    def _reap(self) -> int:
        with self._reap_lock:
            if self._exit_code is None:
                try:
                    self.child.wait()
                except pexpect.ExceptionPexpect:
                    pass
                if self.child.signalstatus is not None:
                    self._exit_code = 128 + int(self.child.signalstatus)
                else:
                    self._exit_code = int(self.child.exitstatus or 0)
            return self._exit_code

    def agent_pid(self) -> int | None:
        return int(self.child.pid)

    def held(self) -> bool:
        """No page takes over a pty session's keyboard."""
        return False

    def user_idle_s(self) -> float | None:
        if not self.last_user_input:
            return None
        return time.monotonic() - self.last_user_input

    def resize(self, cols: int, rows: int) -> None:
        self.child.setwinsize(rows, cols)
        self.screen.resize(cols, rows)

    def close(self) -> None:
        if self._child_alive():
            kill_tree(self.child.pid, signal.SIGTERM, grace=2.0)
        self._reap()
        # The agent is reaped, so a running relay sees EOF at once. Only when
        # it has stopped is the master closed: closing an fd another thread
        # still polls lets the number be reused under it (it would read some
        # other file). Closed here, ptyprocess's 100 ms "let the kernel update
        # process status" sleep is skipped (it would otherwise run at
        # interpreter exit and delay every `run`'s exit).
        if self._relaying and not self._relay_ended.wait(5.0):
            return
        self.child.ptyproc.delayafterclose = 0.0
        with contextlib.suppress(OSError, pexpect.ExceptionPexpect):
            self.child.close(force=True)
        for fd in (self._wake_r, self._wake_w, self._out_r, self._out_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_r = self._wake_w = self._out_r = self._out_w = -1


def _read(fd: int) -> bytes | None:
    """Bytes read; b"" at end of file; None when nothing was ready."""
    try:
        return os.read(fd, READ_SIZE)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, OSError):
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [], 1.0)
            continue
        view = view[n:]

