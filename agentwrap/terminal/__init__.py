"""Terminal backends behind one small seam (:class:`Terminal`).

Everything above this package (detector, delivery, supervisor) talks to an
agent only through that seam, so the tmux and pty backends are
interchangeable and a scripted stand-in agent exercises the same paths as a
real CLI.

Here live the seam (``base``), the backends (``tmux``: agentwrap's own tmux
server per session, whose panes start through ``launcher``, which gives the
agent its environment from a private file, never an argv; ``pty``: a plain pty relay whose bytes the native helper
``_native/relay.c`` copies, found by ``relay_helper``), process trees
(``proctree``), the screen snapshot every verdict is based on (``screen``), a
screen with its colours as data a browser can draw safely (``styles``) and
the virtual screen that renders the pty backend's output (``vscreen``) and a
tmux pane as the dashboard's terminal streams and types into it (``live``),
through one long-lived tmux control-mode client per watched session
(``control``: no process per look or key, never a person, never sizing),
and a person's keys from a page typed as their own, audited (``takeover``). This
is the bottom layer: it imports only the foundation (``agentwrap.config``,
``paths``, ``errors``), never ``detect``, ``queue``, ``delivery``,
``sessions`` or ``surfaces``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from .base import KEYS as KEYS
    from .base import Display as Display
    from .base import OutputPipe as OutputPipe
    from .base import OutputStream as OutputStream
    from .base import Removable as Removable
    from .base import StatusLine as StatusLine
    from .base import Terminal as Terminal
    from .base import key_bytes as key_bytes
    from .live import Frame as Frame
    from .live import LivePane as LivePane
    from .live import PagePane as PagePane
    from .live import frame_from_wire as frame_from_wire
    from .live import frame_to_wire as frame_to_wire
    from .live import repaint as repaint
    from .live import takeover_marker as takeover_marker
    from .proctree import alive as alive
    from .proctree import descendants as descendants
    from .proctree import kill_pids as kill_pids
    from .proctree import marked as marked
    from .proctree import start_time as start_time
    from .proctree import started_at as started_at
    from .pty import PtyTerminal as PtyTerminal
    from .pty import terminal_size as terminal_size
    from .relay_helper import BINARY as BINARY
    from .relay_helper import helper_status as helper_status
    from .screen import Snapshot as Snapshot
    from .styles import DOCUMENT_SUFFIX as DOCUMENT_SUFFIX
    from .styles import Row as Row
    from .styles import Run as Run
    from .styles import Screen as Screen
    from .styles import read_document as read_document
    from .styles import rows_from_text as rows_from_text
    from .styles import to_document as to_document
    from .takeover import Keyboard as Keyboard
    from .takeover import Takeover as Takeover
    from .tmux import TmuxTerminal as TmuxTerminal
    from .tmux import remove_idle_socket as remove_idle_socket
    from .tmux import server_for as server_for
    from .tmux import tmux_binary as tmux_binary
    from .tmux import tmux_version as tmux_version

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "base": (
        "Display",
        "KEYS",
        "OutputPipe",
        "OutputStream",
        "Removable",
        "StatusLine",
        "Terminal",
        "key_bytes",
    ),
    "live": ("Frame", "LivePane", "PagePane", "frame_from_wire", "frame_to_wire", "repaint",
             "takeover_marker"),
    "proctree": ("alive", "descendants", "kill_pids", "marked", "start_time", "started_at"),
    "pty": ("PtyTerminal", "terminal_size"),
    "relay_helper": ("BINARY", "helper_status"),
    "screen": ("Snapshot",),
    "styles": (
        "DOCUMENT_SUFFIX",
        "Row",
        "Run",
        "Screen",
        "read_document",
        "rows_from_text",
        "to_document",
    ),
    "takeover": ("Keyboard", "Takeover"),
    "tmux": ("TmuxTerminal", "remove_idle_socket", "server_for", "tmux_binary", "tmux_version"),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
