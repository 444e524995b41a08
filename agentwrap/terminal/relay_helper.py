"""The compiled relay helper (``agentwrap/terminal/_native/relay.c``): finding it and
speaking its pipe protocol.

Why it exists: a pty hands out at most ~4 KB per read, so a fast agent means
tens of thousands of read/write pairs a second, and CPython's per-pair cost
plus the GIL it shares with the detector held the in-process relay to
0.6-0.9x of ``script(1)``. The helper copies bytes like ``script`` does and
tees a copy to this process; when the copy's pipe is full (a flood) it stops
copying, keeps only the output's latest 32 KB and sends that tail once the
output pauses or every 20 ms, after a "gap" event saying where bytes are
missing, so the virtual screen resyncs from the tail exactly as its own
backlog overflow would.

The binary is built when agentwrap is installed (``hatch_build.py``) if a C
compiler is present. Without it the pure-Python relay in ``pty.py`` is used;
``agentwrap doctor`` says which one a run will get.
"""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..config import RELAY_MODES
from ..errors import BackendError, RelayHelperMissing

PROTOCOL = "1"  # must match RELAY_PROTOCOL in relay.c
BINARY = Path(__file__).resolve().parent / "_native" / "agentwrap-relay"
# The tee pipe keeps Linux's default 64 KB on purpose: a small pipe fills
# within a fraction of a millisecond of a flood, after which the helper
# sends only the output's tail a few times a second (see relay.c).
_READ_SIZE = 1 << 16
_EVENT = struct.Struct("=cQ")
_FRAME = struct.Struct("=II")


def helper_status() -> tuple[Path | None, str]:
    """(binary or None, a sentence saying why) for ``doctor`` and ``auto``."""
    if not BINARY.exists():
        return None, f"not built ({BINARY.name} missing: no C compiler when agentwrap was installed)"
    if not os.access(BINARY, os.X_OK):
        return None, f"{BINARY} is not executable"
    try:  # run without arguments, it names the protocol it speaks and exits 64
        probe = subprocess.run([str(BINARY)], capture_output=True, text=True, check=False,
                               timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{BINARY} does not run here ({exc}): reinstall agentwrap"
    if probe.returncode != 64 or f"protocol {PROTOCOL} expected" not in probe.stderr:
        return None, f"{BINARY} speaks another protocol (stale build: reinstall agentwrap)"
    return BINARY, f"native ({BINARY})"


def choose_helper(mode: str) -> Path | None:
    """The helper binary for relay ``mode``; None means the Python relay."""
    if mode not in RELAY_MODES:
        raise BackendError(f"unknown relay {mode!r}", hint=f"use one of {', '.join(RELAY_MODES)}")
    if mode == "python":
        return None
    binary, why = helper_status()
    if binary is None and mode == "native":
        raise RelayHelperMissing(f"the native relay is not available: {why}")
    return binary


@dataclass
class HelperEvents:
    """What the helper reported, decoded from its event records."""

    typed: bool = False  # the person typed since the last decode
    done: list[int] = field(default_factory=list)  # injection ids written in full
    gaps: list[int] = field(default_factory=list)  # tee offsets after which bytes were dropped
    bracketed: bool | None = None  # the latest bracketed-paste mode, if it changed
    closed: bool = False  # the agent's side of the pty closed


class HelperProcess:
    """One running helper and the three pipes to it.

    ``read_output`` yields the tee in order, split at gaps (``None`` marks a
    gap: the bytes before it and after it are not contiguous). ``inject``
    frames bytes for the agent and returns an id the helper will report back
    once every byte is written.
    """

    def __init__(self, binary: Path, master_fd: int, stdin_fd: int | None,
                 stdout_fd: int | None) -> None:
        tee_r, tee_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        ev_r, ev_w = os.pipe()
        keep = [master_fd, tee_w, ctl_r, ev_w]
        keep += [fd for fd in (stdin_fd, stdout_fd) if fd is not None]
        argv = [str(binary), PROTOCOL, *(str(fd) for fd in keep[:4]),
                str(-1 if stdin_fd is None else stdin_fd), str(-1 if stdout_fd is None else stdout_fd)]
        try:
            self.proc = subprocess.Popen(argv, pass_fds=tuple(keep))
        finally:
            for fd in (tee_w, ctl_r, ev_w):
                os.close(fd)
        self.tee_fd, self.events_fd, self._ctl_fd = tee_r, ev_r, ctl_w
        os.set_blocking(tee_r, False)
        os.set_blocking(ev_r, False)
        self._ctl_lock = threading.Lock()
        self._next_id = 0
        self._event_buf = b""
        self._tee_pos = 0  # tee bytes handed out so far
        self._gaps: deque[int] = deque()
        self.tee_eof = False
        self.events_eof = False

    # --- to the helper --------------------------------------------------------------

    def inject(self, data: bytes, register: Callable[[int], None]) -> None:
        """Queue ``data`` for the agent; ``register(id)`` runs before the helper
        can possibly report the id back."""
        with self._ctl_lock:
            self._next_id += 1
            ident = self._next_id
            register(ident)
            frame = _FRAME.pack(ident, len(data)) + data
            view = memoryview(frame)
            try:
                while view:
                    view = view[os.write(self._ctl_fd, view):]
            except OSError as exc:
                raise BackendError(f"the relay helper stopped taking input: {exc.strerror}") from None

    # --- from the helper ------------------------------------------------------------

    def read_events(self) -> HelperEvents:
        got = HelperEvents()
        chunks = [self._event_buf]
        while not self.events_eof:
            try:
                data = os.read(self.events_fd, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                self.events_eof = True
            chunks.append(data)
        buf = b"".join(chunks)
        whole = len(buf) - len(buf) % _EVENT.size
        self._event_buf = buf[whole:]
        for kind, value in _EVENT.iter_unpack(buf[:whole]):
            if kind == b"I":
                got.typed = True
            elif kind == b"D":
                got.done.append(value)
            elif kind == b"G":
                got.gaps.append(value)
            elif kind == b"B":
                got.bracketed = bool(value)
            elif kind == b"E":
                got.closed = True
        self._gaps.extend(got.gaps)
        return got

    def read_output(self) -> bytes | None:
        """Everything the tee holds now (b"" if nothing, None at its end)."""
        chunks: list[bytes] = []
        while True:
            try:
                data = os.read(self.tee_fd, _READ_SIZE)
            except BlockingIOError:
                break
            if not data:
                self.tee_eof = True
                break
            chunks.append(data)
        if not chunks:
            return None if self.tee_eof else b""
        return b"".join(chunks)

    def split_at_gaps(self, data: bytes) -> Iterator[bytes | None]:
        """``data`` (the next tee bytes) in contiguous pieces, ``None`` between
        pieces a gap separates. Call after :meth:`read_events`, which learns
        of every gap the helper reported before it wrote these bytes."""
        start = self._tee_pos
        end = start + len(data)
        cut = 0
        while self._gaps and self._gaps[0] <= end:
            at = max(self._gaps.popleft() - start, cut)
            if at > cut:
                yield data[cut:at]
            cut = at
            yield None
        if cut < len(data):
            yield data[cut:] if cut else data
        self._tee_pos = end

    def close(self) -> int:
        """Wait for the helper to end, then close this side's pipes."""
        code = self.proc.wait()
        for fd in (self.tee_fd, self.events_fd, self._ctl_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        return code
