"""``agentwrap hub`` (serve the hub, invite, hosts, revoke) and ``agentwrap join`` (issue 38).

Adapters over :mod:`agentwrap.hub`: every rule (plain HTTP only on loopback,
codes used once, credentials hashed, revocation) is there. The credential a
join receives goes to the 0600 link file, never to the terminal; an invite's
code is printed once, to standard output, as the one thing the person copies.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from .common import emit_json, err, out, render_rows, user_paths

if TYPE_CHECKING:
    from ...hub.keys import HubKeys

HUB_HELP = "serve the hub that hosts link to (one source of truth); invite, hosts, revoke"
HUB_DESCRIPTION = """\
The hub owns the store (SQLite in the state directory by default, or
PostgreSQL with --store, on a fixed pool of --pool connections; several
hubs may share one PostgreSQL) and serves /healthz, the hosts' links (/link, a
WebSocket speaking agentwrap.link/1) and the HTTP API and dashboard.

Hosts dial out to it: nothing listens on a host. Plain HTTP is served on
loopback only; anywhere else give --tls-cert and --tls-key, or put the hub
behind a TLS reverse proxy that forwards to a loopback --listen."""
HUB_EPILOG = """\
examples:
  agentwrap hub                                        # 127.0.0.1:8787, plain
  agentwrap hub --listen 0.0.0.0:8787 --tls-cert hub.crt --tls-key hub.key
  agentwrap hub invite laptop                          # a one-time join code
  agentwrap hub hosts                                  # who joined, last seen
  agentwrap hub revoke laptop                          # cut it off now"""
