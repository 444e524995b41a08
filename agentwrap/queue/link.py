"""The host's side of the hub (issue 38): its one outbound link, and the store port over it.

:class:`LinkClient` keeps the host's one WebSocket to the hub (TLS pinned to
the certificate the host saw when it joined, or plain on loopback), in a
thread of its own with its own event loop, reconnecting by itself with
exponential backoff and full jitter (a delay drawn uniformly from 0 to
``min(cap, base * 2**n)``, so a hub that restarts is not hit by every host
at once). :class:`HubStore` is :class:`~.store.MessageStore` over that link:
each call is one ``agentwrap.link/1`` request (:mod:`.link_protocol`).

Failing closed: while the link is down every call raises
:class:`~agentwrap.errors.HubUnreachable` (a :class:`~agentwrap.errors.StoreDown`,
exit 75) at once, so a supervisor claims nothing and so types nothing new,
exactly as when a shared PostgreSQL is unreachable. A call in flight when
the link drops raises the same: its outcome is unknown to the host, as a
commit is when a database connection is cut, and the write-ahead discipline
resolves it: the hub's store recorded the phase or it did not, and the
supervisor's recovery reads it back (``in_flight``) once the link is up.
The client never resends a call by itself, so nothing is applied twice
because of the link; the hub makes the calls a supervisor repeats after a
cut idempotent (:mod:`agentwrap.hub.scope`).

One link per process (:func:`shared_client`): every store opened on a
host's link in one process (the supervisor host runs every session's
supervisor, so one WebSocket serves them all) shares one client, closed by
its last user. The hub speaks first only to push a ``wake``
(:data:`~.link_protocol.WAKE`): the session named is woken at once (the
waker :meth:`HubStore.listen` is given), so a settled supervisor claims the
hub's message without waiting for its idle poll.

A host joined to several hubs of one service (two hub processes on one
PostgreSQL: ``agentwrap join URL --also URL2``) dials them in turn: each
attempt that fails, and each link that drops, moves to the next, so a hub
killed sends its hosts to the other within one backoff.

The credential is read from the link file (0600, :func:`load_link`) and
sent only in the handshake's ``Authorization`` header: never in argv, a log
line or an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import (
    AgentwrapError,
    ConfigError,
    HubUnreachable,
    LinkProtocolError,
    LinkRefused,
    QueueError,
)
from ..events import Event, Subscription
from ..message import Attempt, Kind, Message, NewMessage, Phase, Priority, Source, Status
from . import link_protocol as wire
from .store import QueueMetrics, SenderLimit

LINK_FILE = "hub-link.json"
#: How long closing a link waits for a hub request it is running to be answered (the
#: hub's ``stop`` of this link's own session ends the supervisor that holds the link).
SERVING_GRACE_S = 10.0
#: After this host's bus announces a change, how long the reporter waits for
#: more before reporting (a state and its question are one report).
REPORT_COALESCE_S = 0.02
log = logging.getLogger("agentwrap.link")


@dataclass(frozen=True)
class HubLink:
    """What a joined host keeps (0600): the hub's URL, this host's name on it,
    its credential, and the hub's certificate (PEM) it pins ("" on loopback);
    ``also``: more hubs of the same service, ``(url, cert_pem)`` each (two hub
    processes on one PostgreSQL), tried in turn when a link cannot be made or drops."""

    url: str
    host: str
    credential: str
    cert_pem: str = ""
    also: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:  # never the credential
        return f"HubLink(url={self.url!r}, host={self.host!r})"

    def endpoints(self) -> list[HubLink]:
        """This link, then one per ``also`` URL (same host and credential)."""
        return [self, *(HubLink(url, self.host, self.credential, pem)
                        for url, pem in self.also)]

    @property
    def link_url(self) -> str:
        base = self.url.rstrip("/")
        return ("wss://" + base[len("https://"):] if base.startswith("https://")
                else "ws://" + base[len("http://"):]) + "/link"

    def ssl_context(self) -> ssl.SSLContext | None:
        """TLS that trusts exactly the pinned certificate (None: plain, loopback)."""
        if not self.url.startswith("https://"):
            return None
        return pinned_context(self.cert_pem)


def pinned_context(cert_pem: str) -> ssl.SSLContext:
    """A client context whose one trust anchor is ``cert_pem`` (the hub's own
    certificate: partial chains allowed, host names not checked, since the
    certificate itself is what is pinned)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    ctx.load_verify_locations(cadata=cert_pem)
    return ctx


