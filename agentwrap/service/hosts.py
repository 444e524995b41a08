"""The hosts of the store as surfaces show and steer them (issue 23):
``agentwrap hosts`` and ``GET /api/hosts``, and forgetting a machine gone for
good (``agentwrap hosts forget``).

A host is known by its heartbeat row and by the sessions recorded on it (one
that never beat still has its sessions), so both are read. On SQLite, one
machine, the only host is this one. Forgetting is the registry's one
transaction (:meth:`Registry.forget_host`); what is added here is the audit
line with who asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..audit import AuditLog
from ..queue.store import MessageStore
from ..sessions.hosts import Forgotten, HostSeen
from ..sessions.registry import Registry


@dataclass(frozen=True)
class HostView:
    """One host as ``agentwrap hosts`` shows it: its heartbeat as seen now
    (``seen``; None on SQLite, where nothing beats), whether it is this host,
    the sessions running there and the messages waiting for them."""

    name: str
    here: bool
    seen: HostSeen | None
    sessions: list[str]
    pending: int

    @property
    def liveness(self) -> str:
        """``up`` or ``unreachable`` (this host is up: it is the one asking)."""
        return "up" if self.here or self.seen is None else self.seen.liveness

    def to_json(self) -> dict[str, object]:
        beat = None if self.seen is None or not self.seen.heartbeat else self.seen.heartbeat
        return {"name": self.name, "here": self.here, "liveness": self.liveness,
                "lastBeat": beat,
                "unreachableSince": beat if self.liveness == "unreachable" else None,
                "sessions": self.sessions, "pending": self.pending}


class Hosts:
    """The store's hosts, and forgetting one."""

    def __init__(self, store: MessageStore, registry: Registry, audit: AuditLog) -> None:
        self.store = store
        self.registry = registry
        self.audit = audit

    def listed(self) -> list[HostView]:
        """Every host the store knows, this one first, then by name."""
        reg = self.registry
        seen = reg.hosts()  # empty on SQLite
        running: dict[str, list[str]] = {}
        pending: dict[str, int] = {}
        for rec in reg.list(include_ended=True):
            host = rec.host if reg.db.shared and rec.host else reg.host
            waiting = self.store.pending_count(reg.address(rec))
            if waiting:  # a forgotten host's ended sessions wait for nothing: it stays gone
                pending[host] = pending.get(host, 0) + waiting
            if rec.ended is None:
                running.setdefault(host, []).append(rec.name)
        names = sorted({reg.host, *seen, *running, *pending}, key=lambda n: (n != reg.host, n))
        return [HostView(n, n == reg.host,
                         seen.get(n) or (HostSeen(n, 0.0, 0.0, False) if reg.db.shared else None),
                         running.get(n, []), pending.get(n, 0))
                for n in names]

    def forget(self, name: str, *, by: str) -> Forgotten:
        """Forget a host gone for good (:meth:`Registry.forget_host`), audited."""
        done = self.registry.forget_host(name)
        self.audit.write(event="host_forgotten", host=name, sessions=done.sessions,
                         failed=done.failed, by=by)
        return done
