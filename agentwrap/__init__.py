"""agentwrap: supervise terminal coding agents and deliver context into them.

The public API is small: profiles (how to read an agent), the detector (what
state it is in), the backends (how to drive its terminal) and the message
store (what to deliver). The ``agentwrap`` command is built on these.

The layers, top to bottom (docs/architecture.md draws them; the import
contract in ``pyproject.toml`` holds them): ``surfaces/`` (the command, the
HTTP API, MCP, the hooks), ``hub/`` (the hub hosts link to, issue 38), ``feedback/``,
``service/`` (the one application API), ``sessions/``, ``app_server/`` (Codex's app-server,
one owner), ``answers/``, ``delivery/`` and ``continuity/``, ``agents/`` (one module per agent
CLI), ``detect/``, ``queue/`` and ``containers/`` (an agent in Docker or Podman: engine,
mounts, box), ``codex_server/`` (the app-server's wire),
``terminal/``; and the foundation every layer may import: ``config``,
``paths``, ``errors``, ``audit``, ``message`` (a message's data), ``events``
(the event bus), ``datagram`` (the wake-up sockets), ``exports`` (what a
package offers, imported on first use), ``session_options`` (what a
session was launched with) and ``hook_wire`` (what the hook clients and the
supervisor's hook server say to each other, and hook.c repeats).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .detect.states import Reading, State
    from .errors import AgentwrapError

__all__ = ["AgentwrapError", "Reading", "State", "__version__"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """The public names, imported when first used: every process of agentwrap
    imports this package first, and an agent's hook (a new process at every
    tool call, which the agent waits for) uses none of them."""
    if name in ("Reading", "State"):
        from .detect import states

        return getattr(states, name)
    if name == "AgentwrapError":
        from .errors import AgentwrapError

        return AgentwrapError
    raise AttributeError(f"module 'agentwrap' has no attribute {name!r}")
