"""Another host's pane on the hub's page (issues 38 and 42): the same terminal, over the link.

A page's terminal reads a :class:`~agentwrap.terminal.live.PagePane` and
types through a :class:`~agentwrap.terminal.takeover.Keyboard`; for a
session of another host these are :class:`RemotePane` and
:class:`RemoteKeyboard`, which ask that host (``terminal_*``:
:data:`~agentwrap.queue.link_protocol.TERMINAL_METHODS`, served by
:mod:`agentwrap.sessions.hub_terminal`). One look is one round trip: the
host waits on its pane's own change notifications and answers with the
pane (its unchanged rows left out), so the page's stream loop
(:mod:`agentwrap.surfaces.http.terminal_ws`) runs as it does for a local
pane, a frame budget apart. What the host sends is hostile data:
:func:`~agentwrap.terminal.live.frame_from_wire` checks every value and cleans
every row again. A host that is unreachable raises
:class:`~agentwrap.errors.HostUnreachable`, and the page tries again.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..errors import AgentwrapError, SessionNotRunning

if TYPE_CHECKING:
    from ..sessions.registry import SessionRecord
    from ..terminal.live import Frame
    from .remote import RemoteHosts


def _field(got: Any, key: str, name: str) -> str:
    value = got.get(key) if isinstance(got, dict) else None
    if not isinstance(value, str) or not value.isalnum() or len(value) > 64:
        raise SessionNotRunning(f"the host of {name!r} sent no {key}")
    return value


class RemotePane:
    """Session ``rec``'s pane on its host, watched through the hub's link to it."""

    def __init__(self, remote: RemoteHosts, rec: SessionRecord, address: str) -> None:
        self.remote = remote
        self.host = rec.host
        self.address = address
        self.viewer = _field(remote.call(rec.host, "terminal_open", session=rec.name),
                             "viewer", address)
        self._changes = 0
        self._frame: Frame | None = None  # the last frame the host sent
        self._fresh = False  # the last look brought a frame capture() has not handed out
        self._closed = False

    def _look(self, seen: int | None, wait_s: float) -> None:
        from ..terminal.live import frame_from_wire

        # AgentExited (the host's capture found the session gone) is raised as the host named it
        got = self.remote.call(self.host, "terminal_look", viewer=self.viewer, seen=seen,
                               wait_s=wait_s)
        if not isinstance(got, dict) or not isinstance(got.get("changes"), int):
            raise SessionNotRunning(f"the host of {self.address!r} sent no screen")
        self._changes = int(got["changes"])
        if got.get("same") is True and self._frame is not None:
            self._fresh = True
            return
        try:
            self._frame = frame_from_wire(got.get("frame"), self._frame)
        except ValueError as exc:
            raise SessionNotRunning(f"the host of {self.address!r} sent a bad screen: {exc}"
                                    ) from None
        self._fresh = True

    def changes(self) -> int:
        return self._changes

    def wait_change(self, seen: int, timeout: float) -> int:
        """One look on the host: it waits (``timeout`` at most) for the pane
        to change since ``seen`` and sends it, which :meth:`capture` hands out."""
        self._look(seen, timeout)
        return self._changes

    def capture(self) -> Frame:
        if not self._fresh or self._frame is None:
            self._look(None, 0.0)
        self._fresh = False
        assert self._frame is not None
        return self._frame

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.remote.call(self.host, "terminal_close", viewer=self.viewer)
        except AgentwrapError:
            pass  # the host closes a view nobody looks through (sessions.hub_terminal.IDLE_S)


class RemoteKeyboard:
    """The keyboard of session ``rec`` on its host, held by one page of the hub's."""

    def __init__(self, remote: RemoteHosts, rec: SessionRecord, address: str, *,
                 by: str, client: str, idle_s: float) -> None:
        self.remote = remote
        self.host = rec.host
        self.keyboard = _field(
            remote.call(rec.host, "terminal_takeover", session=rec.name, by=by,
                        client=client or "hub", idle_s=idle_s), "keyboard", address)
        self.last_key = time.monotonic()
        self.ended = False

    def _input(self, kind: str, **params: Any) -> None:
        if self.ended:
            return
        self.last_key = time.monotonic()
        self.remote.call(self.host, "terminal_input", keyboard=self.keyboard, kind=kind, **params)

    def keys(self, data: str) -> None:
        if data:
            self._input("keys", data=data)

    def paste(self, text: str) -> None:
        if text:
            self._input("paste", data=text)

    def resize(self, cols: int, rows: int) -> None:
        self._input("resize", cols=cols, rows=rows)

    def idle_s(self) -> float:
        return time.monotonic() - self.last_key

    def end(self, reason: str) -> None:
        if self.ended:
            return
        self.ended = True
        try:
            self.remote.call(self.host, "terminal_release", keyboard=self.keyboard,
                             reason=reason)
        except AgentwrapError:
            pass  # the host gives back a keyboard nobody types on (its idle limit)
