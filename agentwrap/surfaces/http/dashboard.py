"""The web dashboard: one static page, served as files, talking to ``/api`` like any client.

No build step and nothing fetched from elsewhere (it works offline): the page
is plain HTML, CSS and JavaScript in ``static/``, with the browser terminal
(xterm.js) vendored at a pinned version in ``static/vendor/``. Only the files
named in :data:`FILES` and :data:`VENDOR` are served, so no request path ever
reaches the file system.

The page itself needs no token (it holds no data); its script calls ``/api``
with the person's login and shows a login panel on 401. Message content comes
from webhooks and other agents, so the page renders every value as text
(never as HTML) and is served with a Content-Security-Policy that allows
scripts from this origin only (styles too, plus the inline ones xterm.js
writes for its own layout): even markup that slipped through could not run. The same headers go with every file.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

CSP = "; ".join((
    "default-src 'self'",
    "script-src 'self'",
    # xterm.js measures the font and writes its row and colour rules into <style>
    # elements of its own: inline styles, never inline script
    "style-src 'self' 'unsafe-inline'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
))

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # revalidate each time: an upgraded agentwrap serves its new page at once
    "Cache-Control": "no-cache",
}

#: What may be served, and as what.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "phone.css": "text/css; charset=utf-8",  # the page on a phone's screen (issue 40)
    "tap.css": "text/css; charset=utf-8",  # the one-tap answer page (.tap)
    "manifest.webmanifest": "application/manifest+json",  # installable on a phone
    "icon.svg": "image/svg+xml",
    "icon-192.png": "image/png",
    "icon-512.png": "image/png",
    "terminal.js": "text/javascript; charset=utf-8",  # the live terminal (issue 42)
    "terminal.css": "text/css; charset=utf-8",
    "conversation.js": "text/javascript; charset=utf-8",  # conversation, ended sessions (42)
    "conversation.css": "text/css; charset=utf-8",
}

#: The browser libraries the page carries (``static/vendor/``, pinned in its
#: ``VERSIONS`` with their licences beside them): xterm.js and its fit addon.
VENDOR = {
    "xterm.js": "text/javascript; charset=utf-8",
    "xterm.css": "text/css; charset=utf-8",
    "addon-fit.js": "text/javascript; charset=utf-8",
    "xterm.LICENSE": "text/plain; charset=utf-8",
    "addon-fit.LICENSE": "text/plain; charset=utf-8",
    "VERSIONS": "text/plain; charset=utf-8",
}

STATIC = Path(__file__).resolve().parent / "static"

router = APIRouter(include_in_schema=False)


def read_static(name: str) -> bytes:
    """A file of the page, from the installed package (a wheel carries ``static/``)."""
    return (STATIC / name).read_bytes()


def _file(name: str) -> Response:
    return Response(read_static(name), media_type=FILES[name], headers=SECURITY_HEADERS)


@router.get("/")
def page() -> Response:
    """The dashboard."""
    return _file("index.html")


@router.get("/static/{name}")
def static(name: str) -> Response:
    """The page's script and style sheet (only the files in :data:`FILES`)."""
    if name not in FILES:
        raise HTTPException(status_code=404)
    return _file(name)


@router.get("/static/vendor/{name}")
def vendor(name: str) -> Response:
    """The vendored libraries (only the files in :data:`VENDOR`)."""
    if name not in VENDOR:
        raise HTTPException(status_code=404)
    return Response(read_static(f"vendor/{name}"), media_type=VENDOR[name],
                    headers=SECURITY_HEADERS)
