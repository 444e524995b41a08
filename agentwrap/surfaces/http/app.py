"""The HTTP application, put together: routes, error handlers, token, limits.

:func:`create_app` takes the user's :class:`~agentwrap.paths.Paths` and the
token; the queue limits come from the user's config (read once, like
``Service.open`` does), so the 429 and 413 bodies name the limits the store
enforces. No CORS middleware: browsers on other origins get no access.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from ... import __version__
from ...config import load_config
from ...message import QueueLimits
from ...paths import Paths
from ...service import Service
from . import control, dashboard, errors, tap
from .addresses import EncodedAddress
from .auth import LoginCodes, TokenSource, token_path
from .fast_input import FastInput
from .middleware import AccessLog, BodyLimit, TokenGate
from .pool import ServicePool
from .routes import api, public

DESCRIPTION = """\
Queue context for terminal coding agents supervised by agentwrap, and watch
what happens to it. Every `/api` request needs `Authorization: Bearer <token>`
(`agentwrap token` prints it). Errors are JSON `{error, detail, hint, ...}`.
"""


def body_limit(limits: QueueLimits) -> int:
    """Bytes a request body may have: room for the largest valid message with
    every character JSON-escaped, far below what would hurt to parse."""
    return 6 * (limits.max_content_bytes + limits.max_metadata_bytes) + 4096


def create_app(
    paths: Paths, token: str, *, limits: QueueLimits | None = None,
    open_service: Callable[[], Service] | None = None,
) -> FastAPI:
    """The ASGI app :mod:`.server` runs (tests call it in-process);
    ``open_service``: the services it runs on, when not this host's own (the
    hub's, over its store and every host's sessions: ``agentwrap hub``)."""
    cfg = load_config(paths)
    limits = limits if limits is not None else cfg.limits
    pool = ServicePool(paths, limits, open_service)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        pool.close()

    app = FastAPI(title="agentwrap", version=__version__, description=DESCRIPTION,
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.pool = pool
    app.state.tokens = tokens = TokenSource(token, token_path(paths))  # `token --new`: at once
    app.state.logins = LoginCodes(tokens)
    app.state.limits = limits
    app.state.takeover_idle_s = cfg.serve.takeover_idle_s
    errors.install(app, limits)
    app.include_router(api)
    app.include_router(control.router)
    app.include_router(public)
    app.include_router(dashboard.router)
    app.include_router(tap.router)
    app.add_middleware(FastInput, state=app.state)  # inside BodyLimit: the body is read
    app.add_middleware(EncodedAddress)  # HOST%2FNAME: routed (and fast) in the host form
    app.add_middleware(BodyLimit, max_bytes=body_limit(limits))
    app.add_middleware(TokenGate, state=app.state)  # outside BodyLimit: 401 before the body
    app.add_middleware(AccessLog)  # added last: outermost, sees every answer
    return app
