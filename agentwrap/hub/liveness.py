"""The hub's word on its hosts' links, as events: a host went silent, a host linked again.

The hub's page and ``events -f`` must hear at once that a host went silent,
not at their next look at the roster. So the hub writes an event to its own
store (the event log every surface follows), and nudges its event bus so the
page's stream reads it at once:

- ``host.silent`` ``{host, reason, since}`` when a host's last serving link
  (its supervisors') closes, or when the host has not reported past its
  deadline (:meth:`~agentwrap.sessions.hosts.HostSeen.judged`: three of its
  periods, a link stalled without a FIN, still open on the hub's side), once
  per silence;
- ``host.linked`` ``{host}`` when its first serving link comes back.

A host's events carry no session (``session`` is empty, ``data.host`` names
the host): they are about the host, and every joined host may read them
(:data:`~agentwrap.queue.link_protocol.VIEW_EVENT_KINDS`). Only the hub's
clock is used, and a host that just linked is given its deadline afresh (its
first report is on its way).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

from ..errors import AgentwrapError
from ..events import announce
from ..queue import link_protocol as wire
from ..queue.sqlstore import SQLMessageStore
from ..sessions.hosts import HostSeen
from .roster import Roster

log = logging.getLogger("agentwrap.hub")
#: How often the hub judges its hosts' reports against their deadlines.
WATCH_S = 1.0


class HostWatch:
    """Which hosts the hub last said were silent (see the module)."""

    def __init__(self, store: SQLMessageStore, roster: Roster | None,
                 events_dir: Path | None = None) -> None:
        self.store = store
        self.roster = roster
        self.events_dir = events_dir
        self.quiet: set[str] = set()  # hosts announced silent, not linked since
        self.linked_at: dict[str, float] = {}  # when each host's first serving link came
        self._lock = threading.Lock()

    def _say(self, kind: str, host: str, **data: object) -> None:
        with self.store._write() as w:
            w.event(time.time(), "", kind, "", host=host, **data)
        if self.events_dir is not None:
            announce(self.events_dir)

    def linked(self, host: str) -> None:
        """Host ``host``'s first serving link came (or came back)."""
        with self._lock:
            self.linked_at[host] = time.time()
            self.quiet.discard(host)
        self._say(wire.HOST_LINKED, host)

    def unlinked(self, host: str, reason: str = "its link to the hub closed") -> None:
        """Host ``host``'s last serving link went: silent, unless said already."""
        with self._lock:
            self.linked_at.pop(host, None)
            if host in self.quiet:
                return
            self.quiet.add(host)
        self._say(wire.HOST_SILENT, host, reason=reason, since=time.time())

    def judge(self, now: float | None = None) -> list[str]:
        """Say ``host.silent`` for each host past its deadline not said yet; those hosts."""
        if self.roster is None:
            return []
        now = time.time() if now is None else now
        late = []
        for report in self.roster.listed(now)["hosts"]:
            host = str(report["host"])
            heard = max(float(report["reported"]), self.linked_at.get(host, 0.0))
            if not HostSeen.judged(host, heard, float(report["periodS"]), now).reachable:
                with self._lock:
                    if host in self.quiet:
                        continue
                    self.quiet.add(host)
                late.append(host)
                self._say(wire.HOST_SILENT, host, reason="no report past its deadline",
                          since=float(report["reported"]))
        return late

    async def watch(self, every_s: float = WATCH_S) -> None:
        """:meth:`judge` every ``every_s`` while the hub serves."""
        while True:
            await asyncio.sleep(every_s)
            try:
                await asyncio.to_thread(self.judge)
            except AgentwrapError as exc:  # the store away for now: the next round
                log.warning("the hub cannot judge its hosts: %s", exc.message)
