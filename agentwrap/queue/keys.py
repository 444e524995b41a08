"""Whose session a row of a shared store belongs to: the key ``HOST/NAME`` (issue 23).

Two hosts may each run a session ``dev`` on one PostgreSQL store. Every table
that names a session (messages, events, state transitions, answers, the
registry) does so in one ``session``/``name`` column, so on a shared store
that column holds the *key* ``HOST/NAME``, and every statement that was
keyed by the name is keyed by the key with no change to its SQL or its
indexes: a claim, the idempotency index ``(session, key)``, the rate window,
a session's events and its claim lock are each one host's ``dev`` only. (A
``host`` column beside the name would have needed every statement, index and
primary key changed to stay as safe.) Names never hold a ``/``
(:func:`~agentwrap.paths.check_session_name`), so the key is unambiguous.

Callers keep naming sessions as before: a bare ``NAME`` is this host's
session (what a supervisor, a hook or the delivery engine passes), and
``HOST/NAME`` any host's (:class:`SessionKeys`); a row read back names its
session by its key, the same on every host (a message's ``session`` is
``alpha/dev`` wherever it is read). On SQLite (one machine) the key is the
name, as it always was.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigError, InvalidMessage
from ..paths import check_session_name

HOST_ENV = "AGENTWRAP_HOST_NAME"
#: Every table whose rows name a session, and the column that does (the registry's last).
KEYED = (("messages", "session"), ("events", "session"), ("state_transitions", "session"),
         ("answers", "session"), ("sessions", "name"))


def host_name(configured: str = "", env: Mapping[str, str] | None = None) -> str:
    """This host's name: ``AGENTWRAP_HOST_NAME``, else ``[host] name``, else the
    hostname's first label (made a valid name: other characters become '-')."""
    given = ((os.environ if env is None else env).get(HOST_ENV, "") or configured).strip()
    if given:
        try:
            return check_session_name(given)
        except InvalidMessage as exc:
            raise ConfigError(f"invalid host name {given!r} ({HOST_ENV} or [host] name)",
                              hint=exc.hint) from None
    label = socket.gethostname().split(".")[0]
    name = re.sub(r"[^A-Za-z0-9._-]", "-", label).lstrip("._-")[:64]
    return name or "host"


@dataclass(frozen=True)
class SessionKeys:
    """How one host's store names sessions in its rows (see the module)."""

    host: str = ""  # this host
    shared: bool = False  # several hosts use the store: rows are keyed HOST/NAME

    def key(self, address: str) -> str:
        """The key stored for ``address`` (``NAME``: this host's, or ``HOST/NAME``)."""
        if not self.shared:
            return address
        return address if "/" in address else f"{self.host}/{address}"

    def local(self, address: str) -> str | None:
        """The name of ``address``'s session if it is this host's (its files,
        its tmux session, its wake-up socket are here), else None."""
        host, _, name = address.rpartition("/")
        return name if not self.shared or host in ("", self.host) else None

    @staticmethod
    def split(address: str) -> tuple[str, str]:
        """``(host, name)`` of ``HOST/NAME``; ``("", name)`` of a bare name."""
        host, _, name = address.rpartition("/")
        return host, name

    def checked(self, address: str) -> tuple[str, str]:
        """``(name, key)`` of the address a message is sent to; its host part
        checked as a name is (the name part is checked with the message)."""
        if not self.shared:
            return address, address
        host, name = self.split(address)
        if host:
            check_session_name(host)
        return name, self.key(address)
