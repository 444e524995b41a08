"""The hub's ASGI app and process: ``/healthz``, ``/join``, the ``/link`` WebSocket.

A host may hold several links at once (each supervisor's, and a command
run there for its one call), all with the host's one credential: a link
that dies is dropped when its socket closes or its pings stop, so a host
that reconnected before the old socket died simply has one more for a
while. Each link's frames are answered in order by :class:`~.scope.HostCalls` on a
worker thread (the store is synchronous); a frame that is not
``agentwrap.link/1`` closes that link only (code 1002), and the hub goes on
serving every other. A revoked host's links are closed within
:data:`REVOKE_POLL_S` by the watcher, and its credential is refused from
then on. The sessions each host reports are kept in its :class:`~.roster.Roster`.
Push-wake: every message or answer stored for a linked host's session (by
any writer: the store's own events, read at once after a host's ``enqueue``
or a commit announced on the hub's event bus, and every :data:`WAKE_POLL_S`
for a writer the hub does not hear) is pushed to each of that host's links as a
``wake`` notification, so its supervisor claims it without polling; and
when a host's supervisors link (again), each of its sessions with a message
pending is woken on the new link at once (a wake sent while the link was
down found nobody). A host's first serving link, and its last one closing,
are the hub's ``host.linked`` / ``host.silent`` events (:mod:`.liveness`),
nudged to the page's stream at once, as are the states a host reports.
On PostgreSQL the store is a fixed pool of connections (:mod:`agentwrap.queue.pgpool`)
and the keys and roster are tables there too (:mod:`.tables`), so several
hubs on one database are one hub to every host and browser; each hub's
:func:`sweep_expired` ends messages past their TTL, an unreachable host's too.

The existing HTTP API and dashboard are not re-implemented: the command
mounts the app of :mod:`agentwrap.surfaces.http` beside these routes
(``api``), on the hub's service (:mod:`.view`). A supervisor's link (its
handshake says it serves, :data:`~agentwrap.queue.link_protocol.SERVES_HEADER`)
also carries the hub's own requests to that host (:mod:`.remote`): a frame
that answers one of them is handed back to it by its id, never run as a
host's call.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp

from ..errors import (
    AgentwrapError,
    HubListenRefused,
    JoinRefused,
    LinkProtocolError,
    LinkRefused,
)
from ..events import Subscription, announce
from ..message import Status
from ..queue import link_protocol as wire
from ..queue.keys import SessionKeys
from ..queue.link import fingerprint
from ..queue.sqlstore import SQLMessageStore
from .keys import HubKeys
from .liveness import HostWatch
from .remote import HostLinks
from .roster import Roster
from .scope import HostCalls
from .tables import PgTables, Tables

log = logging.getLogger("agentwrap.hub")
REVOKE_POLL_S = 0.5
#: How often the hub reads its store's new events for the wakes it pushes
#: when nothing told it of a commit (one indexed read per hub, whatever the
#: number of hosts and sessions): a host's own ``enqueue`` on a link and a
#: commit announced on the hub's bus are pushed at once, without the wait;
#: the poll is for a writer the hub does not hear (a second hub on the same
#: PostgreSQL).
WAKE_POLL_S = 0.5
SWEEP_S = 1.0  # how often the hub looks for messages past their TTL
HUB_NAME = "hub"


def open_hub_store(state_dir: Path, url: str = "", pool_size: int = 0,
                   events_dir: Path | None = None) -> SQLMessageStore:
    """The hub's store: ``url`` (PostgreSQL, on a pool of ``pool_size``
    connections: :data:`~agentwrap.queue.pgpool.POOL_SIZE` unless given), else
    ``hub.db`` in ``state_dir``; rows keyed ``HOST/NAME`` as on any shared store.
    ``events_dir``: each commit that records events is announced there (the
    hub's own event bus), so the hub's SSE and WebSocket streams hear what a
    host's link wrote (its reported states, its phases) at once, not at their
    next keep-alive recheck."""
    if url:
        from ..queue.pgpool import POOL_SIZE, PooledPgDatabase
        from ..queue.postgres import PostgresMessageStore

        pool = PooledPgDatabase(url, max_size=pool_size or POOL_SIZE, events_dir=events_dir)
        return PostgresMessageStore(url, host=HUB_NAME, database=pool, events_dir=events_dir)
    from ..queue.sqlite import SQLiteMessageStore

    store = SQLiteMessageStore(state_dir / "hub.db", events_dir=events_dir)
    store.keys = SessionKeys(HUB_NAME, shared=True)
    return store


def _pg_tables(store: SQLMessageStore | None, owner: str) -> Tables | None:
    """The hub's PostgreSQL tables for ``owner`` when ``store`` is on a pool there."""
    db = getattr(store, "database", None)
    if db is None:  # SQLite: no psycopg imported
        return None
    from ..queue.pgpool import PooledPgDatabase

    return PgTables(db, owner) if isinstance(db, PooledPgDatabase) else None


def hub_keys(state_dir: Path, store: SQLMessageStore | None = None) -> HubKeys:
    """The hub's keys: in its PostgreSQL when ``store`` is there (every hub on
    it knows every host), else ``hub-keys.db`` in ``state_dir``."""
    return HubKeys(_pg_tables(store, "keys") or state_dir / "hub-keys.db")


def hub_roster(state_dir: Path, store: SQLMessageStore | None = None) -> Roster:
    """The hub's roster, where :func:`hub_keys` keeps the keys."""
    return Roster(_pg_tables(store, "roster") or state_dir / "hub-sessions.db")


async def sweep_expired(store: SQLMessageStore, every_s: float) -> None:
    """End the hub's messages past their TTL ``expired`` (hosts may not sweep the
    whole store, :mod:`.scope`, and an unreachable host cannot): one read when
    nothing is due; several hubs on one PostgreSQL may sweep at once, as
    supervisors on one shared store do (rows locked, skipped, each ended once)."""
    while True:
        await asyncio.sleep(every_s)
        try:
            if await asyncio.to_thread(store.overdue):
                ended = await asyncio.to_thread(store.expire_overdue)
                if ended:
                    log.info("%d message(s) expired on the hub", ended)
        except AgentwrapError as exc:  # the store is down for now: next round
            log.warning("the hub's expiry sweep failed: %s", exc.message)


def cert_pin(cert_file: Path | None) -> str:
    """What join codes bind: the certificate's fingerprint (20 hex), or ``plain``."""
    if cert_file is None:
        return "plain"
    pem = cert_file.read_text()
    return fingerprint(ssl.PEM_cert_to_DER_cert(pem))[:20]


def check_listen(host: str, tls: bool) -> None:
    """Plain HTTP only on loopback (:class:`HubListenRefused`)."""
    if tls:
        return
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise HubListenRefused(f"the hub will not serve plain HTTP on {host}: it is not loopback")


def revoke(store: SQLMessageStore, keys: HubKeys, host: str, roster: Roster | None = None
           ) -> int:
    """Revoke ``host``, drop its reported sessions (``roster``) and end its
    sessions' pending messages ``failed`` naming it; the count of messages ended."""
    if not keys.revoke(host):
        raise LinkRefused(f"no joined host {host!r} to revoke",
                          hint="`agentwrap hub hosts` lists the hosts that joined")
    if roster is not None:
        roster.forget(host)
    prefix = f"{host}/"
    waiting = [m.id for m in store.history(None, limit=100_000,
                                           statuses=[Status.PENDING, Status.DELIVERING])
               if m.session.startswith(prefix)]
    if not waiting:
        return 0
    return store.finish(Status.FAILED, f"host {host!r} was revoked on the hub",
                        message_ids=waiting)


def create_hub_app(store: SQLMessageStore, keys: HubKeys, pin: str,
                   api: ASGIApp | None = None, roster: Roster | None = None,
                   remote: HostLinks | None = None, events_dir: Path | None = None) -> FastAPI:
    """The hub's app over ``store`` (see the module); ``api`` mounted at ``/``;
    the sessions hosts report kept in ``roster``; the links that serve the
    hub's requests in ``remote`` (what ``api``'s service asks a host);
    ``events_dir``: the hub's event bus, nudged when the hub writes an event
    of its own (a host's states, a host gone silent), so the page's stream
    reads it at once."""
    links: dict[str, set[WebSocket]] = {}  # each linked host's open links
    send_locks: dict[WebSocket, asyncio.Lock] = {}  # one sender at a time on each link
    remote = remote if remote is not None else HostLinks(roster)
    watch = HostWatch(store, roster, events_dir)
    serving: dict[str, int] = {}  # each host's serving links (its supervisors')

    async def wake_waiting(host: str, ws: WebSocket, lock: asyncio.Lock) -> None:
        """A wake after a reconnect (s44-hubans): each of ``host``'s sessions
        with a message pending (queued while its link was down: that wake
        found no link) is woken on the new link at once, so its supervisor
        claims it now rather than at its next safety poll."""
        prefix = f"{host}/"
        try:
            waiting = await asyncio.to_thread(store.history, None, 100_000, [Status.PENDING])
        except AgentwrapError as exc:
            log.warning("the hub cannot read %s's waiting messages: %s", host, exc.message)
            return
        names = sorted({m.session[len(prefix):] for m in waiting if m.session.startswith(prefix)})
        for name in names:
            with contextlib.suppress(Exception):  # a dying link: its own handler ends it
                async with lock:
                    await ws.send_text(wire.notification(wire.WAKE, {"session": name}))

    async def watch_revoked() -> None:
        while True:
            await asyncio.sleep(REVOKE_POLL_S)
            if not links:
                continue
            revoked = {h.name for h in await asyncio.to_thread(keys.hosts) if h.revoked}
            for name in [n for n in links if n in revoked]:
                for ws in links.pop(name):
                    with contextlib.suppress(Exception):
                        await ws.close(4003, "revoked")

    kick = asyncio.Event()  # a link stored a message: push its wake now

    async def push_wakes() -> None:
        """Push-wake (issue 38): each message or answer stored for a linked
        host's session, by whatever writer (a host's link, the hub's API, a
        second hub on the same PostgreSQL), becomes one ``wake`` on each of
        that host's links. The events are the store's own, read in order from
        where the hub started, at once when a commit is announced on the
        hub's event bus (its own API's sends, a host's enqueue) and every
        :data:`WAKE_POLL_S` for a writer that announces nowhere the hub hears
        (a second hub on the same PostgreSQL); a wake that finds no link is
        simply not sent (the supervisor claims at its start and at its safety poll)."""
        after = await asyncio.to_thread(store.last_event_id)
        loop = asyncio.get_running_loop()
        bus = Subscription(events_dir) if events_dir is not None else None
        if bus is not None:  # a commit announced on the hub's bus (its API's sends): look now

            def heard(bus: Subscription = bus) -> None:
                bus.drain()
                kick.set()

            loop.add_reader(bus.fileno(), heard)
        try:
            await _push_wakes(after)
        finally:
            if bus is not None:
                loop.remove_reader(bus.fileno())
                bus.close()

    async def _push_wakes(after: int) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(kick.wait(), WAKE_POLL_S)
            kick.clear()
            try:
                got = await asyncio.to_thread(store.events, after, kinds=sorted(wire.WAKE_KINDS),
                                              limit=1000)
            except AgentwrapError as exc:  # the store away: the next poll again
                log.warning("the hub cannot read its store's events: %s", exc.message)
                continue
            woken: set[tuple[str, str]] = set()
            for event in got:
                after = max(after, event.id)
                host, sep, name = event.session.partition("/")
                if sep:
                    woken.add((host, name))
            for host, name in sorted(woken):
                frame = wire.notification(wire.WAKE, {"session": name})
                for ws in list(links.get(host, ())):
                    lock = send_locks.get(ws)
                    if lock is None:  # the link is going
                        continue
                    with contextlib.suppress(Exception):  # a dying link: its own handler ends it
                        async with lock:
                            await ws.send_text(frame)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(watch_revoked()), asyncio.create_task(push_wakes()),
                 asyncio.create_task(sweep_expired(store, SWEEP_S)),
                 asyncio.create_task(watch.watch())]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()

    app = FastAPI(title="agentwrap hub", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.links = links
    app.state.remote = remote

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"ok": True, "protocol": wire.PROTOCOL, "links": len(links),
                "sockets": sum(len(s) for s in links.values())}

    @app.post("/join")
    async def join(request: Request) -> JSONResponse:
        try:
            body = json.loads(await request.body())
            code, host = str(body["code"]), str(body["host"])
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "JoinRefused", "detail": "a join needs code and host"},
                                status_code=400)
        try:
            credential = await asyncio.to_thread(keys.join, code, host)
        except (JoinRefused, AgentwrapError) as exc:
            return JSONResponse(exc.to_json(), status_code=403)
        log.info("host %s joined", host)
        return JSONResponse({"host": host, "credential": credential, "protocol": wire.PROTOCOL})

    @app.websocket("/link")
    async def link(ws: WebSocket) -> None:
        host = ws.headers.get("agentwrap-host", "")
        auth = ws.headers.get("authorization", "")
        credential = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        if wire.SUBPROTOCOL not in ws.scope.get("subprotocols", []):
            await ws.close(1002, f"speak {wire.PROTOCOL}")
            return
        try:
            await asyncio.to_thread(keys.check, host, credential)
        except (LinkRefused, AgentwrapError):
            await ws.close(4003, "refused")  # before accept: the handshake gets 403
            return
        await ws.accept(subprotocol=wire.SUBPROTOCOL)
        send_lock = send_locks[ws] = asyncio.Lock()
        links.setdefault(host, set()).add(ws)
        calls = HostCalls(store, host, roster, remote)
        # a supervisor's link serves the hub's requests for its host's sessions
        peer = remote.attach(host, ws, send_lock) if ws.headers.get(wire.SERVES_HEADER) else None
        log.info("host %s linked", host)
        if peer is not None:
            serving[host] = serving.get(host, 0) + 1
            if serving[host] == 1:
                with contextlib.suppress(Exception):  # the store away: nothing else depends
                    await asyncio.to_thread(watch.linked, host)
            waking = asyncio.create_task(wake_waiting(host, ws, send_lock))
        try:
            while True:
                frame = await ws.receive_text()
                try:
                    data = wire.parse(frame)
                    if wire.is_response(data):  # an answer to one of the hub's requests
                        if peer is None or not remote.settle(peer, data):
                            log.debug("host %s answered no request of the hub's", host)
                        continue
                    reply = await asyncio.to_thread(calls.answer_parsed, data)
                except LinkProtocolError:
                    log.warning("host %s sent a frame that is not %s: link closed", host,
                                wire.PROTOCOL)
                    await ws.close(1002, f"not {wire.PROTOCOL}")
                    return
                async with send_lock:
                    await ws.send_text(reply)
                if calls.last_method == "enqueue":
                    kick.set()
                elif calls.roster_changed and events_dir is not None:  # a report that changed
                    await asyncio.to_thread(announce, events_dir)  # its states: on the page now
        except (WebSocketDisconnect, RuntimeError, KeyError):
            return
        finally:
            send_locks.pop(ws, None)
            if peer is not None:
                waking.cancel()
                remote.detach(peer)
                serving[host] -= 1
                if not serving[host]:
                    del serving[host]
                    with contextlib.suppress(Exception):  # the store away: the watch says it
                        await asyncio.to_thread(watch.unlinked, host)
            mine = links.get(host)
            if mine is not None:
                mine.discard(ws)
                if not mine:
                    links.pop(host, None)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(keys.seen, host)

    if api is not None:
        app.mount("/", api)
    return app


