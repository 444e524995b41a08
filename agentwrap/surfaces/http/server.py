"""``agentwrap serve``: the one place that opens the API's socket and runs uvicorn.

The socket is bound here, not by uvicorn: on 127.0.0.1 by default (another
address prints a warning: anyone who reaches it with the token may queue
messages, over plain HTTP), or a unix socket made 0600 (``--uds``; uvicorn
would make it 0666). Bound and listening before the address is printed, so a
script that reads the line can connect at once; port 0 picks a free port and
the printed line names it. The server is one more process on the same store,
not its owner: the CLI keeps working beside it.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
from pathlib import Path

import uvicorn

from ...paths import Paths
from .app import create_app
from .auth import LOGIN_TTL_S, load_or_create_token, login_url

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7878


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int, uds: Path | None) -> tuple[socket.socket, str]:
    """A listening socket and the URL that reaches it."""
    if uds is not None:
        try:
            if uds.is_socket():
                uds.unlink()  # left by a server that died
        except OSError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(uds))
        finally:
            os.umask(old)
        sock.listen(128)
        return sock, f"unix:{uds}"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto named: asyncio turns Nagle off (TCP_NODELAY) only on connections whose
    # socket says IPPROTO_TCP, and accepted ones inherit the listener's. With
    # proto 0, every answer on a kept-alive connection waited ~40 ms for the
    # client's delayed ACK (uvicorn writes the head and the body separately).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    return sock, f"http://{shown}:{bound}"


def _logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    logger = logging.getLogger("agentwrap.http")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


def serve(
    paths: Paths, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
    uds: Path | None = None, log_level: str = "info",
) -> int:
    """Run the API until SIGINT/SIGTERM; returns the exit status."""
    token = load_or_create_token(paths)
    app = create_app(paths, token)
    if uds is None and not is_loopback(host):
        print(f"warning: listening on {host}, not loopback: anyone who can reach it and has"
              " the token can queue messages for your agents, over plain HTTP (no TLS)",
              file=sys.stderr, flush=True)
    sock, url = bind(host, port, uds)
    _logging(log_level)
    config = uvicorn.Config(
        app, log_level=log_level, access_log=False, proxy_headers=False, server_header=False,
        timeout_graceful_shutdown=3, lifespan="on",
    )
    print(f"agentwrap API listening on {url} (token: `agentwrap token`)", flush=True)
    if uds is None:
        print(f"dashboard: {login_url(url, token)}  (one-time login link, valid"
              f" {LOGIN_TTL_S // 60} min; `agentwrap token --link` makes another)", flush=True)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        if uds is not None:
            try:
                uds.unlink()
            except FileNotFoundError:
                pass
    return 0
