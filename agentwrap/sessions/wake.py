"""Waking a supervisor within milliseconds of a change.

Producers (``agentwrap send``, hooks, servers) first write the message to the
store, then send a one-datagram nudge to the session's unix socket. The nudge
carries no data that matters: if it is lost (supervisor restarting), the
supervisor's slow safety poll finds the message anyway.

The socket lives in the runtime dir, which must be a private dir of ours
(:func:`~agentwrap.paths.private_dir` refuses anything else): only its owner
can reach or replace the socket.
"""

from __future__ import annotations

from ..datagram import Inbox, send
from ..paths import Paths


def notify(paths: Paths, session: str, command: bytes = b"wake") -> bool:
    """Nudge a session's supervisor; False if nobody is listening."""
    return send(paths.wake_socket(session), command)


class WakeSocket(Inbox):
    """The supervisor's end, bound at the session's wake socket."""


__all__ = ["WakeSocket", "notify", "send"]
