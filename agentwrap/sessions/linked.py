"""A joined host's sessions and every other host's, as its hub knows them (issue 38).

On a host that joined a hub, this host's own sessions are in its own
registry (its supervisors record them there, as on one machine), and the
hub knows every host's from their reports (``register`` on each host's
link, every ``[host] heartbeat_s``: :func:`reporter`). :class:`LinkedRegistry`
is the registry a command there uses: its own rows, plus the other hosts'
sessions from the hub (``sessions`` on the link), so ``ls`` lists every
host's sessions, ``state beta/api`` reads beta's, and ``send beta/api`` is
resolved and admitted here and stored on the hub for beta's supervisor.

Another host's liveness is judged as a shared store's heartbeat is
(:class:`~.hosts.HostSeen`), from its last report on the hub's clock: past
:data:`~.hosts.DEADLINE_PERIODS` of its periods it is ``unreachable since``
that report, its sessions shown with it, never hidden. Nothing here is
written for another host: its rows exist only as read, for one command.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Protocol

from ..detect.states import State
from ..errors import SessionAmbiguous, SessionNotFound
from ..session_options import SessionOptions
from .hosts import HostSeen
from .registry import Registry, SessionRecord

log = logging.getLogger("agentwrap.session")
#: How long one read of the hub's sessions is used again (a command's
#: resolve, admit and list see one view; a long-lived service a fresh one).
FRESH_S = 1.0
_FIELDS = frozenset(f.name for f in fields(SessionRecord)) - {"seen"}


def record_from_report(data: Mapping[str, Any], host: str, seen: HostSeen) -> SessionRecord:
    """One reported session as a record of host ``host`` (the hub's word for
    whose it is, never the report's own), seen as ``seen``."""
    d = {k: v for k, v in data.items() if k in _FIELDS}
    d["state"] = State(d.get("state", State.UNKNOWN.value))
    d["options"] = SessionOptions.from_json(dict(d.get("options") or {}))
    d["command"] = [str(c) for c in d.get("command") or ()]
    d["host"] = host
    d.setdefault("heartbeat", seen.heartbeat)  # not reported: the host's last report is its beat
    return SessionRecord(**d, seen=seen)


def others_from(listing: Mapping[str, Any], here: str) -> list[SessionRecord]:
    """The sessions of every host but ``here`` in the hub's ``sessions``
    answer; a report the hub holds that is not a session record is skipped
    (logged), never guessed at."""
    now = float(listing.get("now") or time.time())
    out: list[SessionRecord] = []
    for report in listing.get("hosts", ()):
        try:
            host = str(report["host"])
            seen = HostSeen.judged(host, float(report["reported"]), float(report["periodS"]), now)
            sessions = list(report.get("sessions") or ())
        except (KeyError, TypeError, ValueError):
            log.warning("the hub's sessions hold a report that is not one: skipped")
            continue
        if host == here:
            continue
        for data in sessions:
            try:
                out.append(record_from_report(data, host, seen))
            except (KeyError, TypeError, ValueError, AttributeError):
                log.warning("host %s reported a session that is not one: skipped", host)
    return out


class SessionsSource(Protocol):
    """Where the other hosts' sessions are read: a joined host's link
    (:class:`~agentwrap.queue.link.HubStore`), or the hub's own roster."""

    @property
    def host(self) -> str: ...

    def sessions(self) -> dict[str, Any]: ...


class LinkedRegistry(Registry):
    """This host's registry plus the other hosts' sessions its hub knows (see the module)."""

    def __init__(self, path: Path, *, hub: SessionsSource, **kwargs: Any) -> None:
        super().__init__(path, host=hub.host, **kwargs)
        self.hub = hub
        self._others: tuple[float, builtins.list[SessionRecord]] | None = None

    def others(self) -> builtins.list[SessionRecord]:
        """The other hosts' sessions (one read of the hub per :data:`FRESH_S`);
        :class:`~agentwrap.errors.HubUnreachable` while the link is down."""
        now = time.monotonic()
        if self._others is None or now - self._others[0] > FRESH_S:
            self._others = (now, others_from(self.hub.sessions(), self.host))
        return self._others[1]

    def _other(self, host: str, name: str) -> SessionRecord | None:
        found = [r for r in self.others() if r.host == host and r.name == name]
        return found[0] if found else None

    def _is_own(self, rec: SessionRecord) -> bool:
        return rec.seen is None

    def list(self, include_ended: bool = False) -> builtins.list[SessionRecord]:
        own = [replace(r, host=self.host) for r in super().list(include_ended)]
        return own + [r for r in self.others() if include_ended or r.ended is None]

    def get(self, name: str) -> SessionRecord:
        host, sep, bare = name.rpartition("/")
        if sep and host != self.host:
            rec = self._other(host, bare)
            if rec is None:
                raise SessionNotFound(f"no session {bare!r} on host {host!r}",
                                      hint="`agentwrap ls` lists every host's sessions")
            return rec
        return replace(super().get(bare), host=self.host)

    def resolve(self, address: str) -> str:
        host, sep, name = address.rpartition("/")
        if sep and host != self.host:
            self.get(address)  # another host's: it must be known there
            return address
        if sep:
            return name
        if super().find(name) is not None:
            return name
        theirs = [r for r in self.others() if r.name == name]
        theirs = [r for r in theirs if r.ended is None] or theirs
        if len(theirs) > 1:
            where = sorted(f"{r.host}/{r.name}" for r in theirs)
            raise SessionAmbiguous(
                f"several hosts have a session named {name!r}: {', '.join(where)}", where,
                hint=f"name one of them HOST/NAME: {where[0]}")
        return f"{theirs[0].host}/{name}" if theirs else name

    def address(self, rec: SessionRecord) -> str:
        return rec.name if self._is_own(rec) else f"{rec.host}/{rec.name}"

    def here(self, rec: SessionRecord) -> bool:
        return self._is_own(rec)

    def local(self, address: str) -> str | None:
        host, sep, name = address.rpartition("/")
        return None if sep and host != self.host else name


#: What a report leaves out of a record: the supervisor's beat changes at every
#: beat, and the hub judges a host by its reports' times (so an idle host's
#: report is its last one again, which the hub stores as one small write).
UNREPORTED = frozenset({"heartbeat"})


def reporter(path: Path, host: str) -> Callable[[], Sequence[Mapping[str, Any]]]:
    """What this host reports to its hub (``register``): its running
    sessions' records but :data:`UNREPORTED`, read from its own registry at
    ``path`` (opened on the first report, in the reporting thread)."""
    opened: builtins.list[Registry] = []

    def snapshot() -> Sequence[Mapping[str, Any]]:
        if not opened:
            opened.append(Registry(path, host=host))
        return [{**{k: v for k, v in r.to_json().items() if k not in UNREPORTED},
                 "host": host} for r in opened[0].list()]

    return snapshot
