"""A page's live terminal and take-over of a session (issue 42).

:meth:`Takeovers.pane` is what a page watches: the session's tmux pane
(:class:`~agentwrap.terminal.live.LivePane`), only for a session of this host
on the tmux backend (:func:`~agentwrap.sessions.live.open_live_pane`).
:meth:`Takeovers.begin` hands one page the keyboard
(:class:`~agentwrap.terminal.takeover.Takeover`: the marker the supervisor
waits for, the audit lines). Another host's session is the hub's to reach
(:mod:`.remote_terminal`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..audit import AuditLog
from ..paths import Paths
from ..sessions.live import open_live_pane
from ..sessions.registry import Registry, SessionRecord

if TYPE_CHECKING:  # imported where used: a hook opens a service and must start fast (no libtmux)
    from ..terminal.live import PagePane
    from ..terminal.takeover import Keyboard
    from .remote import RemoteHosts


class Takeovers:
    """A page's terminal of a session: this host's pane, or another host's
    through the hub (``elsewhere``: its record, when the service has a
    ``remote`` to ask it)."""

    def __init__(self, paths: Paths, registry: Registry, audit: AuditLog) -> None:
        self.paths = paths
        self.registry = registry
        self.audit = audit

    def pane(self, name: str, elsewhere: SessionRecord | None = None,
             remote: RemoteHosts | None = None) -> PagePane:
        """The live pane of session ``name`` (its registry name), if a page can have it."""
        if elsewhere is not None and remote is not None:
            from .remote_terminal import RemotePane

            return RemotePane(remote, elsewhere, name)
        return open_live_pane(self.paths, self.registry, name)

    def begin(self, name: str, elsewhere: SessionRecord | None = None,
              remote: RemoteHosts | None = None, *, by: str, client: str,
              idle_s: float = 120.0) -> Keyboard:
        if elsewhere is not None and remote is not None:
            from .remote_terminal import RemoteKeyboard

            return RemoteKeyboard(remote, elsewhere, name, by=by, client=client, idle_s=idle_s)
        from ..terminal.takeover import Takeover

        return Takeover(open_live_pane(self.paths, self.registry, name), self.audit, name, by,
                        client, idle_s)