JOIN_HELP = "join this host to a hub with a one-time code (agentwrap hub invite)"
JOIN_DESCRIPTION = """\
Trade a one-time join code for this host's credential, kept 0600 in the
state directory with the hub's certificate, which every later link pins.
The code names the hub's certificate: a hub showing another one is refused
before the code's secret is sent."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    h = sub.add_parser("hub", help=HUB_HELP, description=HUB_DESCRIPTION, epilog=HUB_EPILOG,
                       formatter_class=fmt)
    h.add_argument("--listen", default="127.0.0.1:8787", metavar="ADDR",
                   help="HOST:PORT to serve on (default 127.0.0.1:8787)")
    h.add_argument("--tls-cert", type=Path, metavar="FILE", help="the hub's certificate (PEM)")
    h.add_argument("--tls-key", type=Path, metavar="FILE", help="its private key (PEM)")
    h.add_argument("--store", default="", metavar="URL",
                   help="a postgresql:// URL for the hub's store (default: SQLite in the state"
                   " dir; AGENTWRAP_STORE_URL wins, and keeps a password out of ps)")
    h.add_argument("--pool", type=int, default=0, metavar="N",
                   help="PostgreSQL only: the hub's connections, however many hosts link"
                   " (default 4)")
    h.set_defaults(func=cmd_hub)
    verbs = h.add_subparsers(dest="verb", metavar="VERB")
    i = verbs.add_parser("invite", help="print a one-time join code (10 minutes, single use)")
    i.add_argument("host", nargs="?", metavar="HOST", help="the only host name it joins as")
    i.add_argument("--tls-cert", type=Path, metavar="FILE",
                   help="the certificate the hub serves (the code pins it)")
    i.add_argument("--ttl", type=float, default=600.0, metavar="SECONDS",
                   help="how long the code works (default 600)")
    i.set_defaults(func=cmd_invite)
    ls = verbs.add_parser("hosts", help="the hosts that joined, and when each was last seen")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_hub_hosts)
    rv = verbs.add_parser("revoke", help="cut a host off: its link closes, its pending"
                          " messages fail naming it")
    rv.add_argument("host", metavar="HOST")
    rv.set_defaults(func=cmd_revoke)
    j = sub.add_parser("join", help=JOIN_HELP, description=JOIN_DESCRIPTION, formatter_class=fmt,
                       epilog="examples:\n  agentwrap join https://hub.example:8787 CODE\n"
                              "  agentwrap join https://hub.example:8787 < code.txt")
    j.add_argument("url", metavar="URL", help="the hub's URL (https://HOST:PORT)")
    j.add_argument("code", metavar="CODE", nargs="?", default="-",
                   help="the code `agentwrap hub invite` printed; `-` or left out: read from"
                        " standard input (asked for on a terminal), so it never shows in `ps`")
    j.add_argument("--host", metavar="NAME", help="this host's name (default: [host] name)")
    j.add_argument("--also", action="append", default=[], metavar="URL",
                   help="another hub of the same service (one PostgreSQL), tried in turn;"
                   " it must show the certificate the code names (repeatable)")
    j.set_defaults(func=cmd_join)


def cmd_hub(args: argparse.Namespace) -> int:
    """Serve the hub: its links, and the HTTP API, events and dashboard of
    ``agentwrap serve`` (the same app: :mod:`agentwrap.surfaces.http`) over the
    hub's store and every host's sessions (:func:`agentwrap.hub.view.hub_service`),
    what only a host can do asked of it over its link (the app's ``remote``)."""
    from ...hub.remote import HostLinks
    from ...hub.server import open_hub_store, run_hub
    from ...hub.view import hub_service
    from ...queue.backend import store_url
    from ..http.app import create_app
    from ..http.auth import load_or_create_token

    paths = user_paths().ensure()
    url = store_url(args.store)  # AGENTWRAP_STORE_URL wins: a password stays out of argv
    remote = HostLinks()
    store = open_hub_store(paths.state_dir, url, args.pool, events_dir=paths.events_dir)
    # PostgreSQL: the one pooled store, for links and API alike; SQLite: a
    # connection of its own for each service the API leases
    api = create_app(paths, load_or_create_token(paths), open_service=(
        (lambda: hub_service(paths, store, remote)) if url else
        (lambda: hub_service(paths, open_hub_store(paths.state_dir, events_dir=paths.events_dir),
                            remote, owns=True))))
    where = f"{'https' if args.tls_cert else 'http'}://{args.listen}"
    err.print(escape(f"agentwrap hub on {where}; its dashboard and API need the token"
                     f" (`agentwrap token`; a login link: `agentwrap token --link --url {where}`)"))
    run_hub(paths.state_dir, listen=args.listen, url=url, tls_cert=args.tls_cert,
            tls_key=args.tls_key, api=api, remote=remote, store=store,
            events_dir=paths.events_dir)
    return 0


@contextlib.contextmanager
def _hub_keys() -> Iterator[HubKeys]:
    """The hub's keys where its hub keeps them: on a PostgreSQL hub
    (AGENTWRAP_STORE_URL), in the database every hub on it shares."""
    from ...hub.server import hub_keys, open_hub_store
    from ...queue.backend import store_url

    paths = user_paths().ensure()
    url = store_url()
    store = open_hub_store(paths.state_dir, url, pool_size=1) if url else None
    try:
        yield hub_keys(paths.state_dir, store)
    finally:
        if store is not None:
            store.close()


def cmd_invite(args: argparse.Namespace) -> int:
    from ...hub.server import cert_pin

    with _hub_keys() as keys:
        code = keys.invite(cert_pin(args.tls_cert), args.host, ttl_s=args.ttl)
    err.print(escape(f"a join code for {args.host or 'any host name'}, valid {args.ttl:.0f} s,"
                     " once: on the host run `agentwrap join URL CODE`"))
    out.file.write(code + "\n")
    return 0


def cmd_hub_hosts(args: argparse.Namespace) -> int:
    with _hub_keys() as keys:
        hosts = keys.hosts()
    if args.json:
        emit_json([h.to_json() for h in hosts])
        return 0

    def when(ts: float | None) -> str:
        return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))

    render_rows(out, ("HOST", "JOINED", "LAST SEEN", "REVOKED"),
                [[h.name, when(h.joined), when(h.last_seen), when(h.revoked)] for h in hosts])
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    from ...hub.server import hub_keys, hub_roster, open_hub_store, revoke
    from ...queue.backend import store_url

    paths = user_paths().ensure()
    store = open_hub_store(paths.state_dir, store_url(), pool_size=1)
    try:
        failed = revoke(store, hub_keys(paths.state_dir, store), args.host,
                        hub_roster(paths.state_dir, store))
    finally:
        store.close()
    out.print(f"revoked host {escape(args.host)}: {failed} pending message(s) failed")
    return 0


def cmd_join(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...hub.joining import join
    from ...queue.keys import host_name

    paths = user_paths().ensure()
    host = args.host or host_name(load_config(paths).host.name)
    code = args.code if args.code != "-" else _code_from_stdin()
    link = join(paths.state_dir, args.url, code, host, also=args.also)
    out.print(escape(f"joined {link.url} as host {link.host}"))
    return 0


def _code_from_stdin() -> str:
    """The join code from standard input: asked for without echo on a
    terminal, else its first line (a code on the command line shows in `ps`
    while the join runs; it is single-use, but need not be seen at all)."""
    import getpass
    import sys

    if sys.stdin.isatty():
        return getpass.getpass("join code: ").strip()
    return sys.stdin.readline().strip()
