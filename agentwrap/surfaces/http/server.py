"""``agentwrap serve``: the one place that opens the API's socket and runs uvicorn.

The socket is bound here, not by uvicorn: on 127.0.0.1 by default (another
address prints a warning: anyone who reaches it with the token may queue
messages, over plain HTTP), or a unix socket made 0600 (``--uds``; uvicorn
would make it 0666). Bound and listening before the address is printed, so a
script that reads the line can connect at once; port 0 picks a free port and
the printed line names it. The server is one more process on the same store,
not its owner: the CLI keeps working beside it.

A client has :data:`HEADER_TIMEOUT_S` for each request's head (request line
and headers), from connecting or from the end of its last answer; then the
connection is closed (:class:`HeadDeadline`). uvicorn has none: its
keep-alive timer starts only after a first answer and stops at any byte, so
100 clients sending nothing, or a header line now and then, held 100
connections (and descriptors) for as long as they liked. A request whose
head is in runs as long as it needs (``?wait=``, event streams).

The process hands the GIL over every :data:`GIL_SWITCH_INTERVAL_S`, not
Python's 5 ms: the writer thread (:mod:`.pool`) gives the GIL up around every
SQLite statement and the commit's fsync, and a busy event loop thread took it
straight back each time, so each of a batch's ~10 statements per message could
wait up to a whole interval (the convoy effect): batches of 4 messages took
7-17 ms instead of ~2.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from ...errors import AddressUnavailable
from ...paths import Paths, write_private
from ...terminal.proctree import start_time
from .app import create_app
from .auth import LOGIN_TTL_S, load_or_create_token, login_url

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7878
#: Seconds a client has to send a request's head (see the module's doc).
HEADER_TIMEOUT_S = 10.0
#: How often a thread waiting for the GIL gets it from one holding it (see above).
GIL_SWITCH_INTERVAL_S = 0.0005


class HeadDeadline(H11Protocol):
    """uvicorn's h11 protocol, with a deadline for each request's head.

    Armed when the connection is made and when an answer is complete (the
    next head is due), disarmed when a head is in (a request runs, however
    long) and when the connection goes. When it passes with no request
    running, the connection is closed. A WebSocket leaves this protocol at
    its upgrade: its head is in by then, so nothing is armed.
    """

    header_timeout_s = HEADER_TIMEOUT_S
    _head_due: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        running = self.cycle
        super().handle_events()
        if self.cycle is not running or self.transport.get_protocol() is not self:
            self._disarm()  # a head is in: a request runs (or the socket is a WebSocket's)

    def on_response_complete(self) -> None:
        self._arm()  # before: a pipelined request started by super() disarms it again
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_due = self.loop.call_later(self.header_timeout_s, self._head_late)

    def _disarm(self) -> None:
        if self._head_due is not None:
            self._head_due.cancel()
            self._head_due = None

    def _head_late(self) -> None:
        self._head_due = None
        idle = self.cycle is None or self.cycle.response_complete
        if idle and not self.transport.is_closing():
            self.transport.close()


def uvicorn_config(
    app: ASGIApp, log_level: str = "info", header_timeout_s: float = HEADER_TIMEOUT_S
) -> uvicorn.Config:
    """How the API is served (``serve`` and the tests): h11 with a deadline for
    each request's head; our own access log instead of uvicorn's."""
    protocol = type("HeadDeadline", (HeadDeadline,), {"header_timeout_s": header_timeout_s})
    return uvicorn.Config(
        app, http=protocol, log_level=log_level, access_log=False, proxy_headers=False,
        server_header=False, timeout_graceful_shutdown=3, lifespan="on",
    )


def served_url_path(paths: Paths) -> Path:
    """Where the running ``serve`` leaves its URL (runtime dir, 0600)."""
    return paths.runtime_dir / "serve.url"


def _read_served(paths: Paths) -> tuple[str | None, str]:
    """The URL file's URL (None: none, or not a URL) and its owner line."""
    try:
        lines = served_url_path(paths).read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        return None, ""
    url = lines[0].strip() if lines else ""
    return (url if url.startswith(("http://", "https://")) else None,
            lines[1].strip() if len(lines) > 1 else "")