def fingerprint(der: bytes) -> str:
    """A certificate's SHA-256 fingerprint, lowercase hex."""
    return hashlib.sha256(der).hexdigest()


def link_path(state_dir: Path) -> Path:
    return state_dir / LINK_FILE


def save_link(state_dir: Path, link: HubLink) -> Path:
    """Write the link file 0600 (created so: never readable by others, not even briefly)."""
    path = link_path(state_dir)
    tmp = path.with_suffix(".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": link.url, "host": link.host, "credential": link.credential,
                   "certPem": link.cert_pem,
                   "also": [{"url": u, "certPem": pem} for u, pem in link.also]}, f)
    os.replace(tmp, path)
    return path


def load_link(state_dir: Path) -> HubLink | None:
    """This host's link file, or None if it never joined a hub."""
    path = link_path(state_dir)
    try:
        st = path.stat()
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the hub link file {path} cannot be read ({type(exc).__name__})",
                          hint="join the hub again: `agentwrap join URL CODE`") from None
    if st.st_mode & 0o077:
        raise ConfigError(f"the hub link file {path} is readable by others",
                          hint=f"chmod 600 {path}, then ask the hub for a new code: it may be"
                          " copied")
    try:
        also = tuple((str(a["url"]), str(a.get("certPem", ""))) for a in data.get("also", []))
        return HubLink(str(data["url"]), str(data["host"]), str(data["credential"]),
                       str(data.get("certPem", "")), also)
    except (KeyError, TypeError, AttributeError):
        raise ConfigError(f"the hub link file {path} is incomplete",
                          hint="join the hub again: `agentwrap join URL CODE`") from None


