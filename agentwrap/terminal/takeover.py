"""A person's keys from a page, typed as their own into a tmux pane (issue 42).

:class:`Takeover` is one page holding one session's keyboard until it gives it
back: the take-over marker (:func:`~.live.takeover_marker`) tells the session's
supervisor a person is at the keyboard (queued messages wait for them as for a
person typing in tmux), and the audit log gets who took over, when, and, when
it ends, for how long and how many keys they typed (never the keys
themselves). It lives beside the pane it types into so that both the service
(a page of this host's ``serve``) and a host serving its hub's page
(:mod:`agentwrap.sessions.hub_terminal`) hand out the same one.
:class:`Keyboard` and :class:`~.live.PagePane` are what a page's terminal
needs of them, so the hub's page drives another host's pane through the same
code (:mod:`agentwrap.service.remote_terminal`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..audit import AuditLog
from ..errors import AgentwrapError, SessionNotRunning

if TYPE_CHECKING:
    from .live import LivePane


class Keyboard(Protocol):
    """What a page's terminal does with the keyboard it holds."""

    def keys(self, data: str) -> None: ...
    def paste(self, text: str) -> None: ...
    def resize(self, cols: int, rows: int) -> None: ...
    def idle_s(self) -> float: ...
    def end(self, reason: str) -> None: ...


# a paste larger than this is refused (what a person pastes, not a file dump)
MAX_PASTE_CHARS = 100_000


class Takeover:
    """One page holding one session's keyboard, until :meth:`end`."""

    def __init__(self, pane: LivePane, audit: AuditLog, session: str, by: str, client: str,
                 idle_s: float = 120.0) -> None:
        self.pane = pane
        self.audit = audit
        self.session = session
        self.by = by
        self.client = client
        self.started = time.time()
        self.last_key = time.monotonic()
        self.keys_sent = 0
        self.ended = False
        self._size: tuple[int, int] | None = None  # the pane's own, before a first resize
        self._mark(idle_s)
        audit.write(event="takeover_started", session=session, by=by, client=client)

    def _mark(self, idle_s: float) -> None:
        """The marker, holding the idle limit: the supervisor's
        :meth:`~agentwrap.terminal.tmux.TmuxTerminal.held` trusts it no longer
        (a ``serve`` that died cannot hold the keyboard for ever)."""
        fd = os.open(self.pane.marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, f"{idle_s:g}\n".encode("ascii"))
        finally:
            os.close(fd)

    def _touch(self) -> None:
        marker: Path = self.pane.marker
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        os.utime(marker)

    def keys(self, data: str) -> None:
        """Type ``data`` as the person's keys (the marker first: the supervisor
        must see the person before their key lands)."""
        if self.ended or not data:
            return
        self._touch()
        self.last_key = time.monotonic()
        self.keys_sent += len(data)
        self.pane.keys(data)

    def paste(self, text: str) -> None:
        if self.ended or not text:
            return
        if len(text) > MAX_PASTE_CHARS:
            raise SessionNotRunning(f"a paste of {len(text)} characters is more than"
                                    f" {MAX_PASTE_CHARS}", hint="paste less at a time")
        self._touch()
        self.last_key = time.monotonic()
        self.keys_sent += len(text)
        self.pane.paste(text)

    def resize(self, cols: int, rows: int) -> None:
        """The pane to the page's size (only while taking over)."""
        if not self.ended and 10 <= cols <= 500 and 3 <= rows <= 200:
            if self._size is None:
                now = self.pane.capture()
                self._size = (now.cols, now.rows)
            self.pane.resize(cols, rows)

    def idle_s(self) -> float:
        return time.monotonic() - self.last_key

    def end(self, reason: str) -> None:
        """Give the keyboard back (once): the marker goes, the audit line says how long."""
        if self.ended:
            return
        self.ended = True
        self.pane.marker.unlink(missing_ok=True)
        if self._size is not None:  # the pane as it was, for everyone else watching
            try:
                self.pane.resize(*self._size)
            except AgentwrapError:
                pass
        self.pane.close()  # its hold on the session's control client
        self.audit.write(event="takeover_ended", session=self.session, by=self.by,
                         client=self.client, reason=reason,
                         duration_s=round(time.time() - self.started, 3), chars=self.keys_sent)
