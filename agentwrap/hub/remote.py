"""The hub asking a host, over that host's link, what only the host can do.

Each host link that serves the hub's requests (its handshake carries
:data:`~agentwrap.queue.link_protocol.SERVES_HEADER`: a supervisor's link, not a
command's) is a :class:`Peer`. :meth:`HostLinks.call`, from any thread (the
HTTP API's workers), sends one JSON-RPC request (``screen``, ``stop``:
:data:`~agentwrap.queue.link_protocol.HUB_METHODS`) on the newest
serving link of that host and waits for its answer; the link's reading loop
(:mod:`.server`) hands the answer back by its id (the hub's ids are strings,
:data:`~agentwrap.queue.link_protocol.HUB_ID`, a host's are numbers). A host
with no serving link, or one that does not answer within
:data:`CALL_TIMEOUT_S`, raises :class:`~agentwrap.errors.HostUnreachable`
naming since when the hub last heard from it; a refusal the host sends back
is raised as the :mod:`agentwrap.errors` class it names. Nothing is retried:
a request whose answer was lost (``stop``) is the person's to repeat.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import HostUnreachable
from ..queue import link_protocol as wire

if TYPE_CHECKING:
    from fastapi import WebSocket

    from .roster import Roster

#: How long a host has to answer one request of the hub's.
CALL_TIMEOUT_S = 15.0


@dataclass(eq=False)
class Peer:
    """One serving link of host ``host``: its socket, and the hub's calls awaiting answers."""

    host: str
    ws: WebSocket
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pending: dict[str, asyncio.Future[Any]] = field(default_factory=dict)


class HostLinks:
    """Every host's serving links, and the hub's calls on them (see the module)."""

    def __init__(self, roster: Roster | None = None,
                 timeout_s: float = CALL_TIMEOUT_S) -> None:
        self.roster = roster
        self.timeout_s = timeout_s
        self.loop: asyncio.AbstractEventLoop | None = None  # the server's, set when it runs
        self._peers: dict[str, list[Peer]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def attach(self, host: str, ws: WebSocket, lock: asyncio.Lock | None = None) -> Peer:
        """``ws`` serves ``host``'s sessions; ``lock``: the one every sender on
        that socket takes (the link's replies, its wakes), so frames never mix."""
        peer = Peer(host, ws) if lock is None else Peer(host, ws, lock)
        self.loop = asyncio.get_running_loop()
        with self._lock:
            self._peers.setdefault(host, []).append(peer)
        return peer

    def detach(self, peer: Peer) -> None:
        with self._lock:
            mine = self._peers.get(peer.host, [])
            if peer in mine:
                mine.remove(peer)
            if not mine:
                self._peers.pop(peer.host, None)
        for fut in peer.pending.values():
            if not fut.done():
                fut.set_exception(self._unreachable(peer.host, "its link closed"))
        peer.pending.clear()

    def settle(self, peer: Peer, data: Mapping[str, Any]) -> bool:
        """Hand a response to the call it answers; False if it answers none of the hub's."""
        call_id = data.get("id")
        fut = peer.pending.pop(call_id, None) if isinstance(call_id, str) else None
        if fut is None:
            return False
        if not fut.done():
            if isinstance(data.get("error"), dict):
                fut.set_exception(wire.error_from_wire(data["error"]))
            else:
                fut.set_result(data.get("result"))
        return True

    def _unreachable(self, host: str, why: str) -> HostUnreachable:
        since = None
        if self.roster is not None:
            for report in self.roster.listed()["hosts"]:
                if report["host"] == host:
                    since = float(report["reported"])
        when = ("" if since is None else
                f" since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}")
        return HostUnreachable(f"host {host!r} is unreachable{when}: {why}")

    async def request(self, host: str, method: str, params: Mapping[str, Any]) -> Any:
        with self._lock:
            peers = list(self._peers.get(host, ()))
        if not peers:
            raise self._unreachable(host, "it has no link to the hub")
        peer = peers[-1]  # the newest: an older one may be a link not yet seen dead
        call_id = f"{wire.HUB_ID}{next(self._ids)}"
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        peer.pending[call_id] = fut
        try:
            async with peer.lock:
                await peer.ws.send_text(wire.request(call_id, method, params))
            return await asyncio.wait_for(fut, self.timeout_s)
        except asyncio.TimeoutError:
            raise self._unreachable(host, f"it did not answer within {self.timeout_s:g} s"
                                    ) from None
        except (RuntimeError, OSError):
            raise self._unreachable(host, "its link closed") from None
        finally:
            peer.pending.pop(call_id, None)

    def call(self, host: str, method: str, **params: Any) -> Any:
        """:meth:`request` from a thread other than the server's loop (a
        :class:`~agentwrap.service.remote.RemoteHosts`)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            raise self._unreachable(host, "it has no link to the hub")
        fut = asyncio.run_coroutine_threadsafe(self.request(host, method, params), loop)
        try:
            return fut.result(self.timeout_s + 5)
        except TimeoutError:
            fut.cancel()
            raise self._unreachable(host, "it did not answer") from None
