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
from collections.abc import Mapping
from typing import Any

from .. import errors
from ..errors import AgentwrapError, LinkProtocolError
from ..events import Event
from ..message import Attempt, Kind, Message, NewMessage, Phase, Priority, Source, Status

PROTOCOL = "agentwrap.link/1"
#: PROTOCOL as a WebSocket subprotocol (RFC 6455 wants a token: no "/")
SUBPROTOCOL = "agentwrap.link.v1"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
NO_METHOD = -32601
BAD_PARAMS = -32602
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
}

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


def request(call_id: int, method: str, params: Mapping[str, Any]) -> str:
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
            try:
                return cls(str(data.get("detail", message)),
                           hint=str(hint) if hint else None)
            except TypeError:  # a class with a constructor of its own
                pass
    return LinkProtocolError(f"the hub refused the call: {message}")