def run_hub(state_dir: Path, *, listen: str = "127.0.0.1:8787", url: str = "",
            tls_cert: Path | None = None, tls_key: Path | None = None,
            api: ASGIApp | None = None, remote: HostLinks | None = None,
            pool_size: int = 0, store: SQLMessageStore | None = None,
            events_dir: Path | None = None) -> None:
    """Serve the hub until stopped (``agentwrap hub``); ``store``: the hub's
    store when the caller opened it (to lend it to the HTTP API too), closed
    here at the end as one this opens."""
    import uvicorn

    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if (tls_cert is None) != (tls_key is None):
        raise HubListenRefused("--tls-cert and --tls-key go together",
                               hint="give both files, or neither (loopback only)")
    check_listen(host, tls_cert is not None)
    if store is None:
        store = open_hub_store(state_dir, url, pool_size)
    keys = hub_keys(state_dir, store)
    roster = hub_roster(state_dir, store)
    if remote is not None and remote.roster is None:
        remote.roster = roster
    app = create_hub_app(store, keys, cert_pin(tls_cert), api, roster, remote, events_dir)
    try:
        uvicorn.run(app, host=host, port=int(port), log_level="warning",
                    ssl_certfile=None if tls_cert is None else str(tls_cert),
                    ssl_keyfile=None if tls_key is None else str(tls_key),
                    ws="websockets", ws_max_size=8 * 1024 * 1024)
    finally:
        store.close()
