"""Which store this host's queue is in: SQLite's file, or a shared PostgreSQL server.

SQLite stays the default, opened exactly as before: nothing to set up for one
machine. A team whose hosts share one queue sets ``[store] url =
"postgresql://..."`` in the user's config, or ``AGENTWRAP_STORE_URL`` (which
wins: one shell, one CI job). The URL goes to libpq as it is, so its
conventions hold for secrets (a password file, ``PGPASSFILE``, ``PGPASSWORD``,
``sslmode`` and client certificates in the URL); agentwrap never prints or
logs it, only :func:`describe`, without the password. psycopg is imported
only when a PostgreSQL store is opened, and the message store's code only
when a message store is: the registry and the answers need the database alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..errors import ConfigError
from ..message import QueueLimits
from . import db
from .database import Database
from .keys import host_name
from .sqlite_database import SQLiteDatabase

if TYPE_CHECKING:  # imported where a message store is opened
    from .link import HubStore
    from .sqlstore import SQLMessageStore

ENV = "AGENTWRAP_STORE_URL"
SCHEMES = ("postgresql://", "postgres://")


#: The link file's name (:data:`.link.LINK_FILE`, held equal by a test): looked for
#: before the link's code is imported.
LINK_FILE = "hub-link.json"

def store_url(configured: str = "", env: Mapping[str, str] | None = None) -> str:
    """The PostgreSQL URL this host uses, or "" for the SQLite file.

    ``configured``: ``[store] url``; the environment's :data:`ENV` wins.
    Anything but a ``postgresql://`` URL is a :class:`ConfigError` that does
    not repeat it (it may hold a password)."""
    url = ((os.environ if env is None else env).get(ENV, "") or configured).strip()
    if url and not url.startswith(SCHEMES):
        raise ConfigError(
            f"the store URL ({ENV} or [store] url) must start with postgresql://",
            hint="unset it for this machine's SQLite file, or give a libpq URL such as"
            " postgresql://USER@HOST/DB?sslmode=verify-full (password in ~/.pgpass)",
        )
    return url


def open_store(
    db_path: Path, limits: QueueLimits | None = None, *, url: str = "",
    events_dir: Path | None = None, busy_timeout_ms: int = db.BUSY_TIMEOUT_MS,
    host: str | None = None,
) -> SQLMessageStore:
    """The queue at ``url`` (PostgreSQL), or else the SQLite file ``db_path``.

    ``host``: this host's name on a shared store, where a bare session name
    is this host's session (:mod:`.keys`); by default :func:`host_name`'s.
    ``limits``: by default :data:`.sqlstore.DEFAULT_LIMITS`."""
    from .sqlstore import DEFAULT_LIMITS

    limits = DEFAULT_LIMITS if limits is None else limits
    if url:
        from .postgres import PostgresMessageStore

        return PostgresMessageStore(url, limits, events_dir=events_dir, host=host,
                                    connect_timeout_s=max(1.0, busy_timeout_ms / 1000))
    from .sqlite import SQLiteMessageStore

    return SQLiteMessageStore(db_path, limits, events_dir=events_dir,
                              busy_timeout_ms=busy_timeout_ms)


def open_database(
    db_path: Path, url: str = "", *, events_dir: Path | None = None,
    busy_timeout_ms: int = db.BUSY_TIMEOUT_MS,
) -> Database:
    """The plumbing of the registry and the answers (:mod:`.database`) at
    ``url`` (PostgreSQL), or else in the SQLite file ``db_path``: the store
    the queue of the same ``url`` is in."""
    if url:
        from .postgres import PgDatabase

        return PgDatabase(url, events_dir=events_dir,
                          connect_timeout_s=max(1.0, busy_timeout_ms / 1000))
    return SQLiteDatabase(db_path, busy_timeout_ms=busy_timeout_ms, events_dir=events_dir)


def describe(db_path: Path, url: str = "") -> str:
    """Where the queue is, for people: the file, or the server without its password."""
    if not url:
        return f"sqlite {db_path}"
    from .postgres import display

    return display(url)


def linked_store(state_dir: Path, *, wait_s: float = 2.0, required: bool = False,
                 serving: Callable[[str], Callable[[str, dict[str, Any]], Any]] | None = None,
                 ) -> HubStore | None:
    """The hub's store over this host's link (issue 38), if this host joined
    a hub (:func:`.link.load_link`), else None: the process's one link
    (:func:`.link.shared_client`) is started on first use and given
    up to ``wait_s`` for its first connection; while it is down every call
    raises ``HubUnreachable``. ``required`` (a command, which makes its calls
    at once): a link that did not come up raises that here, closed. ``serving``: given this host's name on the hub,
    what runs the hub's requests for its sessions (a supervisor's link:
    :data:`.link_protocol.HUB_METHODS`)."""
    if not (state_dir / LINK_FILE).exists():  # the link's code (asyncio, ssl, websockets)
        return None  # is loaded only on a joined host, not by every store open
    from .link import HubStore, load_link, shared_client

    link = load_link(state_dir)
    if link is None:
        return None
    client = shared_client(link, None if serving is None else serving(link.host))
    if not client.wait_tried(wait_s) and required:
        client.release()
        raise client.down_error()
    return HubStore(client)


def configured_store(db_path: Path, cfg: Config, *, events_dir: Path | None = None
                     ) -> SQLMessageStore:
    """The store ``cfg`` (its ``[store]`` and ``[limits]``) and the environment choose."""
    return open_store(db_path, cfg.limits, url=store_url(cfg.store.url), events_dir=events_dir,
                      host=host_name(cfg.host.name))
