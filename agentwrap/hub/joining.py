"""A host joins a hub: check the hub's certificate against the code, trade the code, save the link.

The code's last part pins the hub's certificate (:mod:`.keys`), so the
certificate is read and compared *before* the secret is sent: a hub that is
not the one the code was made on never sees it. The join request then goes
over TLS that trusts exactly that certificate, and the credential it
returns is written 0600 (:func:`agentwrap.queue.link.save_link`) with the
certificate, which every later link pins.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import ConfigError, HubUnreachable, JoinRefused
from ..paths import check_session_name
from ..queue.link import HubLink, fingerprint, pinned_context, save_link


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _pinned(url: str, pin: str, timeout_s: float) -> str:
    """The certificate ``url`` shows (PEM; "" for plain loopback), refused
    unless it is the one ``pin`` names: read before any secret is sent."""
    split = urlsplit(url)
    if split.scheme not in ("http", "https") or not split.hostname:
        raise ConfigError(f"the hub URL must be http(s)://HOST:PORT, not {url[:80]!r}",
                          hint="the URL `agentwrap hub` printed when it started")
    cert_pem = ""
    if split.scheme == "https":
        port = split.port or 443
        try:
            cert_pem = ssl.get_server_certificate((split.hostname, port), timeout=timeout_s)
        except (OSError, ssl.SSLError) as exc:
            raise HubUnreachable(f"the hub at {url} cannot be reached ({type(exc).__name__})"
                                 ) from None
        seen = fingerprint(ssl.PEM_cert_to_DER_cert(cert_pem))
        if not seen.startswith(pin.lower()):
            raise JoinRefused(
                f"the hub at {url} shows certificate {seen[:20]}, not the {pin[:20]} the code"
                " was made for: nothing was sent",
                hint="check the URL (a proxy or another machine may answer it), or ask for a"
                " code made on this hub")
    elif pin != "plain" or not _loopback(split.hostname):
        raise JoinRefused(f"the code is for a TLS hub, or {url} is not loopback: plain HTTP"
                          " is refused", hint="use the https:// URL of the hub")
    return cert_pem


def join(state_dir: Path, url: str, code: str, host: str, timeout_s: float = 15.0,
         also: Sequence[str] = ()) -> HubLink:
    """Join the hub at ``url`` with ``code`` as ``host``; the saved link.
    ``also``: the URLs of more hubs of the same service (on the same
    PostgreSQL), each pinned to the certificate the code names, checked
    before the code is sent: the link tries them in turn."""
    import httpx

    check_session_name(host)
    parts = code.strip().split(".")
    if len(parts) != 3 or not all(parts):
        raise JoinRefused("that is not a join code (it has three parts: ID.SECRET.PIN)")
    pin = parts[2]
    cert_pem = _pinned(url, pin, timeout_s)
    others = tuple((u.rstrip("/"), _pinned(u, pin, timeout_s)) for u in also)
    verify: ssl.SSLContext | bool = pinned_context(cert_pem) if cert_pem else False
    try:
        resp = httpx.post(url.rstrip("/") + "/join", json={"code": code.strip(), "host": host},
                          verify=verify, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise HubUnreachable(f"the hub at {url} cannot be reached ({type(exc).__name__})"
                             ) from None
    if resp.status_code != 200:
        detail = "the hub refused the code"
        try:
            detail = str(resp.json().get("detail", detail))
        except ValueError:
            pass
        raise JoinRefused(detail)
    credential = str(resp.json()["credential"])
    link = HubLink(url.rstrip("/"), host, credential, cert_pem, others)
    save_link(state_dir, link)
    return link
