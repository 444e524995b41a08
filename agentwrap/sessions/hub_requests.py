"""What a joined host does when its hub asks (issue 38's one view): its own sessions only.

The hub serves every host's sessions on one page and one API, but a
session's screen, its agent's processes and the answers typed into it live
on the host that runs it. So the hub asks that host over its link
(:data:`~agentwrap.queue.link_protocol.HUB_METHODS`), and the supervisor
process holding the link runs the request here, against this host's own
state and runtime dirs. The rule: a session is named bare or ``HOST/NAME``
with this host's name; any other host's name is refused
(:class:`~agentwrap.errors.ForeignSession`), and a name this host's registry
does not hold is :class:`~agentwrap.errors.SessionNotFound`: nothing is read
or signalled for it. Every value of the request is checked before anything
is done (a hostile hub gets a refusal, never a keystroke it did not name).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from ..errors import ForeignSession, SessionNotRunning
from ..paths import Paths, check_session_name
from .registry import Registry, SessionRecord

#: The most bytes of a styled screen document sent back (the supervisor's own are far smaller).
MAX_SCREEN_BYTES = 4 * 1024 * 1024


class HostRequests:
    """The hub's requests for host ``host``'s sessions (see the module)."""

    def __init__(self, paths: Paths, host: str, *,
                 stop: Callable[[Paths, list[str]], list[SessionRecord]]) -> None:
        self.paths = paths
        self.host = host
        self._stop = stop

    def own(self, session: object) -> str:
        """The bare name of this host's session ``session``; another host's refused."""
        if not isinstance(session, str):
            raise TypeError("session must be a string")
        host, sep, name = session.rpartition("/")
        if sep and host != self.host:
            raise ForeignSession(f"host {self.host!r} serves only its own sessions, not"
                                 f" {session[:200]!r}")
        name = check_session_name(name)
        registry = Registry(self.paths.db_path, host=self.host)
        try:
            registry.get(name)  # SessionNotFound: nothing done for a name not here
        finally:
            registry.close()
        return name

    def __call__(self, method: str, params: dict[str, Any]) -> Any:
        """Run ``method`` with ``params`` (the link's ``serve``)."""
        if method == "screen":
            return self.screen(**params)
        if method == "stop":
            return self.stop(**params)
        raise TypeError(f"no hub request {method[:64]!r}")

    def screen(self, session: str) -> dict[str, Any]:
        """The session's last screen, plain and styled (base64 of the document
        the supervisor saved; the hub reads it through its own checks)."""
        from ..terminal.styles import DOCUMENT_SUFFIX

        name = self.own(session)
        runtime = self.paths.runtime_dir
        try:
            text = (runtime / f"{name}.screen").read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SessionNotRunning(f"no screen recorded for {name!r} yet") from None
        try:
            with (runtime / f"{name}{DOCUMENT_SUFFIX}").open("rb") as f:
                doc = f.read(MAX_SCREEN_BYTES + 1)
        except FileNotFoundError:
            doc = b""
        if len(doc) > MAX_SCREEN_BYTES:
            doc = b""
        return {"text": text, "document": base64.b64encode(doc).decode("ascii") if doc else None}

    def stop(self, session: str, by: str = "hub") -> dict[str, Any]:
        """Stop the session's agent as ``agentwrap stop`` does here; its record."""
        name = self.own(session)
        (rec,) = self._stop(self.paths, [name])
        return {**rec.to_json(), "host": self.host}