class LinkClient:
    """The host's one link to the hub (see the module): ``call`` from any thread.

    A stalled link (the network gone without a FIN: nothing is refused,
    nothing arrives) is found by the WebSocket's own pings: one every
    ``ping_s``, and a pong not back within ``2 * ping_s`` ends the link
    (its closing handshake given :data:`CLOSE_S`), so the link is down within
    :data:`STALL_DEADLINE_S` of the last frame the hub answered; meanwhile a
    call waits at most ``call_timeout_s`` and raises, so nothing is claimed
    or recorded on a link that cannot answer."""

    PING_S = 5.0
    CLOSE_S = 2.0
    STALL_DEADLINE_S = PING_S * 3 + CLOSE_S

    def __init__(self, link: HubLink, *, base_s: float = 0.2, cap_s: float = 10.0,
                 call_timeout_s: float = 15.0, ping_s: float = PING_S,
                 rand: Callable[[float, float], float] = random.uniform,
                 serve: Callable[[str, dict[str, Any]], Any] | None = None) -> None:
        self.link = link
        #: what runs the hub's requests (:data:`~.link_protocol.HUB_METHODS`) for
        #: this host's own sessions; None: this link serves none (a command's)
        self.serve = serve
        self._serving: set[asyncio.Task[None]] = set()
        self.base_s, self.cap_s = base_s, cap_s
        self.call_timeout_s = call_timeout_s
        self.ping_s = ping_s
        self._rand = rand
        self._loop = asyncio.new_event_loop()
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ws: Any = None
        self._up = threading.Event()
        self._tried = threading.Event()  # the first connection was made, or failed
        self._stopping = False
        self.refused: LinkRefused | None = None
        self.connects = 0  # links made, for tests and `doctor`
        self.wakes = 0  # wake notifications taken from the hub
        self._wakers: list[Callable[[str], object]] = []
        self._users = 0  # the stores sharing this client (:func:`shared_client`)
        self._endpoints = link.endpoints()
        self._turn = 0  # which of the endpoints the next attempt dials
        self._thread = threading.Thread(target=self._run, name="agentwrap-hub-link", daemon=True)

    def start(self) -> LinkClient:
        self._thread.start()
        return self

    @property
    def up(self) -> bool:
        return self._up.is_set()

    def wait_up(self, timeout_s: float) -> bool:
        return self._up.wait(timeout_s)

    def wait_tried(self, timeout_s: float) -> bool:
        """Wait until the first connection is made or has failed (at most
        ``timeout_s``): whether the link is up. A command asks this, not
        :meth:`wait_up`, so a hub that is down is reported at once instead of
        after the whole wait."""
        self._tried.wait(timeout_s)
        return self.up

    def backoff(self, failures: int) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**failures)]."""
        return self._rand(0.0, min(self.cap_s, self.base_s * (2 ** min(failures, 30))))

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._keep_linked())
        except asyncio.CancelledError:
            pass
        except Exception:  # the link is down for good: every call fails closed
            log.exception("the hub link stopped")
            self._stopping = True

    async def _keep_linked(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus, WebSocketException

        failures = 0
        while not self._stopping:
            hub = self._endpoints[self._turn % len(self._endpoints)]
            try:
                async with connect(
                    hub.link_url, subprotocols=[wire.SUBPROTOCOL],  # type: ignore[list-item]
                    additional_headers={"Authorization": f"Bearer {hub.credential}",
                                        "Agentwrap-Host": hub.host,
                                        **({wire.SERVES_HEADER: "1"} if self.serve else {})},
                    ssl=hub.ssl_context(), open_timeout=10, ping_interval=self.ping_s,
                    ping_timeout=self.ping_s * 2, close_timeout=self.CLOSE_S,
                    max_size=8 * 1024 * 1024,
                ) as ws:
                    self._ws = ws
                    self.connects += 1
                    failures = 0
                    self.refused = None
                    self._up.set()
                    self._tried.set()
                    async for frame in ws:
                        if not self._answered(frame):
                            await ws.close(1002, "not agentwrap.link/1")
                            break
            except InvalidStatus as exc:
                if exc.response.status_code in (401, 403):
                    self.refused = LinkRefused(
                        f"the hub refused host {self.link.host!r}'s credential")
            except (OSError, WebSocketException, asyncio.TimeoutError, ssl.SSLError):
                pass
            finally:
                if self._up.is_set() and not self._stopping:
                    log.warning("the link to the hub at %s is down: reconnecting", self.link.url)
                self._up.clear()
                self._tried.set()
                self._ws = None
                self._fail_pending()
            if self._stopping:
                break
            self._turn += 1  # the next hub of the service (itself again if it is the only one)
            await asyncio.sleep(self.backoff(failures))
            failures += 1

    def _answered(self, frame: str | bytes) -> bool:
        """Settle the call a response answers; False for a garbage frame."""
        try:
            data = wire.parse(frame)
        except LinkProtocolError:
            return False
        if "method" in data:  # the hub speaks first: a request (an id) or a push-wake
            return self._hub_request(data) if "id" in data else self._notified(data)
        call_id = data.get("id")
        fut = self._pending.pop(call_id, None) if isinstance(call_id, int) else None
        if fut is None or fut.done():
            return "result" in data or "error" in data  # late answer of a timed-out call
        if isinstance(data.get("error"), dict):
            fut.set_exception(wire.error_from_wire(data["error"]))
        elif "result" in data:
            fut.set_result(data["result"])
        else:
            fut.set_exception(LinkProtocolError("a response on the link has no result"))
            return False
        return True

    def _notified(self, data: Mapping[str, Any]) -> bool:
        """A ``wake`` from the hub: each waker is told the session (on this
        loop's thread: a waker only sends a datagram); False for a
        notification that is not one (a garbage frame)."""
        try:
            name = wire.woken_session(data)
        except LinkProtocolError:
            return False
        self.wakes += 1
        for waker in list(self._wakers):
            try:
                waker(name)
            except Exception:  # one waker's fault is not the link's
                log.exception("a wake-up from the hub failed")
        return True

    def add_waker(self, waker: Callable[[str], object]) -> None:
        """Call ``waker(session)`` for each ``wake`` the hub sends."""
        self._wakers.append(waker)

    def remove_waker(self, waker: Callable[[str], object]) -> None:
        with contextlib.suppress(ValueError):
            self._wakers.remove(waker)

    def _hub_request(self, data: Mapping[str, Any]) -> bool:
        """Run one request of the hub's (:data:`~.link_protocol.HUB_METHODS`)
        beside the link's reading; False for a frame that is not one (the
        link is closed, nothing run)."""
        call_id, method, params = data.get("id"), data.get("method"), data.get("params", {})
        if not (isinstance(call_id, str) and call_id.startswith(wire.HUB_ID)
                and isinstance(method, str) and isinstance(params, dict)):
            return False
        task = self._loop.create_task(self._serve_request(call_id, method, params))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)
        return True

    async def _serve_request(self, call_id: str, method: str, params: dict[str, Any]) -> None:
        serve = self.serve
        if serve is None or method not in wire.SERVED:
            reply = wire.error(call_id, wire.NO_METHOD,
                               f"this link serves no {method[:64]!r}")
        else:
            try:
                reply = wire.result(call_id, await asyncio.to_thread(serve, method, params))
            except AgentwrapError as exc:
                reply = wire.error(call_id, wire.REFUSED, exc.message, exc)
            except (TypeError, ValueError, KeyError) as exc:
                reply = wire.error(call_id, wire.BAD_PARAMS,
                                   f"bad params for {method[:64]}: {type(exc).__name__}")
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):  # the link went: the hub's call fails there
                await ws.send(reply)

    def _fail_pending(self) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(self.down_error())
        self._pending.clear()

    def down_error(self) -> AgentwrapError:
        """What a call raises while the link is down: :class:`LinkRefused` when
        the hub refused this host's credential, else :class:`HubUnreachable`."""
        if self.refused is not None:
            return self.refused
        return HubUnreachable(f"the hub at {self.link.url} is unreachable from host"
                              f" {self.link.host!r}: nothing was recorded")

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        ws = self._ws
        if ws is None:
            raise self.down_error()
        call_id = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._pending[call_id] = fut
        try:
            await ws.send(wire.request(call_id, method, params))
            return await asyncio.wait_for(fut, self.call_timeout_s)
        except asyncio.TimeoutError:
            raise self.down_error() from None
        except (OSError, Exception) as exc:  # the socket went away mid-send
            if isinstance(exc, AgentwrapError):
                raise
            raise self.down_error() from None
        finally:
            self._pending.pop(call_id, None)

    def call(self, method: str, **params: Any) -> Any:
        """One store call on the hub; :class:`HubUnreachable` while the link is down."""
        if not self._up.is_set() or self._stopping:
            raise self.down_error()
        fut = asyncio.run_coroutine_threadsafe(self._call(method, params), self._loop)
        try:
            return fut.result(self.call_timeout_s + 5)
        except TimeoutError:
            fut.cancel()
            raise self.down_error() from None

    def release(self) -> None:
        """One user of a shared client is done (:func:`shared_client`); the
        last one (or the only one of a client made by itself) closes it."""
        with _SHARED_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            for key, client in list(_SHARED.items()):
                if client is self:
                    del _SHARED[key]
        self.close()

    def close(self) -> None:
        self._stopping = True
        if self._thread.is_alive():
            ws = self._ws

            async def _close() -> None:
                if self._serving:  # a hub request being run (a stop ends this very
                    await asyncio.wait(set(self._serving), timeout=SERVING_GRACE_S)  # link)
                if ws is not None:
                    await ws.close()
                for task in asyncio.all_tasks(self._loop):
                    if task is not asyncio.current_task():
                        task.cancel()

            with contextlib.suppress(RuntimeError):
                asyncio.run_coroutine_threadsafe(_close(), self._loop)
            self._thread.join(timeout=5 + SERVING_GRACE_S)


