"""The host link's protocol, ``agentwrap.link/1`` (issue 38): JSON-RPC 2.0 over one WebSocket.

A host's supervisors reach the hub's store through :class:`~.link.HubStore`,
which sends every :class:`~.store.MessageStore` call as a JSON-RPC 2.0
request (``{"jsonrpc": "2.0", "id": N, "method": "claim_batch", "params":
{...}}``) on the host's one link; the hub answers ``result`` or ``error``.
The method names are the store port's own (:data:`METHODS`), so the
protocol is documented by the port: nothing is invented for the wire but
the envelope and the value encoding below, and two calls of the hub's
own: ``register`` (a host reports its sessions and their state, the whole
set each time, every ``[host] heartbeat_s``) and ``sessions`` (every
host's sessions as last reported, with when and the hub's clock, so a
host silent past its deadline is judged ``unreachable since`` then). The version travels in the
WebSocket subprotocol (``Sec-WebSocket-Protocol: agentwrap.link.v1``): a hub
that does not speak it refuses the handshake, so the two never half-agree.

Values: a :class:`~agentwrap.message.Message`, an
:class:`~agentwrap.message.Attempt` or a :class:`~agentwrap.message.NewMessage`
is its dataclass as a JSON object (enums as their stored word), an
:class:`~agentwrap.events.Event` likewise; collections of enums are lists
of words. Errors: a refusal carries ``error.data.error`` (the
:mod:`agentwrap.errors` class name), ``hint`` and ``exitCode``, and the host
raises that same class again (:func:`error_from_wire`), so a CLI command on
a host exits as it would on the store itself; codes are JSON-RPC's own
(-32700 parse error, -32600 invalid request, -32601 no such method, -32602
bad params) plus :data:`REFUSED` for a store's or the hub's refusal.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from .. import errors
from ..errors import AgentwrapError, LinkProtocolError
from ..events import Event
from ..message import Attempt, Kind, Message, NewMessage, Phase, Priority, Source, Status
from ..paths import check_session_name

PROTOCOL = "agentwrap.link/1"
#: PROTOCOL as a WebSocket subprotocol (RFC 6455 wants a token: no "/")
SUBPROTOCOL = "agentwrap.link.v1"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
NO_METHOD = -32601
BAD_PARAMS = -32602
INTERNAL = -32603  # the hub failed to run it (its store, a bug): data names StoreDown
REFUSED = -32000  # the store or the hub's policy refused it: data names the errors.py class

#: The store port's methods a host may call, with what each is scoped by on the
#: hub (:mod:`agentwrap.hub.scope`): ``session`` (a session argument),
#: ``batch`` (the batch's messages), ``message`` (a message id), ``send``
#: (the hub's sending policy), ``read`` (results filtered to the host's own),
#: ``roster`` (the host's own sessions, reported: ``register``) or ``view``
#: (every host's sessions as the hub knows them: one ``ls`` from any host).
METHODS: dict[str, str] = {
    "enqueue": "send",
    "enqueue_many": "send",  # one transaction on the hub; a refused item is that item's only
    "get": "message",
    "get_by_prefix": "message",
    "peek": "session",
    "claim_batch": "session",
    "set_phase": "batch",
    "in_flight": "session",
    "record_attempt": "message",
    "attempts": "message",
    "retry_later": "batch",
    "hold": "batch",
    "finish": "batch",
    "cancel": "message",
    "acknowledge": "message",
    "flow_started": "read",
    "expire_overdue": "read",
    "overdue": "read",
    "history": "session",
    "pending_count": "view",
    "events": "read",
    "last_event_id": "read",
    # not the store port's: the sessions the hub knows (issue 38's one view)
    "register": "roster",
    "sessions": "view",
    # a hub request run on another host's link for this host (s44-hubans: RELAYED)
    "relay": "relay",
}

# --- the hub's requests to a host (s43-hubview: one view through the hub) ---------------
#: What the hub asks a host over that host's link, for what only the host that
#: runs a session can do: the session's screen (``screen``: its plain text and
#: its styled document as the supervisor saved them, which the hub checks again
#: as it reads them) and ``stop`` (the agent's process tree, as ``agentwrap
#: stop`` does there). The host serves them for
#: its own sessions only (a ``HOST/NAME`` naming another host is refused with
#: ``ForeignSession``), from a link whose handshake says it serves them
#: (:data:`SERVES_HEADER`); the hub's request ids are strings (:data:`HUB_ID`
#: and a number), a host's are numbers, so the two directions never mix.
HUB_METHODS: frozenset[str] = frozenset({"screen", "stop"})  # and ANSWER_METHODS, below
#: The handshake header of a link that serves :data:`HUB_METHODS` (a
#: supervisor's; a command's short link does not).
SERVES_HEADER = "Agentwrap-Serves"
HUB_ID = "hub-"


def is_response(data: Mapping[str, Any]) -> bool:
    """A frame that answers a request (``result`` or ``error``, no ``method``)."""
    return "method" not in data and ("result" in data or "error" in data)


_MESSAGE_ENUMS = {"source": Source, "priority": Priority, "status": Status, "phase": Phase,
                  "kind": Kind}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Priority):
        return int(value)
    if isinstance(value, str):  # str enums too: their word
        return str(value.value) if hasattr(value, "value") else value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value


def to_wire(value: Any) -> Any:
    """``value`` as JSON-ready data (see the module for the encoding)."""
    return _plain(value)


def message_from_wire(data: Mapping[str, Any]) -> Message:
    fields = dict(data)
    for name, enum in _MESSAGE_ENUMS.items():
        if fields.get(name) is not None:
            fields[name] = enum(fields[name])
    try:
        return Message(**fields)
    except TypeError as exc:
        raise LinkProtocolError(f"not a message on the link: {exc}") from None


def new_message_from_wire(data: Mapping[str, Any]) -> NewMessage:
    fields = dict(data)
    if "source" in fields:
        fields["source"] = Source(fields["source"])
    if "priority" in fields:
        fields["priority"] = Priority(fields["priority"])
    try:
        return NewMessage(**fields)
    except TypeError as exc:
        raise LinkProtocolError(f"not a new message on the link: {exc}") from None


def attempt_from_wire(data: Mapping[str, Any]) -> Attempt:
    try:
        return Attempt(**dict(data))
    except TypeError as exc:
        raise LinkProtocolError(f"not an attempt on the link: {exc}") from None


def event_from_wire(data: Mapping[str, Any]) -> Event:
    try:
        return Event(**dict(data))
    except TypeError as exc:
        raise LinkProtocolError(f"not an event on the link: {exc}") from None


def request(call_id: int | str, method: str, params: Mapping[str, Any]) -> str:
    """A request with either direction's id (a host's number, the hub's string)."""
    return json.dumps({"jsonrpc": "2.0", "id": call_id, "method": method,
                       "params": to_wire(params)})


