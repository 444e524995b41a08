"""A joined host's terminals for its hub's page (issues 38 and 42): look, and type once taken over.

The hub's page shows every host's sessions; a session's pane lives on its
host. So the hub asks the host over its link, as for a screen
(:mod:`.hub_requests`): ``terminal_open`` watches one of this host's
sessions (the same rule as this host's own page: :func:`.live.open_live_pane`)
and names the watch (a *viewer*); ``terminal_look`` waits until the pane may
have changed since the count the hub last saw (at most :data:`MAX_WAIT_S`,
on the pane's control-mode client, as a local page does) and sends the pane,
each row that is the same as the last one sent to that viewer as ``null``
(:func:`~agentwrap.terminal.live.frame_to_wire`: a streaming reply changes a
few rows a frame); ``terminal_close`` ends the watch. ``terminal_takeover``
hands the hub's page the keyboard (a :class:`~agentwrap.terminal.takeover.Takeover`
here, audited here as ``hub:WHO``; queued messages wait for the person as
they do for a page of this host's own), ``terminal_input`` types its keys,
pastes and resizes, ``terminal_release`` gives it back.

The hub is trusted with what a page of this host's would be (it already
sends, answers and stops), but a hub that vanishes must not hold anything
for ever: a viewer nobody looked through for :data:`IDLE_S` is closed, and
a keyboard without a key for its idle limit is given back, by a reaper
thread that runs while there is something to reap. Every value is checked
before anything is done, and at most :data:`MAX_OPEN` of each are open.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..audit import AuditLog
from ..errors import SessionNotRunning
from ..paths import Paths
from .live import open_live_pane
from .registry import Registry

if TYPE_CHECKING:
    from ..terminal.live import Frame, LivePane
    from ..terminal.takeover import Takeover

#: The longest one look waits for a change (the hub's page looks again at once).
MAX_WAIT_S = 0.5
#: A viewer or keyboard the hub has not used for this long is closed (its page went).
IDLE_S = 30.0
#: At most this many viewers, and as many keyboards, open at once for one hub.
MAX_OPEN = 64
#: The largest keys or paste frame (a page's own frame limit).
MAX_INPUT_CHARS = 200_000
REAP_S = 2.0


@dataclass(eq=False)
class _Viewer:
    pane: LivePane
    sent: Frame | None = None  # the last frame sent: rows the same as it go as null
    used: float = field(default_factory=time.monotonic)


@dataclass(eq=False)
class _Keyboard:
    take: Takeover
    idle_s: float
    used: float = field(default_factory=time.monotonic)


def words(value: object, what: str) -> str:
    """A short word the hub names (who asked, from where, why), checked: it is
    written to this host's audit log."""
    if not isinstance(value, str) or not value or len(value) > 200 or not value.isprintable():
        raise TypeError(f"{what} is a short printable string")
    return value


