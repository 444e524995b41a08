"""Codex's app-server: agentwrap's client of the server a Codex TUI runs on (issue 24).

Codex 0.169.0 runs its terminal UI on an app-server (``codex app-server
--listen unix://PATH`` and ``codex --remote unix://PATH``). A wrapper that owns
that server sees what the TUI sees as data: thread status, turns, the model's
messages, approval requests with the exact command and cwd; and it can start,
steer and queue the person's input without typing it. What was verified on the
real CLI is in docs/codex-app-server.md.

Here live the typed view of the protocol agentwrap reads (``protocol``), the
JSON-RPC client on the socket (``client``) and the private server process
(``process``). This layer sits above ``terminal`` and below ``detect``,
``queue`` and ``delivery``, which read and drive it; it imports only the
foundation and the ``websockets`` library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from .client import AppServerClient as AppServerClient
    from .process import AppServer as AppServer
    from .process import support_problem as support_problem
    from .protocol import APPROVAL_METHODS as APPROVAL_METHODS
    from .protocol import AgentMessage as AgentMessage
    from .protocol import ApprovalRequest as ApprovalRequest
    from .protocol import Notification as Notification
    from .protocol import ThreadStatus as ThreadStatus
    from .protocol import UserMessage as UserMessage
    from .protocol import agent_message as agent_message
    from .protocol import thread_status as thread_status
    from .protocol import user_message as user_message

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "client": ("AppServerClient",),
    "process": ("AppServer", "support_problem"),
    "protocol": (
        "APPROVAL_METHODS",
        "AgentMessage",
        "ApprovalRequest",
        "Notification",
        "ThreadStatus",
        "UserMessage",
        "agent_message",
        "thread_status",
        "user_message",
    ),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
