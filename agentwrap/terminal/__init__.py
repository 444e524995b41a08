"""Terminal backends behind one small seam (:class:`Terminal`).

Everything above this package (detector, delivery, supervisor) talks to an
agent only through that seam, so the tmux and pty backends are
interchangeable and a scripted stand-in agent exercises the same paths as a
real CLI.

Here live the seam (``base``), the backends (``tmux``: agentwrap's own tmux
server per session; ``pty``: a plain pty relay whose bytes the native helper
``_native/relay.c`` copies, found by ``relay_helper``), process trees
(``proctree``), the screen snapshot every verdict is based on (``screen``) and
the virtual screen that renders the pty backend's output (``vscreen``). This
is the bottom layer: it imports only the foundation (``agentwrap.config``,
``paths``, ``errors``), never ``detect``, ``queue``, ``delivery``,
``sessions`` or ``surfaces``.
"""

from .base import KEYS, Terminal, key_bytes

__all__ = ["KEYS", "Terminal", "key_bytes"]
