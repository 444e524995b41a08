"""The hub's service: one view over its store and every host's sessions (issue 38).

``agentwrap hub`` serves the same HTTP API, events and dashboard as
``agentwrap serve``, not a second implementation: the surfaces' app runs on
:func:`hub_service`, a :class:`~agentwrap.service.Service` whose store is the
hub's own (every host's messages) and whose registry is a
:class:`~agentwrap.sessions.linked.LinkedRegistry` over the sessions the hosts
report (:class:`RosterSessions`: the hub runs no session of its own), so a
host silent past its deadline is listed ``unreachable since`` its last
report, never hidden. What only a session's own host can do (its screen,
stop) the service asks that host through :attr:`Service.remote
<agentwrap.service.Service.remote>`, the hub's links
(:class:`~.remote.HostLinks`).
"""

from __future__ import annotations

from typing import Any

from ..paths import Paths
from ..queue.sqlstore import SQLMessageStore
from ..service import Service
from ..sessions.linked import LinkedRegistry
from .remote import HostLinks
from .roster import Roster
from .server import HUB_NAME, hub_roster

#: The hub's own (empty) sessions table: the registry a view needs under the hosts' rows.
VIEW_DB = "hub-view.db"


class RosterSessions:
    """Every host's reported sessions, read on the hub itself (what
    ``sessions`` answers a host over its link)."""

    host = HUB_NAME

    def __init__(self, roster: Roster) -> None:
        self.roster = roster

    def sessions(self) -> dict[str, Any]:
        return self.roster.listed()


def hub_service(paths: Paths, store: SQLMessageStore, remote: HostLinks | None, *,
                owns: bool = False) -> Service:
    """A service over the hub's store and every host's sessions (the roster
    where that store keeps it); what only a host can do asked through
    ``remote``. ``owns``: the service closes ``store`` (a SQLite hub's: one
    connection each); else it is lent (a PostgreSQL hub's, the one its links
    run on: its pool is the hub's fixed number of connections however many
    services the HTTP API leases)."""
    try:
        registry = LinkedRegistry(paths.state_dir / VIEW_DB,
                                  hub=RosterSessions(hub_roster(paths.state_dir, store)))
    except BaseException:
        if owns:
            store.close()
        raise
    svc = Service(paths, store, registry)
    svc.owns_store = owns
    svc.remote = remote
    svc.store_where = "the hub's store"
    return svc
