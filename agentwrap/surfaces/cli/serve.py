"""Commands of the HTTP API: ``serve`` and ``token``.

Thin: they hand over to :mod:`agentwrap.surfaces.http`, imported only when
one of them runs (the web stack costs every other command nothing).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from .common import err, out, user_paths

SERVE_HELP = """\
Serve the HTTP API and the dashboard on 127.0.0.1:7878: queue messages, peek
at queues, read sessions, messages and metrics, and follow events (Server-Sent
Events at /api/events, a WebSocket at /api/ws). Every /api request needs the
bearer token (`agentwrap token`); it is made on first use and kept 0600 in the
state dir. The dashboard is at /: open the one-time login link serve prints
(or `agentwrap token --link`). The OpenAPI document is at /openapi.json.
"""

SERVE_EPILOG = """\
examples:
  agentwrap serve
  curl -H "Authorization: Bearer $(agentwrap token)" -H 'content-type: application/json' \\
       -d '{"source":"webhook","sourceId":"github","content":"CI failed on main"}' \\
       localhost:7878/api/sessions/api/input
  agentwrap serve --uds $XDG_RUNTIME_DIR/agentwrap/api.sock
"""


def cmd_serve(args: argparse.Namespace) -> int:
    from ..http.server import serve

    uds = Path(args.uds) if args.uds else None
    return serve(user_paths(), host=args.host, port=args.port, uds=uds, log_level=args.log_level)


def cmd_token(args: argparse.Namespace) -> int:
    from ..http.auth import load_or_create_token, login_url, token_path

    paths = user_paths()
    token = load_or_create_token(paths, renew=args.new)
    if args.link:
        from ..http.server import DEFAULT_HOST, DEFAULT_PORT, served_url

        # where the running `serve` listens (it leaves its URL), else the default
        url = args.url or served_url(paths) or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
        out.file.write(login_url(url, token) + "\n")
    else:
        out.file.write(token + "\n")
    if args.new:
        err.print(escape(f"new token written to {token_path(paths)}: a running `agentwrap serve`"
                         " takes it within a second (the old one and every browser logged in"
                         " with it stop working)"))
    return 0
