"""The application service: the one path from every surface to the store.

Surfaces (the CLI today; the HTTP API, MCP tools, hooks and watchers next) are
thin adapters over :class:`Service`. The store already validates content,
applies limits and honours idempotency keys; what needs the *session* lives
here, once: does it exist and still run, how will the message be typed (quoted
in a block, or as is into a shell), may this source have text typed as is, and
waking the session's supervisor once the message is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .config import load_config
from .detect.profiles import load_profile
from .errors import InvalidMessage, SessionNotRunning, UntrustedSource
from .message import Kind, Message, NewMessage
from .paths import Paths
from .queue.store import MessageStore
from .sessions.registry import Registry
from .sessions.wake import notify


@dataclass(frozen=True)
class Sent:
    """What :meth:`Service.send` did."""

    message: Message
    created: bool  # False: an idempotency key returned the first message
    supervised: bool  # False: no supervisor runs; the message waits for `adopt`


class Service:
    """The operations every surface offers, with one set of rules."""

    def __init__(self, paths: Paths, store: MessageStore, registry: Registry) -> None:
        self.paths = paths
        self.store = store
        self.registry = registry

    def send(self, new: NewMessage, *, raw: bool = False) -> Sent:
        """Store ``new`` durably for its session and wake the session's supervisor.

        ``raw``: type the text as is instead of quoting it (an agent's own
        command, a REPL's input). Into a shell every message is raw. Raw text
        is refused unless the user's config trusts ``new.source`` with it, and
        cannot ask for an ACK (nothing would answer). Nothing is stored when a
        check fails.
        """
        rec = self.registry.get(new.session)
        if rec.ended is not None:
            raise SessionNotRunning(
                f"session {new.session!r} has ended; nothing would deliver this",
                hint="`agentwrap ls` shows running sessions",
            )
        profile = load_profile(rec.profile, self.paths)
        kind = Kind.CONTENT
        if raw or profile.raw:
            trusted = load_config(self.paths, Path(rec.cwd)).for_profile(rec.profile).trust
            what = "runs a shell: messages are commands there" if profile.shell else (
                "takes messages as typed" if profile.raw else "would get this text as typed (--raw)"
            )
            if str(new.source) not in trusted.raw_sources:
                raise UntrustedSource(
                    f"session {new.session!r} {what}; source {str(new.source)!r} is not trusted"
                    f" with that (trusted: {', '.join(trusted.raw_sources) or 'none'})"
                )
            if new.require_ack:
                raise InvalidMessage(
                    f"session {new.session!r} {what}; nothing would acknowledge it",
                    hint="leave out --ack",
                )
            kind = Kind.COMMAND
        message, created = self.store.enqueue(new, kind=kind)
        notify(self.paths, new.session)
        return Sent(message, created, supervised=rec.liveness != "stale")