_SHARED: dict[tuple[str, str, str, bool], LinkClient] = {}
_SHARED_LOCK = threading.Lock()


def shared_client(link: HubLink,
                  serve: Callable[[str, dict[str, Any]], Any] | None = None) -> LinkClient:
    """This process's one link to the hub ``link`` names, started on first
    use and shared by every store opened on it (the supervisor host runs
    every session's supervisor in one process: one WebSocket for them all,
    not one each); each user gives it back with :meth:`LinkClient.release`,
    and the last one closes it. ``serve``: a supervisor's link, which runs
    the hub's requests for this host's sessions; the supervisors share one such
    link, and a store opened without it (a command's) gets one that serves none."""
    key = (link.url, link.host, hashlib.sha256(link.credential.encode()).hexdigest(),
           serve is not None)
    with _SHARED_LOCK:
        client = _SHARED.get(key)
        if client is None or client._stopping:
            client = _SHARED[key] = LinkClient(link, serve=serve).start()
        client._users += 1
        return client


def _subscribed(events_dir: Path | None) -> Subscription | None:
    """A subscription to this host's bus, or None (none given, or its folder
    is not there: the reports then keep to their period)."""
    if events_dir is None:
        return None
    try:
        return Subscription(events_dir)
    except (OSError, AgentwrapError) as exc:  # a folder that is not ours: no subscription
        log.debug("the reporter hears no changes on %s: %s", events_dir, type(exc).__name__)
        return None