def result(call_id: object, value: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": call_id, "result": to_wire(value)})


def error(call_id: object, code: int, message: str, exc: AgentwrapError | None = None) -> str:
    body: dict[str, Any] = {"code": code, "message": message}
    if exc is not None:
        body["data"] = exc.to_json()
    return json.dumps({"jsonrpc": "2.0", "id": call_id, "error": body})


def parse(frame: str | bytes) -> dict[str, Any]:
    """One frame as a JSON object, or :class:`LinkProtocolError` (a garbage frame)."""
    try:
        data = json.loads(frame)
    except (ValueError, RecursionError):
        raise LinkProtocolError("a frame on the link is not JSON") from None
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        raise LinkProtocolError("a frame on the link is not a JSON-RPC 2.0 object")
    return data


def error_from_wire(body: Mapping[str, Any]) -> AgentwrapError:
    """The :mod:`agentwrap.errors` class a refusal names, raised again on the
    host; anything else (or a class that is not an AgentwrapError) is a
    :class:`LinkProtocolError`."""
    data = body.get("data")
    message = str(body.get("message", "the hub refused the call"))
    if isinstance(data, Mapping):
        cls = getattr(errors, str(data.get("error", "")), None)
        hint = data.get("hint")
        if isinstance(cls, type) and issubclass(cls, AgentwrapError):
            detail, why = str(data.get("detail", message)), str(hint) if hint else None
            own = _with_facts(cls, detail, why, data)
            if own is not None:
                return own
            try:
                return cls(detail, hint=why)
            except TypeError:  # a class with a constructor of its own, its facts missing
                pass
    return LinkProtocolError(f"the hub refused the call: {message}")


def _with_facts(cls: type[AgentwrapError], detail: str, hint: str | None,
                data: Mapping[str, Any]) -> AgentwrapError | None:
    """The refusals whose constructor takes the facts their ``to_json`` sends
    (a rate limit's ``retryAfter``, an ambiguous name's ``candidates``), rebuilt
    with them, so a host's command says "retry in N s" with exit 75 as it would
    on the hub; facts of the wrong shape (a hostile hub) leave it to the caller."""
    if cls is errors.RateLimited:
        after = data.get("retryAfter")
        if isinstance(after, (int, float)) and not isinstance(after, bool) \
                and math.isfinite(after) and 0 <= after <= MAX_RETRY_AFTER_S:
            return errors.RateLimited(detail, retry_after=float(after), hint=hint)
    if cls is errors.SessionAmbiguous:
        names = data.get("candidates")
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return errors.SessionAmbiguous(detail, [str(n) for n in names[:MAX_CANDIDATES]],
                                           hint=hint)
    return None


#: bounds on what a refusal's facts may say (a hostile hub's are cut, not trusted)
MAX_RETRY_AFTER_S = 86_400.0
MAX_CANDIDATES = 100


# --- hub -> host notifications (issue 38's push-wake) ---------------------------------
#
# The hub also speaks first: a JSON-RPC 2.0 *notification* (no ``id``, never
# answered) ``{"jsonrpc": "2.0", "method": "wake", "params": {"session":
# "NAME"}}`` tells a host that a message (or an answer) was queued for its
# session NAME (the bare name: the host's own, never another's), so that
# session's supervisor claims it at once instead of at its next poll. A wake
# carries no content and proves nothing: it only hastens a claim the
# supervisor's own safety poll would make anyway, so a lost wake costs only
# latency and a forged or repeated one costs only a claim that finds nothing.

WAKE = "wake"
#: the notifications a host accepts from its hub (anything else is a garbage frame)
NOTIFICATIONS = frozenset({WAKE})
#: the store events that give a session work (a wake is sent for each)
WAKE_KINDS = frozenset({"message.queued", "session.answered"})


def notification(method: str, params: Mapping[str, Any]) -> str:
    """A notification frame (no ``id``: the host never answers it)."""
    return json.dumps({"jsonrpc": "2.0", "method": method, "params": to_wire(params)})


def woken_session(data: Mapping[str, Any]) -> str:
    """The session a parsed ``wake`` notification names (a bare session
    name), or :class:`LinkProtocolError` for anything else."""
    params = data.get("params")
    if data.get("method") != WAKE or "id" in data or not isinstance(params, Mapping):
        raise LinkProtocolError("a notification on the link is not agentwrap.link/1's")
    name = params.get("session")
    if not isinstance(name, str) or "/" in name:
        raise LinkProtocolError("a wake on the link names no session of this host")
    try:
        return check_session_name(name)
    except AgentwrapError:
        raise LinkProtocolError("a wake on the link names no session of this host") from None


# --- answers and relays through the hub (s44-hubans: every per-session act) -----------
#
# An answer to the question a session on host B shows is B's to take: B's
# answer intake checks it against the question B's registry holds and B's
# supervisor types it. So the hub asks B (``answer``: the intake's own
# arguments; ``answer_status``: one answer B stored, by B's bare id), and a
# host that is not B reaches B the same way, through the hub: ``relay``
# (host -> hub: ``{"host": "B", "request": "answer", "params": {...}}``) runs
# one of :data:`RELAYED` on B's link as the hub's own request would. What the
# hub hands back names the answer ``B/ID`` (:func:`answer_address`), so its
# status is asked of B again from anywhere.

#: The hub's requests to a host for its sessions' answers.
ANSWER_METHODS: frozenset[str] = frozenset({"answer", "answer_status"})
#: What a host may have the hub ask another host (the hub's policy; ``stop`` is not one).
RELAYED: frozenset[str] = frozenset({"answer", "answer_status", "screen"})
#: The store events every joined host may read of every host (``events -f`` across
#: hosts): states and the hub's word on links, never a message's or an answer's data.
VIEW_EVENT_KINDS: frozenset[str] = frozenset({"session.state", "host.linked", "host.silent"})
#: The hub's events on its links: a host's last link closed or passed its
#: deadline (``host.silent``), a host linked again (``host.linked``).
HOST_SILENT = "host.silent"
HOST_LINKED = "host.linked"


def answer_address(host: str, answer_id: str) -> str:
    """Host ``host``'s answer ``answer_id`` as the hub names it: ``HOST/ID``."""
    return f"{host}/{answer_id}"


def split_answer(address: str) -> tuple[str, str]:
    """``(HOST, ID)`` of an answer address (``("", ID)`` for a bare id); an id is
    16 hex characters (:class:`~agentwrap.answers.store.AnswerStore`'s)."""
    host, _, aid = address.rpartition("/")
    if not aid or len(aid) > 64 or not all(c in "0123456789abcdef" for c in aid):
        raise LinkProtocolError(f"no answer {address[:80]!r}")
    if host:
        check_session_name(host)
    return host, aid
# The hub's page shows a live terminal of every host's sessions (issues 38 and 42):
# ``terminal_open`` {session} -> {viewer}; ``terminal_look`` {viewer, seen, wait_s}
# -> {changes, frame | same} (a frame's rows the same as the last one sent on that
# viewer are null); ``terminal_close`` {viewer}; ``terminal_takeover`` {session, by,
# client, idle_s} -> {keyboard}; ``terminal_input`` {keyboard, kind: keys | paste |
# resize, data | cols, rows}; ``terminal_release`` {keyboard, reason}. The hub's
# page only: not :data:`RELAYED` (a host's own page reaches another host's terminal
# through the hub's page).
TERMINAL_METHODS: frozenset[str] = frozenset({
    "terminal_open", "terminal_look", "terminal_close",
    "terminal_takeover", "terminal_input", "terminal_release",
})
#: Every request a serving host runs for the hub.
SERVED: frozenset[str] = HUB_METHODS | ANSWER_METHODS | TERMINAL_METHODS
