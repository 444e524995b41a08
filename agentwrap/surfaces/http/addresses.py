"""A session's address in a request path: ``NAME``, or ``HOST/NAME`` (issue 23).

Sessions are addressed ``HOST/NAME`` everywhere (:meth:`Registry.resolve
<agentwrap.sessions.registry.Registry.resolve>`); a bare ``NAME`` is this
host's session when it has one, else the one of that name another host has. A URL path cannot carry the ``/`` of an address in one segment
(servers decode ``%2F`` before routing), so every route under
``/api/sessions/{name}`` is served under ``/api/hosts/{host}/sessions/{name}``
too (:func:`session_route`; the OpenAPI document lists both), and a client
that percent-encodes the whole address (``/api/sessions/HOST%2FNAME/...``,
what ``encodeURIComponent`` or ``quote(address, safe="")`` make) is sent to
that path form before routing (:class:`EncodedAddress`), never to whatever
its decoded path would match by accident. The route gets the address as one
string (:data:`Address`); the service resolves it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, TypeVar
from urllib.parse import unquote

from fastapi import APIRouter, Depends, Path, Request
from starlette.types import ASGIApp, Receive, Scope, Send

F = TypeVar("F", bound=Callable[..., Any])

HOST_PREFIX = "/hosts/{host}"

#: The enqueue route in both forms, for its hot path (:mod:`.fast_input`):
#: groups (host or None, name).
INPUT_PATH = re.compile(r"/api/(?:hosts/([^/]+)/)?sessions/([^/]+)/input")

# /api/sessions/HOST%2FNAME[/rest], %2F in either case, in the raw (undecoded) path
_ENCODED = re.compile(rb"/api/sessions/([^/%]+)%2[Ff]([^/]+)(/[^?]*)?")


def _host(host: Annotated[str, Path(description="the host the session runs on"
                                                " (`agentwrap ls`)")]) -> None:
    """Declares ``{host}`` of the host form (:func:`session_address` reads it)."""


def session_address(request: Request, name: str) -> str:
    """``NAME``, or ``HOST/NAME`` under ``/api/hosts/{host}/...``."""
    host = request.path_params.get("host")
    return name if host is None else f"{host}/{name}"


Address = Annotated[str, Depends(session_address)]


def session_route(router: APIRouter, method: str, path: str, **kw: Any) -> Callable[[F], F]:
    """Route ``path`` (``/sessions/{name}...``) for ``method``, and the same
    under ``/hosts/{host}`` (the endpoint takes the session as :data:`Address`)."""

    def route(fn: F) -> F:
        router.api_route(path, methods=[method], **kw)(fn)
        router.api_route(HOST_PREFIX + path, methods=[method],
                         dependencies=[Depends(_host)], **kw)(fn)
        return fn

    return route


def address_of(path_params: dict[str, Any]) -> str | None:
    """The session address a request's path named (an error names it back)."""
    name, host = path_params.get("name"), path_params.get("host")
    return name if name is None or host is None else f"{host}/{name}"


class EncodedAddress:
    """``/api/sessions/HOST%2FNAME/...`` routed as ``/api/hosts/HOST/sessions/NAME/...``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] in ("http", "websocket") else None
        if raw and b"%2" in raw and (match := _ENCODED.fullmatch(raw.split(b"?", 1)[0])):
            host, name, rest = (unquote(g.decode("latin-1")) if g else "" for g in match.groups())
            path = f"/api/hosts/{host}/sessions/{name}{rest}"
            scope = {**scope, "path": path, "raw_path": path.encode("utf-8")}
        await self.app(scope, receive, send)