def _words(values: Collection[Any] | None) -> list[Any] | None:
    return None if values is None else [wire.to_wire(v) for v in values]


class HubStore:
    """:class:`~.store.MessageStore` over the host's link (see the module)."""

    def __init__(self, client: LinkClient) -> None:
        self.client = client
        self.host = client.link.host
        self._closed = threading.Event()
        self._reporter: threading.Thread | None = None
        self._waker: Callable[[str], object] | None = None

    def _messages(self, data: Any) -> list[Message]:
        if not isinstance(data, list):
            raise LinkProtocolError("the hub answered a list call with something else")
        return [wire.message_from_wire(m) for m in data]

    def _int(self, data: Any) -> int:
        if not isinstance(data, int) or isinstance(data, bool):
            raise LinkProtocolError("the hub answered a count with something else")
        return data

    def enqueue(
        self, new: NewMessage, *, kind: Kind = Kind.CONTENT, internal: bool = False,
        sender_limit: SenderLimit | None = None,
    ) -> tuple[Message, bool]:
        out = self.client.call("enqueue", new=new, kind=kind, internal=internal,
                               sender_limit=sender_limit)
        return wire.message_from_wire(out["message"]), bool(out["created"])

    def enqueue_many(
        self, items: Sequence[tuple[NewMessage, Kind]]
    ) -> list[tuple[Message, bool] | QueueError]:
        """One call, one transaction on the hub (as on the store itself): a
        refused item answers its :class:`QueueError` in its place."""
        if not items:
            return []
        got = self.client.call("enqueue_many",
                               items=[{"new": new, "kind": kind} for new, kind in items])
        if not isinstance(got, list) or len(got) != len(items):
            raise LinkProtocolError("the hub answered enqueue_many with something else")
        done: list[tuple[Message, bool] | QueueError] = []
        for item in got:
            if isinstance(item, dict) and "error" in item:
                exc = wire.error_from_wire({"message": item.get("message"),
                                            "data": item["error"]})
                if not isinstance(exc, QueueError):
                    raise exc
                done.append(exc)
            else:
                done.append((wire.message_from_wire(item["message"]), bool(item["created"])))
        return done

    def get(self, message_id: str) -> Message:
        return wire.message_from_wire(self.client.call("get", message_id=message_id))

    def get_by_prefix(self, prefix: str) -> Message:
        return wire.message_from_wire(self.client.call("get_by_prefix", prefix=prefix))

    def peek(
        self, session: str, now: float | None = None, *, kinds: Collection[Kind] | None = None,
        sources: Collection[Source] | None = None, contains: str | None = None,
        due: bool = False, limit: int | None = None,
        priorities: Collection[Priority] | None = None,
    ) -> list[Message]:
        return self._messages(self.client.call(
            "peek", session=session, now=now, kinds=_words(kinds), sources=_words(sources),
            contains=contains, due=due, limit=limit, priorities=_words(priorities)))

    def claim_batch(
        self, session: str, batch_id: str, max_bytes: int, now: float | None = None,
        *, kinds: Collection[Kind] | None = None, sources: Collection[Source] | None = None,
        contains: str | None = None, limit: int | None = None,
        priorities: Collection[Priority] | None = None,
    ) -> list[Message]:
        return self._messages(self.client.call(
            "claim_batch", session=session, batch_id=batch_id, max_bytes=max_bytes, now=now,
            kinds=_words(kinds), sources=_words(sources), contains=contains, limit=limit,
            priorities=_words(priorities)))

    def set_phase(self, batch_id: str, phase: Phase) -> list[Message]:
        return self._messages(self.client.call("set_phase", batch_id=batch_id, phase=phase))

    def in_flight(self, session: str) -> list[Message]:
        return self._messages(self.client.call("in_flight", session=session))

    def record_attempt(self, attempt: Attempt) -> None:
        self.client.call("record_attempt", attempt=attempt)

    def attempts(self, message_id: str) -> list[Attempt]:
        data = self.client.call("attempts", message_id=message_id)
        return [wire.attempt_from_wire(a) for a in data]

    def retry_later(self, batch_id: str, next_attempt_at: float, detail: str) -> int:
        return self._int(self.client.call("retry_later", batch_id=batch_id,
                                          next_attempt_at=next_attempt_at, detail=detail))

    def hold(self, batch_id: str, next_attempt_at: float, detail: str) -> int:
        return self._int(self.client.call("hold", batch_id=batch_id,
                                          next_attempt_at=next_attempt_at, detail=detail))

    def finish(
        self, status: Status, detail: str = "", *, message_ids: Sequence[str] | None = None,
        batch_id: str | None = None, consumed_through: str | None = None,
    ) -> int:
        return self._int(self.client.call(
            "finish", status=status, detail=detail,
            message_ids=None if message_ids is None else list(message_ids),
            batch_id=batch_id, consumed_through=consumed_through))

    def cancel(self, message_id: str) -> Message:
        return wire.message_from_wire(self.client.call("cancel", message_id=message_id))

    def acknowledge(self, message_id: str, detail: str) -> bool:
        return bool(self.client.call("acknowledge", message_id=message_id, detail=detail))

    def flow_started(self, correlation_id: str) -> float | None:
        out = self.client.call("flow_started", correlation_id=correlation_id)
        return None if out is None else float(out)

    def expire_overdue(self, now: float | None = None) -> int:
        return self._int(self.client.call("expire_overdue", now=now))

    def overdue(self, now: float | None = None) -> bool:
        return bool(self.client.call("overdue", now=now))

    def history(
        self, session: str | None, limit: int = 200, statuses: Iterable[Status] | None = None
    ) -> list[Message]:
        return self._messages(self.client.call(
            "history", session=session, limit=limit,
            statuses=None if statuses is None else [s.value for s in statuses]))

    def pending_count(self, session: str | None = None) -> int:
        return self._int(self.client.call("pending_count", session=session))

    def metrics(self, session: str | None) -> QueueMetrics:
        raise LinkProtocolError("metrics are read on the hub (its API), not over a host link")

    def events(
        self, after: int, *, session: str | None = None, kinds: Iterable[str] | None = None,
        subject: str | None = None, limit: int = 1000,
    ) -> list[Event]:
        data = self.client.call("events", after=after, session=session,
                                kinds=None if kinds is None else list(kinds),
                                subject=subject, limit=limit)
        return [wire.event_from_wire(e) for e in data]

    def last_event_id(self) -> int:
        return self._int(self.client.call("last_event_id"))

    def listen(self, wake: Callable[[str], object] | None = None) -> None:
        """Push-wake: ``wake(name)`` for each session of this host the hub
        says has work (a ``wake`` notification on the link, sent as the hub
        stores a message for it), so its supervisor claims at once instead
        of at its next poll; the poll stays, for a wake lost in a cut."""
        if wake is None or self._waker is not None:
            return
        self._waker = wake
        self.client.add_waker(wake)

    def check_integrity(self) -> None:
        """The hub checks its own store."""

    # --- the sessions the hub knows (``register`` and ``sessions``: not the port's) ----

    def register(self, sessions: Sequence[Mapping[str, Any]], period_s: float) -> int:
        """Report this host's running sessions (their records as JSON) to the
        hub: the whole set, replacing the last report; a record naming
        another host is refused (:class:`~agentwrap.errors.ForeignSession`)."""
        return self._int(self.client.call("register", sessions=list(sessions),
                                          period_s=float(period_s)))

    def sessions(self) -> dict[str, Any]:
        """Every host's last report (:class:`agentwrap.hub.roster.Roster.listed`)."""
        out = self.client.call("sessions")
        if not isinstance(out, dict) or not isinstance(out.get("hosts"), list):
            raise LinkProtocolError("the hub answered `sessions` with something else")
        return out

    def report_every(self, period_s: float,
                     snapshot: Callable[[], Sequence[Mapping[str, Any]]],
                     events_dir: Path | None = None) -> None:
        """Report ``snapshot()`` every ``period_s`` while this store is open
        (a daemon thread; a report that fails waits for the next period: the
        hub judges a host by its last report, so nothing is queued up), and,
        with ``events_dir`` (this host's event bus), also at once when this
        host's registry commits a change (a session's new state reaches the
        hub's page in milliseconds, not at the next period)."""
        if self._reporter is not None:
            return

        def run() -> None:
            sub = _subscribed(events_dir)
            try:
                while not self._closed.is_set():
                    if self.client.wait_up(period_s) and not self._closed.is_set():
                        try:
                            self.register(snapshot(), period_s)
                        except (AgentwrapError, OSError, ValueError) as exc:  # the next period
                            log.debug("reporting this host's sessions failed: %s",
                                      type(exc).__name__)
                    self._until_next_report(sub, period_s)
            finally:
                if sub is not None:
                    sub.close()

        self._reporter = threading.Thread(target=run, name="agentwrap-hub-report", daemon=True)
        self._reporter.start()

    def _until_next_report(self, sub: Subscription | None, period_s: float) -> None:
        """Wait out ``period_s``, or (``sub``) until this host's bus announces a
        change, then :data:`REPORT_COALESCE_S` more so a burst of commits (a
        state and its question) is one report."""
        if sub is None:
            self._closed.wait(period_s)
            return
        deadline = time.monotonic() + period_s
        while not self._closed.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if sub.wait(min(left, 1.0)):  # 1 s: a closing store is seen soon
                self._closed.wait(REPORT_COALESCE_S)
                sub.drain()
                return

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        if self._waker is not None:
            self.client.remove_waker(self._waker)
        self.client.release()