def served_url(paths: Paths | None = None) -> str | None:
    """The URL the running ``serve`` listens on, if one left it."""
    return _read_served(paths or Paths.from_env())[0]


def _this_serve() -> str:
    """What names this process for good in the URL file: pid and kernel start
    time (a pid reused by another process is not the owner)."""
    return f"{os.getpid()} {start_time(os.getpid())}"


def _owner_runs(owner: str) -> bool:
    pid, _, started = owner.partition(" ")
    return pid.isdigit() and started != "" and start_time(int(pid)) == started


def claim_served_url(paths: Paths, url: str) -> bool:
    """Leave ``url`` in the URL file unless a ``serve`` that still runs left
    its own there (the first one keeps it: `token --link` points at it until
    it stops); True when this one's is there now."""
    _, owner = _read_served(paths)
    if owner and owner != _this_serve() and _owner_runs(owner):
        return False
    write_private(served_url_path(paths), f"{url}\n{_this_serve()}\n".encode())
    return True


def release_served_url(paths: Paths) -> None:
    """Remove the URL file if it is this process's (never another serve's)."""
    if _read_served(paths)[1] == _this_serve():
        served_url_path(paths).unlink(missing_ok=True)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int, uds: Path | None) -> tuple[socket.socket, str]:
    """A listening socket and the URL that reaches it; :class:`AddressUnavailable`
    (a line and a hint, never a traceback) when it cannot be had."""
    if uds is not None:
        return _bind_unix(uds)
    if not 0 <= port <= 65535:  # socket.bind raises OverflowError, no OSError
        raise AddressUnavailable(f"{port} is not a TCP port", hint="give --port 0-65535"
                                 " (0: any free one)")
    try:
        return _bind_tcp(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise AddressUnavailable(f"{host}:{port} is in use by another program") from None
        raise AddressUnavailable(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                                 hint="check --host (an address of this machine) and --port"
                                 ) from None


def _bind_unix(uds: Path) -> tuple[socket.socket, str]:
    if uds.is_symlink() or (uds.exists() and not uds.is_socket()):
        raise AddressUnavailable(f"--uds {uds} exists and is not a socket",
                                 hint="name a path that does not exist yet")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if uds.is_socket():
            try:  # a live server answers on it; a dead one's socket refuses
                sock.connect(str(uds))
            except OSError:
                uds.unlink()  # left by a server that died
            else:
                raise AddressUnavailable(f"another server listens on {uds}")
            sock.close()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(uds))
        finally:
            os.umask(old)
    except OSError as exc:
        sock.close()
        raise AddressUnavailable(f"cannot listen on {uds}: {exc.strerror or exc}",
                                 hint="name a path in a directory of yours") from None
    except AddressUnavailable:
        sock.close()
        raise
    sock.listen(128)
    return sock, f"unix:{uds}"


def _bind_tcp(host: str, port: int) -> tuple[socket.socket, str]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto named: asyncio turns Nagle off (TCP_NODELAY) only on connections whose
    # socket says IPPROTO_TCP, and accepted ones inherit the listener's. With
    # proto 0, every answer on a kept-alive connection waited ~40 ms for the
    # client's delayed ACK (uvicorn writes the head and the body separately).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    return sock, f"http://{shown}:{bound}"


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


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
    config = uvicorn_config(app, log_level)
    if uds is None and not claim_served_url(paths, url):  # where `token --link` points
        print(f"note: another `agentwrap serve` runs at {served_url(paths)}; `agentwrap token"
              " --link` keeps pointing there (give it --url for this one)",
              file=sys.stderr, flush=True)
    print(f"agentwrap API listening on {url} (token: `agentwrap token`)", flush=True)
    if uds is None:
        print(f"dashboard: {login_url(url, token)}  (one-time login link, valid"
              f" {LOGIN_TTL_S // 60} min; `agentwrap token --link` makes another)", flush=True)
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again
    # under the handler it found: the default one would end the process here,
    # past this function's clean-up (the URL file, the unix socket)
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sys.setswitchinterval(switch)
        signal.signal(signal.SIGTERM, previous)
        sock.close()
        if uds is None:
            release_served_url(paths)  # ours only: not another serve's
        if uds is not None:
            try:
                uds.unlink()
            except FileNotFoundError:
                pass
    return 0
