"""Terminal backends behind one small seam (:class:`Terminal`).

Everything above this package (detector, delivery, supervisor) talks to an
agent only through that seam, so the tmux and pty backends are
interchangeable and a scripted stand-in agent exercises the same paths as a
real CLI.
"""

from .base import KEYS, Terminal, key_bytes

__all__ = ["KEYS", "Terminal", "key_bytes"]
