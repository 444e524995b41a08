"""The hub (issue 38): one source of truth that hosts dial out to.

The design in one paragraph: the hub is another implementation of the store
port. A host's supervisors use :class:`agentwrap.queue.link.HubStore`, a
:class:`~agentwrap.queue.store.MessageStore` that sends each call as a
JSON-RPC 2.0 request (``agentwrap.link/1``, :mod:`agentwrap.queue.link_protocol`,
the method names the port's own) over the host's one outbound WebSocket.
The hub (``server``) runs each call against *its* store (SQLite in its state
directory by default, PostgreSQL with ``--store``), scoped to the calling
host (``scope``: a host claims, phases, finishes, records attempts and
acknowledges only for its own sessions; anything else is refused with
:class:`~agentwrap.errors.ForeignSession`), and makes the calls a
supervisor repeats after a cut idempotent by ``(batch_id, phase)``. The
host side never resends a call by itself: a call whose answer the cut lost
raises "store unavailable" (:class:`~agentwrap.errors.HubUnreachable`, exit
75), and the supervisor resolves the batch from its recorded phase once the
link is back, as it does after a crash. Who may link: one-time join codes
and per-host credentials, scrypt-hashed at rest (``keys``); a host trades
a code for its credential and pins the hub's certificate, which the code
names (``joining``).

Modules: ``keys`` (invites, host credentials, revocation), ``roster`` (the
sessions each host reports, for one ``ls`` from any host), ``scope`` (one
host's calls on the store), ``server`` (the ASGI app: ``/healthz``,
``/join``, ``/link``; the process ``agentwrap hub`` runs; its expiry
sweeper), ``joining`` (a host trading a code for a credential), ``tables``
(where keys and roster live: SQLite files, or the hub's PostgreSQL, shared
by every hub on it), ``remote`` (the hub asking a host, over its link, what
only the host can do: a screen, stop, an answer and its status), ``view``
(the service the hub's HTTP API and dashboard run on: its store and every
host's sessions), ``liveness`` (the hub's events on its hosts' links: a host
silent, a host linked again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from .joining import join as join
    from .keys import HubKeys as HubKeys
    from .keys import JoinedHost as JoinedHost
    from .remote import HostLinks as HostLinks
    from .roster import Roster as Roster
    from .scope import HostCalls as HostCalls
    from .server import cert_pin as cert_pin
    from .server import create_hub_app as create_hub_app
    from .server import hub_keys as hub_keys
    from .server import hub_roster as hub_roster
    from .server import open_hub_store as open_hub_store
    from .server import revoke as revoke
    from .server import run_hub as run_hub
    from .view import hub_service as hub_service

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "joining": ("join",),
    "keys": ("HubKeys", "JoinedHost"),
    "remote": ("HostLinks",),
    "roster": ("Roster",),
    "scope": ("HostCalls",),
    "server": ("cert_pin", "create_hub_app", "hub_keys", "hub_roster", "open_hub_store", "revoke",
               "run_hub"),
    "view": ("hub_service",),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
