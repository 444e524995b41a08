"""The queue: the durable store of messages and their attempts.

Here live the storage interface (``store``: ``MessageStore``), its two
implementations over one set of operations (``sqlstore``): PostgreSQL's
(``postgres``: shared by several hosts; ``pgpool`` its fixed pool of connections for the hub) and SQLite's (``sqlite``; its file's
plumbing, ``sqlite_database``: the connection, its lock and transactions), which
of the two this host uses (``backend``), each
operation's work in the module for its job: ``schema`` the tables,
``admission`` the limits that need the stored rows (rate, pending,
idempotency) with what the counts allow in ``rules``, ``transitions`` the
delivery side's status changes, ``reads`` and ``metrics``, ``writes`` a
transaction and its events), the stateless checks every message passes before it is
stored (``validate``: size, TTL, metadata, ids, reserved sources and
priorities), text sanitizing (``sanitize``) and the one place SQLite
connections are opened and their errors translated (``db``); ``database`` is the
storage port of the tables beside the queue (the session registry, the
answers), on either backend; ``keys`` says whose session a row of a shared
store belongs to (``HOST/NAME``) and ``due`` answers "is anything due for a
session?" in one read, for callers that must be quick; ``link`` is a
host's side of a hub (issue 38): its one outbound link and ``HubStore``, the
store port over it, speaking ``link_protocol`` (``agentwrap.link/1``, JSON-RPC 2.0). The message types themselves (``agentwrap.message``) stay
at the top level, in the foundation: the configuration's ``[limits]`` section
is ``QueueLimits``, and ``config`` is imported by every layer, the terminal
included. Imports point down only: to the foundation (``message``, ``config``,
``paths``, ``errors``); never to ``detect`` (the two are independent),
``terminal``, ``delivery``, ``sessions`` or ``surfaces``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from . import db as db
    from . import link_protocol as link_protocol
    from . import sanitize as sanitize
    from .backend import SCHEMES as SCHEMES
    from .backend import configured_store as configured_store
    from .backend import describe as describe
    from .backend import linked_store as linked_store
    from .backend import open_database as open_database
    from .backend import open_store as open_store
    from .backend import store_url as store_url
    from .database import Database as Database
    from .due import anything_due as anything_due
    from .keys import HOST_ENV as HOST_ENV
    from .keys import KEYED as KEYED
    from .keys import SessionKeys as SessionKeys
    from .keys import host_name as host_name
    from .link import HubLink as HubLink
    from .link import HubStore as HubStore
    from .link import LinkClient as LinkClient
    from .link import fingerprint as fingerprint
    from .link import load_link as load_link
    from .link import pinned_context as pinned_context
    from .link import save_link as save_link
    from .pgpool import POOL_SIZE as POOL_SIZE
    from .pgpool import PooledPgDatabase as PooledPgDatabase
    from .postgres import TURN_LOCKS as TURN_LOCKS
    from .postgres import PgSubscription as PgSubscription
    from .postgres import PostgresMessageStore as PostgresMessageStore
    from .rules import due_run as due_run
    from .sanitize import check_text as check_text
    from .sanitize import decode_utf8 as decode_utf8
    from .sqlite import SQLiteMessageStore as SQLiteMessageStore
    from .sqlstore import SQLMessageStore as SQLMessageStore
    from .store import MessageStore as MessageStore
    from .store import QueueMetrics as QueueMetrics
    from .store import SenderLimit as SenderLimit
    from .transitions import finish as finish
    from .validate import MAX_DEPTH as MAX_DEPTH
    from .validate import MAX_ID_CHARS as MAX_ID_CHARS
    from .validate import MIN_TTL_S as MIN_TTL_S
    from .writes import Write as Write

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "backend": (
        "SCHEMES", "configured_store", "describe", "linked_store", "open_database", "open_store",
        "store_url",
    ),
    "database": ("Database",),
    "db": ("db",),
    "due": ("anything_due",),
    "keys": ("HOST_ENV", "KEYED", "SessionKeys", "host_name"),
    "link": ("HubLink", "HubStore", "LinkClient", "fingerprint", "load_link", "pinned_context",
             "save_link"),
    "link_protocol": ("link_protocol",),
    "sanitize": ("check_text", "decode_utf8", "sanitize"),
    "pgpool": ("POOL_SIZE", "PooledPgDatabase"),
    "postgres": ("TURN_LOCKS", "PgSubscription", "PostgresMessageStore"),
    "rules": ("due_run",),
    "sqlite": ("SQLiteMessageStore",),
    "sqlstore": ("SQLMessageStore",),
    "store": ("MessageStore", "QueueMetrics", "SenderLimit"),
    "transitions": ("finish",),
    "validate": ("MAX_DEPTH", "MAX_ID_CHARS", "MIN_TTL_S"),
    "writes": ("Write",),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
