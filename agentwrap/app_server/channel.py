"""Codex's app-server as the agent's native channel: what sessions asks of it (issue 36).

The agent table names this module (:mod:`agentwrap.agents.codex`'s
``native``); :mod:`agentwrap.sessions.native` loads it for a Codex launch and
reaches everything here through the :class:`~agentwrap.sessions.native.NativeChannel`
it owns, so the supervisor and the composition root never name the server:

* at launch: the TUI's argv on a fresh private server (:mod:`.launch`);
* for a supervisor: one :class:`ServerSession`: the state the detector reads
  (:mod:`.state`), the replies the answerer sends (:mod:`.replies`), the kinds
  of message it takes from typing and its batches in flight (:mod:`.delivery`),
  and its two turns: the delivery before the typing, the keeper (:mod:`.keeper`)
  after it;
* at the agent's end: the server stopped, its socket removed.

Imports of the server's code happen in the methods: the table's hook process
and a launch of another agent load none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..audit import AuditLog
    from ..config import Config, RunConfig
    from ..detect.profiles import Profile
    from ..message import Kind
    from ..paths import Paths
    from ..queue.store import MessageStore
    from ..session_options import SessionOptions
    from .delivery import AppServerDelivery
    from .keeper import AppServerKeeper
    from .replies import ServerReplies
    from .state import AppServerState


@dataclass
class ServerSession:
    """A supervisor's view of the session's app-server (see the module doc)."""

    structured: AppServerState
    replies: ServerReplies
    delivery: AppServerDelivery
    keeper: AppServerKeeper
    store: MessageStore
    name: str

    def takes(self) -> frozenset[Kind]:
        """What typing leaves to the server (:func:`.delivery.server_takes`)."""
        from .delivery import server_takes

        return server_takes(self.structured)

    def held(self) -> Collection[str]:
        """The server's batches in flight: never typed (:func:`.delivery.app_server_batches`)."""
        from .delivery import app_server_batches

        return app_server_batches(self.store, self.name)


class AppServerChannel:
    """The :class:`~agentwrap.sessions.native.NativeChannel` of Codex's app-server."""

    def launch(self, run: RunConfig, profile: Profile, paths: Paths, name: str,
               argv: list[str], env: dict[str, str], cwd: Path,
               ) -> tuple[list[str], dict[str, object]]:
        from .launch import with_app_server

        return with_app_server(run, profile, paths, name, argv, env, cwd)

    def open(self, paths: Paths, cfg: Config, profile: Profile, launched: SessionOptions, *,
             name: str, command: list[str], cwd: Path, env: dict[str, str],
             store: MessageStore, audit: AuditLog, require_ack: bool,
             wake: Callable[[], object], agent_pid: Callable[[], int | None],
             options: Callable[[], SessionOptions], record: Callable[[SessionOptions], None],
             ) -> ServerSession | None:
        """The session's server as its supervisor reads and drives it; None when
        its launch did not start one (the switch off, or it fell back)."""
        if not (launched.app_server and launched.app_server.startswith("unix://")):
            return None
        from .delivery import AppServerDelivery, steer_priorities
        from .keeper import AppServerKeeper
        from .replies import ServerReplies
        from .state import AppServerState

        def changed() -> None:
            wake()

        state = AppServerState(Path(launched.app_server.removeprefix("unix://")),
                               on_change=changed)
        delivery = AppServerDelivery(
            state, store, audit, name, ack_wording=cfg.delivery.ack_wording,
            require_ack=require_ack,
            ack_patterns=[*cfg.delivery.ack_patterns, *profile.ack_patterns],
            syntax=profile.syntax, limit_chars=cfg.delivery.max_injection_bytes,
            ack_timeout_s=cfg.delivery.ack_timeout_s, steer=steer_priorities(cfg.delivery.steer))
        def note_pid(pid: int) -> None:
            record(replace(options(), app_server_pid=pid))

        keeper = AppServerKeeper(paths, name, command, cwd, env, agent_pid,
                                 lambda: options().app_server_pid, note_pid)
        return ServerSession(state, ServerReplies(state), delivery, keeper, store, name)

    def stop(self, paths: Paths, name: str, options: SessionOptions) -> None:
        from .launch import stop_app_server

        stop_app_server(paths, name, options.app_server_pid)

    def describe(self, options: SessionOptions) -> str | None:
        from .launch import describe_app_server

        return describe_app_server(options)

    def doctor(self, run: RunConfig, exe: str) -> str:
        from .launch import doctor_app_server

        return doctor_app_server(run, exe)


#: The one the agent table's ``native`` names (:func:`agentwrap.sessions.native.native_channel`).
CHANNEL = AppServerChannel()

__all__ = ["CHANNEL", "AppServerChannel", "ServerSession"]
