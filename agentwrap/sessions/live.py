"""Where a session's tmux pane is, and that pane for a page's terminal (issue 42).

:func:`tmux_socket_of` is the one answer to "which tmux server runs this
session" (starting, attaching, stopping, watching). :func:`open_live_pane`
is one rule for every page, this host's ``serve`` and the hub's (through
:mod:`.hub_terminal`): the session is this host's, has not ended and runs
on the tmux backend (a pty session's terminal is the one it was started in).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SessionNotRunning
from ..paths import Paths
from .registry import Registry, SessionRecord

if TYPE_CHECKING:  # imported where used: a hook opens a service and must start fast (no libtmux)
    from ..terminal.live import LivePane


def tmux_socket_of(paths: Paths, rec: SessionRecord) -> Path:
    """The socket of the tmux server a session runs on: the one recorded at
    launch (each session has its own), else the shared server older
    versions used."""
    return Path(rec.tmux_socket) if rec.tmux_socket else paths.tmux_socket


def open_live_pane(paths: Paths, registry: Registry, name: str) -> LivePane:
    """The live pane of session ``name`` (its registry name), watched until ``close()``."""
    rec = registry.get(name)
    if not registry.here(rec):
        raise SessionNotRunning(
            f"the terminal of {name!r} is on its host {rec.host!r}",
            hint="open the hub's page, or the dashboard of that host's `agentwrap serve`")
    if rec.ended is not None:
        raise SessionNotRunning(f"session {name!r} has ended")
    if rec.backend != "tmux":
        raise SessionNotRunning(
            f"session {name!r} runs on the {rec.backend} backend: its terminal is the one"
            " it was started in", hint="sessions on tmux (the default) have a live terminal")
    from ..terminal.live import LivePane

    return LivePane.adopt(tmux_socket_of(paths, rec), rec.name)
