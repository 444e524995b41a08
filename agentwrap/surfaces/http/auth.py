"""The API's bearer token: made on first use, kept private, checked in constant time.

The token lives in the state dir (``api-token``, 0600 in a 0700 dir, written
with :func:`~agentwrap.paths.write_private`), so the person's own CLI can
print it (``agentwrap token``) and nobody else on the machine can read it.
Two processes making it at once agree on one: the new token is written to a
private temporary file and *linked* into place, which fails if another won.

The dashboard gets in without the person copying the token: ``serve`` (and
``agentwrap token --link``) prints a one-time link ``http://HOST:PORT/#login=CODE``.
The code rides in the URL *fragment*, which browsers never send to a server
(not in access logs, not in a Referer); the page posts it to ``/api/login``
and gets a *dashboard token* back, which it keeps in the origin's
localStorage and sends as a bearer token like any client. No cookie on
purpose: cookies for 127.0.0.1 go to every port of the host, so any other
local web server the person opens would receive one, and pages from another
port count as same-site and could ride on it (CSRF). Both kinds of code are
HMACs keyed by the API token and checked without server state (a restart
keeps the dashboard logged in; ``agentwrap token --new`` logs everyone out,
a running server included: :class:`TokenSource` notices the file replaced),
except that a login code is good once: the server remembers redeemed ones
until they expire.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

from fastapi import Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ...paths import Paths, check_private_file, create_private_once, write_private
from .errors import Unauthorized

TOKEN_FILE = "api-token"


def token_path(paths: Paths) -> Path:
    return paths.state_dir / TOKEN_FILE


def load_or_create_token(paths: Paths, *, renew: bool = False) -> str:
    """The server's token, created (or with ``renew`` replaced) if needed."""
    paths.ensure()
    path = token_path(paths)
    if renew:
        write_private(path, _new_token())
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    create_private_once(path, _new_token())
    return _read(path)


def _new_token() -> bytes:
    return (secrets.token_urlsafe(32) + "\n").encode("ascii")


def _read(path: Path) -> str:
    check_private_file(path, repair=True)
    token = path.read_text(encoding="ascii").strip()
    if not token:
        raise FileNotFoundError(path)
    return token


#: How soon a running server takes a token that `agentwrap token --new` wrote.
TOKEN_RECHECK_S = 0.2


class TokenSource:
    """The token a running server checks against: the one it started with,
    until ``agentwrap token --new`` replaces the file; then the new one,
    within :data:`TOKEN_RECHECK_S` (one ``stat`` then, not one per request:
    a busy server answers hundreds a second). A file that goes missing or
    unreadable keeps the last token: never an open door."""

    def __init__(self, token: str, path: Path | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._token = token
        self._path = path
        self._seen = self._key()
        self._lock = threading.Lock()
        self._clock = clock
        self._next = clock() + TOKEN_RECHECK_S

    def _key(self) -> tuple[int, int, int] | None:
        if self._path is None:
            return None
        try:
            st = os.stat(self._path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def current(self) -> str:
        now = self._clock()
        if now < self._next:
            return self._token
        self._next = now + TOKEN_RECHECK_S
        key = self._key()
        if key is not None and key != self._seen:
            with self._lock:
                try:
                    token = _read(self._path)  # type: ignore[arg-type]
                except (OSError, ValueError):
                    return self._token
                self._token, self._seen = token, key
        return self._token


#: How long a login link works.
LOGIN_TTL_S = 600
_DASHBOARD_PREFIX = "dash1"


def _sign(token: str, purpose: str, *parts: str) -> str:
    msg = ":".join((purpose, *parts)).encode("utf-8")
    return hmac.new(token.encode("utf-8"), msg, hashlib.sha256).hexdigest()


def login_code(token: str, *, now: float | None = None, ttl_s: float = LOGIN_TTL_S) -> str:
    """A one-time code for :func:`login_url`: ``EXPIRES.NONCE.SIG``."""
    expires = str(int((time.time() if now is None else now) + ttl_s))
    nonce = secrets.token_hex(12)
    return f"{expires}.{nonce}.{_sign(token, 'login', expires, nonce)}"


def login_url(base_url: str, token: str) -> str:
    """The link a person opens to log the dashboard in (the code in the fragment)."""
    return f"{base_url.rstrip('/')}/#login={login_code(token)}"


class LoginCodes:
    """Redeems login codes, each once: remembers the redeemed ones until they expire."""

    def __init__(self, token: TokenSource | str) -> None:
        self._tokens = token if isinstance(token, TokenSource) else TokenSource(token, None)
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()

    def redeem(self, code: str, *, now: float | None = None) -> str | None:
        """A new dashboard token for a valid, unexpired, unused code; else None."""
        now = time.time() if now is None else now
        expires, _, rest = code.partition(".")
        nonce, _, sig = rest.partition(".")
        if not (expires.isdigit() and nonce and sig):
            return None
        token = self._tokens.current()
        if not hmac.compare_digest(sig.encode("ascii", "replace"),
                                   _sign(token, "login", expires, nonce).encode("ascii")):
            return None
        if int(expires) < now:
            return None
        with self._lock:
            for old in [n for n, exp in self._used.items() if exp < now]:
                del self._used[old]
            if nonce in self._used:
                return None
            self._used[nonce] = float(expires)
        return dashboard_token(token)


def dashboard_token(token: str) -> str:
    """A bearer token for one logged-in page: ``dash1.NONCE.SIG``."""
    nonce = secrets.token_hex(12)
    return f"{_DASHBOARD_PREFIX}.{nonce}.{_sign(token, 'dashboard', nonce)}"


def token_accepted(given: str, token: str) -> bool:
    """The API token itself, or a dashboard token made with it; constant time."""
    if given.startswith(_DASHBOARD_PREFIX + "."):
        _, nonce, sig = [*given.split(".", 2), "", ""][:3]
        expected = _sign(token, "dashboard", nonce)
        return bool(nonce) and hmac.compare_digest(sig.encode("utf-8", "replace"),
                                                   expected.encode("ascii"))
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("ascii"))


_bearer = HTTPBearer(auto_error=False, description="`agentwrap token` prints it")


async def require_token(request: Request) -> None:
    """Dependency of every ``/api`` route: the request's bearer token must be the server's."""
    creds: HTTPAuthorizationCredentials | None = await _bearer(request)
    expected = request.app.state.tokens.current()
    given = creds.credentials if creds is not None else ""
    if not token_accepted(given, expected):
        raise Unauthorized(
            "missing bearer token" if creds is None else "wrong bearer token"
        )