def _id(value: object, what: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 64 or not value.isalnum():
        raise TypeError(f"{what} is the id terminal_open or terminal_takeover gave")
    return value


class HostTerminals:
    """The viewers and keyboards this host holds for its hub (see the module)."""

    def __init__(self, paths: Paths, host: str, own: Callable[[object], str]) -> None:
        self.paths = paths
        self.host = host
        self._own = own  # HostRequests.own: a bare name of this host's, else refused
        self._viewers: dict[str, _Viewer] = {}
        self._keyboards: dict[str, _Keyboard] = {}
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None

    def _pane(self, session: object) -> LivePane:
        name = self._own(session)
        registry = Registry(self.paths.db_path, host=self.host)
        try:
            return open_live_pane(self.paths, registry, name)
        finally:
            registry.close()

    def _viewer(self, viewer: object) -> _Viewer:
        with self._lock:
            got = self._viewers.get(_id(viewer, "viewer"))
        if got is None:
            raise SessionNotRunning("this terminal view was closed", hint="open it again")
        got.used = time.monotonic()
        return got

    def _keyboard(self, keyboard: object) -> _Keyboard:
        with self._lock:
            got = self._keyboards.get(_id(keyboard, "keyboard"))
        if got is None:
            raise SessionNotRunning("the keyboard was given back", hint="take over again")
        return got

    def _room(self, held: dict[str, Any], what: str) -> None:
        if len(held) >= MAX_OPEN:
            raise SessionNotRunning(f"this host holds {MAX_OPEN} {what} for the hub already",
                                    hint="close a page of the hub's")

    # --- watching ---------------------------------------------------------------------

    def open(self, session: str) -> dict[str, Any]:
        """Watch ``session``'s pane: ``{"viewer": ID}``."""
        with self._lock:
            self._room(self._viewers, "terminal views")
        pane = self._pane(session)
        vid = secrets.token_hex(8)
        with self._lock:
            self._viewers[vid] = _Viewer(pane)
        self._reap_soon()
        return {"viewer": vid}

    def look(self, viewer: str, seen: int | None = None, wait_s: float = 0.0) -> dict[str, Any]:
        """The pane once it may have changed since ``seen`` (or ``wait_s``
        passed; ``seen`` None: now): ``{"changes": N, "frame": ...}``, or
        ``"same": true`` in place of a frame that did not change."""
        from ..terminal.live import frame_to_wire

        v = self._viewer(viewer)
        if seen is not None and (not isinstance(seen, int) or isinstance(seen, bool)):
            raise TypeError("seen is the count the last look gave")
        if not isinstance(wait_s, int | float) or isinstance(wait_s, bool) or wait_s < 0:
            raise TypeError("wait_s is a number of seconds")
        if seen is not None and wait_s > 0:
            v.pane.wait_change(seen, min(float(wait_s), MAX_WAIT_S))
        changes = v.pane.changes()  # before the look: a change during it brings another
        frame = v.pane.capture()  # AgentExited once the session is gone: sent as a refusal
        v.used = time.monotonic()
        if v.sent is not None and frame == v.sent:
            return {"changes": changes, "same": True}
        sent, v.sent = v.sent, frame
        return {"changes": changes, "frame": frame_to_wire(frame, sent)}

    def close(self, viewer: str) -> dict[str, Any]:
        with self._lock:
            v = self._viewers.pop(_id(viewer, "viewer"), None)
        if v is not None:
            v.pane.close()
        return {"closed": v is not None}

    # --- the keyboard -------------------------------------------------------------------

    def takeover(self, session: str, by: str, client: str = "",
                 idle_s: float = 120.0) -> dict[str, Any]:
        """Hand the hub's page ``session``'s keyboard: ``{"keyboard": ID}``
        (audited here as ``hub:BY`` from ``client``)."""
        from ..terminal.takeover import Takeover
        who, where = words(by, "by"), words(client or "hub", "client")
        if not isinstance(idle_s, int | float) or isinstance(idle_s, bool) \
                or not 1 <= idle_s <= 86_400:
            raise TypeError("idle_s is a number of seconds from 1 to 86400")
        with self._lock:
            self._room(self._keyboards, "keyboards")
        name = self._own(session)
        take = Takeover(self._pane(session), AuditLog(self.paths.audit_log), name,
                        f"hub:{who}", where, float(idle_s))
        kid = secrets.token_hex(8)
        with self._lock:
            self._keyboards[kid] = _Keyboard(take, float(idle_s))
        self._reap_soon()
        return {"keyboard": kid}

    def input(self, keyboard: str, kind: str, data: str | None = None,
              cols: int | None = None, rows: int | None = None) -> dict[str, Any]:
        """The page's ``keys``, ``paste`` or ``resize``, through the keyboard it holds."""
        k = self._keyboard(keyboard)
        if kind in ("keys", "paste"):
            if not isinstance(data, str) or len(data) > MAX_INPUT_CHARS:
                raise TypeError(f"data is a string of at most {MAX_INPUT_CHARS} characters")
            (k.take.keys if kind == "keys" else k.take.paste)(data)
        elif kind == "resize":
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in (cols, rows)):
                raise TypeError("cols and rows are whole numbers")
            assert cols is not None and rows is not None
            k.take.resize(cols, rows)
        else:
            raise TypeError("kind is keys, paste or resize")
        k.used = time.monotonic()
        return {"typed": True}

    def release(self, keyboard: str, reason: str = "given back") -> dict[str, Any]:
        why = words(reason, "reason")
        with self._lock:
            k = self._keyboards.pop(_id(keyboard, "keyboard"), None)
        if k is not None:
            k.take.end(why)
        return {"released": k is not None}

    # --- what a hub that went leaves behind ------------------------------------------

    def _reap_soon(self) -> None:
        with self._lock:
            if self._reaper is not None and self._reaper.is_alive():
                return
            self._reaper = threading.Thread(target=self._reap, name="agentwrap-hub-terminals",
                                            daemon=True)
            self._reaper.start()

    def _reap(self) -> None:
        while True:
            time.sleep(REAP_S)
            now = time.monotonic()
            with self._lock:
                views = [k for k, v in self._viewers.items() if now - v.used > IDLE_S]
                keys = [k for k, kb in self._keyboards.items()
                        if now - kb.used > max(kb.idle_s, IDLE_S)]
                gone_views = [self._viewers.pop(k) for k in views]
                gone_keys = [self._keyboards.pop(k) for k in keys]
                empty = not self._viewers and not self._keyboards
                if empty:
                    self._reaper = None
            for v in gone_views:
                v.pane.close()
            for kb in gone_keys:
                kb.take.end("the hub stopped using it")
            if empty:
                return

    def shut(self) -> None:
        """Close every viewer and give every keyboard back (the link is closing)."""
        with self._lock:
            views, keys = list(self._viewers.values()), list(self._keyboards.values())
            self._viewers.clear()
            self._keyboards.clear()
        for v in views:
            v.pane.close()
        for kb in keys:
            kb.take.end("the hub link closed")
