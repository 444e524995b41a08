"""Codex's app-server: everything agentwrap does with the server a Codex TUI runs on (issue 24, 36).

One package, one owner. With ``[run] codex_app_server = true`` (the default)
a Codex launch starts ``codex app-server`` on a private socket and the TUI
as ``codex --remote`` on it (``launch``: also its fallback, its stop, what
``state --explain`` and ``doctor`` say), and a supervisor keeps it running
(``keeper``). The session's state comes from it (``state``, a
:class:`~agentwrap.detect.detector.StructuredSource`: the connection and its
subscription, ``connection``; which thread is the person's, ``threads``), its
approval requests are the session's questions (``approvals``), answered by a
reply to the request (``replies``, the answerer's
:class:`~agentwrap.answers.keys.Replies`), and the queued messages go to the
model through it, steered into a running turn when asked (``delivery``).
``channel`` is its face: the :class:`~agentwrap.sessions.native.NativeChannel`
the agent table names (``agents/codex.py``'s ``native``), through which the
sessions layer reaches all of it without naming it.

Layer: above ``answers`` (it answers through the answerer's protocol, and
delivers through ``delivery``'s hand-over), below ``sessions``; the wire is
``codex_server`` at the bottom (client, protocol, process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from .approvals import SOURCE as SOURCE
    from .approvals import ServerApprovals as ServerApprovals
    from .approvals import ServerQuestion as ServerQuestion
    from .approvals import approval_question as approval_question
    from .channel import CHANNEL as CHANNEL
    from .channel import ServerSession as ServerSession
    from .delivery import AppServerDelivery as AppServerDelivery
    from .delivery import server_takes as server_takes
    from .delivery import steer_priorities as steer_priorities
    from .keeper import AppServerKeeper as AppServerKeeper
    from .launch import describe_app_server as describe_app_server
    from .launch import doctor_app_server as doctor_app_server
    from .launch import socket_path as socket_path
    from .launch import with_app_server as with_app_server
    from .replies import ServerReplies as ServerReplies
    from .state import AppServerState as AppServerState

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "approvals": ("SOURCE", "ServerApprovals", "ServerQuestion", "approval_question"),
    "channel": ("CHANNEL", "ServerSession"),
    "delivery": ("AppServerDelivery", "server_takes", "steer_priorities"),
    "keeper": ("AppServerKeeper",),
    "launch": ("describe_app_server", "doctor_app_server", "socket_path", "with_app_server"),
    "replies": ("ServerReplies",),
    "state": ("AppServerState",),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
