"""A TCP relay between a host and a plain-HTTP hub on loopback that cuts the
link right after a chosen frame (issue 38's link-cut tests).

The host's link file names the relay; the relay passes the HTTP upgrade
through (without its offer of compression, so frames are plain) and then reads the host's WebSocket frames (masked, as
RFC 6455 wants of a client): once a frame whose JSON matches the armed rule
has been passed on to the hub, both sockets are shut at once, so the hub
has the call but the host never gets its answer, which is the cut whose
outcome the host cannot know. Then the rule is disarmed and the host's
reconnect passes through as usual. Threads and real sockets, no mocks.

``on_cut`` (say, ``kill -9`` of the hub) runs at the cut; ``hold_reply``
moves the cut later: the matched call passes, the hub's answer to it is
read and held back (never reaches the host), and the cut is made then, so
the hub is known to have done the call while the host cannot know it.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentwrap.message import Phase

Rule = Callable[[dict[str, Any]], bool]


def frames(buf: bytearray) -> list[tuple[bytes, bytes]]:
    """Complete frames at the head of ``buf`` (taken from it): each frame's
    raw bytes and its unmasked payload."""
    out: list[tuple[bytes, bytes]] = []
    while len(buf) >= 2:
        size, at = buf[1] & 0x7F, 2
        if size == 126:
            if len(buf) < 4:
                break
            size, at = struct.unpack(">H", buf[2:4])[0], 4
        elif size == 127:
            if len(buf) < 10:
                break
            size, at = struct.unpack(">Q", buf[2:10])[0], 10
        masked = bool(buf[1] & 0x80)
        key = bytes(buf[at:at + 4]) if masked else b""
        end = at + len(key) + size
        if len(buf) < end:
            break
        body = bytes(buf[at + len(key):end])
        if masked:
            body = bytes(b ^ key[i % 4] for i, b in enumerate(body))
        out.append((bytes(buf[:end]), body))
        del buf[:end]
    return out


@dataclass
class LinkCutter:
    """The relay on ``port`` to the hub at ``127.0.0.1:target``."""

    target: int
    rule: Rule | None = None
    cuts: list[dict[str, Any]] = field(default_factory=list)  # the frames cut after
    connections: int = 0
    on_cut: Callable[[], None] | None = None
    hold_reply: bool = False
    _awaited: Any = None  # hold_reply: the id of the call whose answer ends the link
    _sock: socket.socket = field(default_factory=socket.socket)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _open: set[socket.socket] = field(default_factory=set)  # every relayed socket now open

    def start(self) -> LinkCutter:
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def arm(self, rule: Rule) -> None:
        with self._lock:
            self.rule = rule

    def close(self) -> None:
        self._sock.close()

    def cut_all(self) -> int:
        """Cut every link through the relay now, whatever it is doing (the
        soak's link cuts); how many were open."""
        with self._lock:
            socks, self._open = list(self._open), set()
        _shut(*socks)
        return len(socks) // 2

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            try:
                hub = socket.create_connection(("127.0.0.1", self.target))
            except OSError:  # the hub is down (killed at a cut): refuse this one, go on
                client.close()
                continue
            self.connections += 1
            with self._lock:
                self._open.update((client, hub))
            threading.Thread(target=self._up, args=(client, hub), daemon=True).start()
            threading.Thread(target=self._down, args=(hub, client), daemon=True).start()

    def _down(self, src: socket.socket, dst: socket.socket) -> None:
        buf, upgraded = bytearray(), False
        try:
            while data := src.recv(65536):
                if not upgraded:
                    head, sep, rest = data.partition(b"\r\n\r\n")
                    dst.sendall(head + sep)
                    upgraded = bool(sep)
                    data = rest
                buf += data
                for raw, payload in frames(buf):
                    if self._held(payload):
                        self._cut(src, dst)
                        return
                    dst.sendall(raw)
        except OSError:
            pass
        _shut(src, dst)

    def _held(self, payload: bytes) -> bool:
        """The hub's answer to the held call (``hold_reply``)."""
        if self._awaited is None:
            return False
        try:
            data = json.loads(payload)
        except ValueError:
            return False
        if not isinstance(data, dict) or data.get("id") != self._awaited \
                or "method" in data:
            return False
        self._awaited = None
        return True

    def _cut(self, *socks: socket.socket) -> None:
        if self.on_cut is not None:
            self.on_cut()
        _shut(*socks)

    def _cut_after(self, payload: bytes) -> bool:
        try:
            data = json.loads(payload)
        except ValueError:
            return False
        with self._lock:
            if self.rule is None or not isinstance(data, dict) or not self.rule(data):
                return False
            self.rule = None
            self.cuts.append(data)
            if self.hold_reply:  # cut when its answer comes by, not now
                self._awaited = data.get("id")
                return False
            return True

    def _up(self, src: socket.socket, dst: socket.socket) -> None:
        buf, upgraded = bytearray(), False
        try:
            while data := src.recv(65536):
                if not upgraded:
                    head, sep, rest = data.partition(b"\r\n\r\n")
                    dst.sendall(_plain_frames(head) + sep)
                    upgraded = bool(sep)
                    data = rest
                buf += data
                for raw, payload in frames(buf):
                    dst.sendall(raw)
                    if self._cut_after(payload):
                        self._cut(src, dst)
                        return
        except OSError:
            pass
        _shut(src, dst)


def _plain_frames(head: bytes) -> bytes:
    """The upgrade request without its offer of permessage-deflate, so the
    frames stay readable (the hub then answers without the extension)."""
    return b"\r\n".join(line for line in head.split(b"\r\n")
                         if not line.lower().startswith(b"sec-websocket-extensions:"))


def _shut(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def call_is(method: str, **params: Any) -> Rule:
    """A rule: a request of ``method`` whose params hold ``params``."""
    def rule(data: dict[str, Any]) -> bool:
        got = data.get("params")
        return data.get("method") == method and isinstance(got, dict) and all(
            got.get(k) == v for k, v in params.items())
    return rule


#: each write-ahead call of a delivery, by the phase it records (queue/: claim,
#: pasting, submitting = typed and being verified, submitted, the receipt, finished)
PHASE_CALLS = {
    "claim": call_is("claim_batch", session="api"),
    "pasting": call_is("set_phase", phase=Phase.PASTING.value),
    "submitting": call_is("set_phase", phase=Phase.SUBMITTING.value),
    "submitted": call_is("set_phase", phase=Phase.SUBMITTED.value),
    "attempt": call_is("record_attempt"),
    "finished": call_is("finish"),
}
