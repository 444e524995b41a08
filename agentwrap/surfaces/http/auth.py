"""The API's bearer token: made on first use, kept private, checked in constant time.

The token lives in the state dir (``api-token``, 0600 in a 0700 dir, written
with :func:`~agentwrap.paths.write_private`), so the person's own CLI can
print it (``agentwrap token``) and nobody else on the machine can read it.
Two processes making it at once agree on one: the new token is written to a
private temporary file and *linked* into place, which fails if another won.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from fastapi import Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ...paths import Paths, check_private_file, write_private
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
    tmp = path.with_name(f".{TOKEN_FILE}.{secrets.token_hex(8)}.new")
    write_private(tmp, _new_token())
    try:
        os.link(tmp, path)  # fails if another process made it first: use theirs
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return _read(path)


def _new_token() -> bytes:
    return (secrets.token_urlsafe(32) + "\n").encode("ascii")


def _read(path: Path) -> str:
    check_private_file(path, repair=True)
    token = path.read_text(encoding="ascii").strip()
    if not token:
        raise FileNotFoundError(path)
    return token


_bearer = HTTPBearer(auto_error=False, description="`agentwrap token` prints it")


async def require_token(request: Request) -> None:
    """Dependency of every ``/api`` route: the request's bearer token must be the server's."""
    creds: HTTPAuthorizationCredentials | None = await _bearer(request)
    expected: str = request.app.state.token
    given = creds.credentials if creds is not None else ""
    if not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("ascii")):
        raise Unauthorized(
            "missing bearer token" if creds is None else "wrong bearer token"
        )
