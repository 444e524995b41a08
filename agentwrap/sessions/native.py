"""An agent's native channel, reached through the agent table (issue 36).

Some agents run on a server of their own that agentwrap starts for them and
reads as data (Codex's app-server: :mod:`agentwrap.app_server`). What a launch,
a supervisor and a session's end ask of such a server is the
:class:`NativeChannel` below, which this layer owns; the agent's record names
the module that provides it (``Agent.native``, loaded on first use by
:func:`native_channel`), so :mod:`.lifecycle`, :mod:`.compose` and
:mod:`.supervisor` never name a server, and an agent without one costs nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..agents.all_agents import AGENTS, get

if TYPE_CHECKING:
    from ..answers.keys import Replies
    from ..audit import AuditLog
    from ..config import Config, RunConfig
    from ..detect.detector import StructuredSource
    from ..detect.profiles import Profile
    from ..message import Kind
    from ..paths import Paths
    from ..queue.store import MessageStore
    from ..session_options import SessionOptions
    from .parts import Turns


class NativeSession(Protocol):
    """The server as one supervisor reads and drives it."""

    @property
    def structured(self) -> StructuredSource:
        """The state it publishes, for the detector (before the screen's)."""
        ...

    @property
    def replies(self) -> Replies:
        """Its questions' answers, sent as replies (never typed)."""
        ...

    @property
    def delivery(self) -> Turns:  # a part: :class:`~.parts.NativeDeliveryPart`
        """Its delivery, before the typing engine's (it takes what is due while idle)."""
        ...

    @property
    def keeper(self) -> Turns:  # a part: :class:`~.parts.NativeKeeperPart`
        """Keeping it running, after the engine and the exit notice."""
        ...

    def takes(self) -> frozenset[Kind]:
        """The kinds of message typing leaves to it now (one channel per session mode)."""
        ...

    def held(self) -> Collection[str]:
        """Its batches in flight, which typing never resumes."""
        ...


class NativeChannel(Protocol):
    """What a launch, a supervisor and a session's end ask of an agent's server."""

    def launch(self, run: RunConfig, profile: Profile, paths: Paths, name: str,
               argv: list[str], env: dict[str, str], cwd: Path,
               ) -> tuple[list[str], dict[str, object]]:
        """The agent's argv on its freshly started server, and what the session's
        options record of it (unchanged argv and the reason when it cannot run)."""
        ...

    def open(self, paths: Paths, cfg: Config, profile: Profile, launched: SessionOptions, *,
             name: str, command: list[str], cwd: Path, env: dict[str, str],
             store: MessageStore, audit: AuditLog, require_ack: bool,
             wake: Callable[[], object], agent_pid: Callable[[], int | None],
             options: Callable[[], SessionOptions], record: Callable[[SessionOptions], None],
             ) -> NativeSession | None:
        """The session's server for its supervisor; None when its launch started none.
        ``wake()`` wakes the supervisor; ``options()``/``record(options)``: the
        session's options as its record holds them now, and a change to them."""
        ...

    def stop(self, paths: Paths, name: str, options: SessionOptions) -> None:
        """The agent has ended: its server stopped, what it left removed."""
        ...

    def describe(self, options: SessionOptions) -> str | None:
        """What ``state --explain`` says of it (None: the launch asked for none)."""
        ...

    def doctor(self, run: RunConfig, exe: str) -> str:
        """What ``doctor`` says of it for the installed ``exe``."""
        ...


def native_channel(agent: str | None) -> NativeChannel | None:
    """The native channel of the agent of that name (a profile's name), or None."""
    spec = get(agent)
    if spec is None or spec.native is None:
        return None
    return _load(spec.native)


def native_channels() -> list[NativeChannel]:
    """Every agent's native channel: a session's end asks each to end what its
    launch left (each knows its own by the session's options), whatever the
    session's profile is called."""
    return [_load(a.native) for a in AGENTS.values() if a.native is not None]


def _load(module: str) -> NativeChannel:
    channel: NativeChannel = importlib.import_module(module).CHANNEL
    return channel


__all__ = ["NativeChannel", "NativeSession", "native_channel", "native_channels"]
