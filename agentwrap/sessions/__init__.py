"""Sessions: supervised agents, from start to stop.

Here live starting, adopting, attaching to and stopping a session for both
backends (``lifecycle``), the supervisor loop that runs one agent (events ->
snapshot -> detector -> registry: ``supervisor``), the parts it gives turns to
(delivery, answers, telling ...: ``parts``), built in one place (``compose``), the
registry of sessions and their state transitions (``registry``), the
supervisor host that runs many supervisors on threads (``host``), the
machines of a shared store (``hosts``) and, on a host joined to a hub, the
registry that adds the other hosts' sessions the hub knows and this host's
reports of its own (``linked``), and what the hub asks this host to do for its own
sessions over its link (``hub_requests``), the hub's page's live terminal of
them among it (``hub_terminal``). Where a session's tmux pane is, and that
pane for a page's terminal (``live``). Around the agent's own channels: the
hooks and MCP server one launch gets (``channels``), the states its hooks
report and whether its SessionStart hook has run (``signals``), Aider's turn
end from its notifications command (``turn_end``); an agent's native channel, a server of its
own reached through the agent table (``native``: Codex's app-server,
:mod:`agentwrap.app_server`, below this layer); an agent in a container (``boxed``: its
launch, stop and end, over :mod:`agentwrap.containers`). A sender reaches a supervisor within milliseconds
through a datagram (:mod:`agentwrap.datagram`). This layer wires the ones below together: it may import
``delivery``, ``detect``, ``queue``, ``terminal`` and the foundation; only
``surfaces`` (and the application service) import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from .channels import START_CONTEXT as START_CONTEXT
    from .channels import config_json as config_json
    from .channels import describe as describe
    from .channels import parse_version as parse_version
    from .channels import plan as plan
    from .channels import registered_in_background as registered_in_background
    from .channels import server_env as server_env
    from .channels import version_at_least as version_at_least
    from .compose import Companion as Companion
    from .host import host_running as host_running
    from .host import serve as serve
    from .hosts import Forgotten as Forgotten
    from .hosts import HostSeen as HostSeen
    from .hosts import host_name as host_name
    from .lifecycle import RunOptions as RunOptions
    from .lifecycle import adopt as adopt
    from .lifecycle import attach as attach
    from .lifecycle import run_pty as run_pty
    from .lifecycle import start_tmux as start_tmux
    from .lifecycle import stop_many as stop_many
    from .lifecycle import supervise as supervise
    from .linked import LinkedRegistry as LinkedRegistry
    from .linked import record_from_report as record_from_report
    from .linked import reporter as reporter
    from .live import open_live_pane as open_live_pane
    from .live import tmux_socket_of as tmux_socket_of
    from .native import NativeChannel as NativeChannel
    from .native import native_channel as native_channel
    from .registry import Registry as Registry
    from .registry import SessionRecord as SessionRecord
    from .registry import Transition as Transition
    from .signals import write_signal as write_signal

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "channels": (
        "START_CONTEXT",
        "config_json",
        "describe",
        "parse_version",
        "plan",
        "registered_in_background",
        "server_env",
        "version_at_least",
    ),
    "compose": ("Companion",),
    "host": ("host_running", "serve"),
    "hosts": ("Forgotten", "HostSeen", "host_name"),
    "lifecycle": (
        "RunOptions",
        "adopt",
        "attach",
        "run_pty",
        "start_tmux",
        "stop_many",
        "supervise",
    ),
    "linked": ("LinkedRegistry", "record_from_report", "reporter"),
    "live": ("open_live_pane", "tmux_socket_of"),
    "native": ("NativeChannel", "native_channel"),
    "registry": ("Registry", "SessionRecord", "Transition"),
    "signals": ("write_signal",),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
