"""One host's calls on the hub's store: decoded, scoped to the host, made idempotent.

Each request of ``agentwrap.link/1`` (:mod:`agentwrap.queue.link_protocol`)
names a store method; :class:`HostCalls` runs it against the hub's store as
the calling host, whose name comes from its credential (never from the
frame). The rule, by what the method is scoped by (:data:`~agentwrap.queue.
link_protocol.METHODS`):

- ``session``: a bare name is the host's own session (the key ``HOST/NAME``);
  ``OTHER/NAME`` is refused (:class:`~agentwrap.errors.ForeignSession`).
- ``batch``: every message ever claimed in the batch must be the host's.
- ``message``: the message must be the host's; reading it (``get``,
  ``get_by_prefix``, ``attempts``) is also allowed to the host that sent it
  (the hub stamps the sender, :data:`SENDER_KEY`), so ``send --wait`` and
  ``status`` of a message to another host's session work from the sender.
- ``send``: a host may send to any session (the hub's policy: ``send
  HOST/NAME`` works from every host), but only as a sender, never
  ``internal`` for another host's session.
- ``read``: answers are filtered to the host's own sessions; the sweeps of
  the whole store (``expire_overdue``) are the hub's job, not a host's.
- ``view``: ``pending_count`` of any host's session (a count, as ``ls``
  shows it on every host).
- ``roster``: a host reports only its own sessions (``register``: a record
  naming another host is refused, the whole report with it, and nothing is
  kept); ``view``: every host's sessions, as the hub knows them
  (:mod:`.roster`), which is the hub's policy of one ``ls`` from any host.

Idempotent by ``(batch_id, phase)``: a supervisor that repeats a call after
a link cut (its outcome was unknown) gets it applied once. ``claim_batch``
with a batch id that already holds the host's in-flight messages returns
those instead of claiming more; ``set_phase`` to the phase recorded is a
no-op by nature; ``record_attempt`` of an attempt already recorded (same
message, batch and number) is not recorded again; ``finish`` of finished
messages changes nothing.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import AgentwrapError, ForeignSession, LinkProtocolError, StoreDown
from ..message import Kind, NewMessage, Phase, Priority, Source, Status
from ..paths import check_session_name
from ..queue import link_protocol as wire
from ..queue.keys import SessionKeys
from ..queue.sqlstore import SQLMessageStore
from ..queue.store import SenderLimit

if TYPE_CHECKING:
    from ..message import Message
    from .remote import HostLinks
    from .roster import Roster

log = logging.getLogger("agentwrap.hub")

#: The metadata key the hub stamps on every message a host stores through it
#: (that host's name, overwriting whatever the frame said): who may read the
#: message back (``send --wait``, ``status``) when it is for another host's session.
SENDER_KEY = "hub_sender"


def _enums(values: Any, enum: Callable[[Any], Any]) -> list[Any] | None:
    return None if values is None else [enum(v) for v in values]


class HostCalls:
    """The calls of host ``host`` on the hub's ``store`` (see the module)."""

    def __init__(self, store: SQLMessageStore, host: str, roster: Roster | None = None,
                 remote: HostLinks | None = None) -> None:
        self.store = store
        self.host = host
        self.prefix = f"{host}/"
        self.roster = roster
        self.remote = remote  # the hub's requests to the other hosts (``relay``)
        self.last_method = ""  # the last frame's method (the hub pushes an enqueue's wake)
        self.roster_changed = False  # the last frame changed the roster (the page is told)

    # --- the scope rule --------------------------------------------------------------

    def own(self, session: str) -> str:
        """The key of the host's session ``session`` (bare or ``HOST/NAME``)."""
        if not isinstance(session, str):
            raise TypeError("session must be a string")
        other, name = SessionKeys.split(session)
        if other and other != self.host:
            raise ForeignSession(f"host {self.host!r} may not act for session {session!r}")
        return f"{self.host}/{name}"

    def mine(self, key: str) -> bool:
        return key.startswith(self.prefix)

    def own_message(self, message_id: str, *, read: bool = False) -> Message:
        """The message, if it is for one of the host's sessions, or (``read``)
        the host sent it: ``send --wait`` and ``status`` of a message to
        another host's session read it through the hub; only the owner acts on it."""
        msg = self.store.get(message_id)
        if not self.mine(msg.session) and not (read and self.sent(msg)):
            raise ForeignSession(
                f"host {self.host!r} may not act on message {message_id[:8]} of another host")
        return msg

    def sent(self, msg: Message) -> bool:
        """Whether this host stored ``msg`` (the hub's stamp, :data:`SENDER_KEY`)."""
        return msg.metadata.get(SENDER_KEY) == self.host

    def own_batch(self, batch_id: str) -> None:
        foreign = [s for s in self.store.batch_sessions(batch_id) if not self.mine(s)]
        if foreign:
            raise ForeignSession(
                f"host {self.host!r} may not act on batch {batch_id[:8]} of another host")

    # --- one frame -------------------------------------------------------------------

    def answer(self, frame: str | bytes) -> str:
        """The response to one frame; :class:`LinkProtocolError` for a frame
        that is not a JSON-RPC request (the caller closes the link)."""
        return self.answer_parsed(wire.parse(frame))

    def answer_parsed(self, data: dict[str, Any]) -> str:
        """:meth:`answer` of a frame already parsed (:func:`~agentwrap.queue.
        link_protocol.parse`)."""
        call_id = data.get("id")
        method, params = data.get("method"), data.get("params", {})
        if not isinstance(method, str) or not isinstance(call_id, int | str) \
                or not isinstance(params, dict):
            raise LinkProtocolError("a frame on the link is not a JSON-RPC 2.0 request")
        self.last_method, self.roster_changed = method, False
        if method not in wire.METHODS:
            return wire.error(call_id, wire.NO_METHOD, f"no method {method[:64]!r} in"
                              f" {wire.PROTOCOL}")
        try:
            return wire.result(call_id, getattr(self, f"_{method}")(**params))
        except LinkProtocolError as exc:  # a value of the wrong shape in the params
            return wire.error(call_id, wire.BAD_PARAMS, exc.message, exc)
        except AgentwrapError as exc:
            return wire.error(call_id, wire.REFUSED, exc.message, exc)
        except (TypeError, ValueError, KeyError) as exc:
            return wire.error(call_id, wire.BAD_PARAMS,
                              f"bad params for {method}: {type(exc).__name__}")
        except Exception:  # the hub's own fault (its database, a bug): the host hears at once
            log.exception("the hub failed to run %s for host %s", method, self.host)
            down = StoreDown(f"the hub could not run {method}",
                             hint="see the hub's log; nothing was recorded that the host's"
                                  " recovery does not find, and the call may be tried again")
            return wire.error(call_id, wire.INTERNAL, down.message, down)

    # --- the methods (the store port's, scoped) ---------------------------------------

    def _enqueue(self, new: Mapping[str, Any], kind: str = "content", internal: bool = False,
                 sender_limit: Mapping[str, Any] | None = None) -> dict[str, Any]:
        msg = self._addressed(new)
        if internal and not self.mine(msg.session):
            raise ForeignSession(
                f"host {self.host!r} may not store agentwrap's own messages for {msg.session!r}")
        limit = None if sender_limit is None else SenderLimit(**sender_limit)
        stored, created = self.store.enqueue(msg, kind=Kind(kind), internal=bool(internal),
                                             sender_limit=limit)
        return {"message": stored, "created": created}

    def _addressed(self, new: Mapping[str, Any]) -> NewMessage:
        """``new`` for its session's key (a bare name is the host's own
        session), stamped with the sending host (:data:`SENDER_KEY`: the
        hub's word, never the frame's)."""
        msg = wire.new_message_from_wire(new)
        other, name = SessionKeys.split(msg.session)
        meta = {k: v for k, v in msg.metadata.items() if k != SENDER_KEY}
        meta[SENDER_KEY] = self.host
        return replace(msg, session=msg.session if other else f"{self.host}/{name}",
                       metadata=meta)

    def _enqueue_many(self, items: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """:meth:`~agentwrap.queue.sqlstore.SQLMessageStore.enqueue_many` on the
        hub: one transaction for every item (never internal); each refused item
        answers its error (``error``: the errors.py class, as a refusal's
        ``data``), the others are stored."""
        if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
            raise LinkProtocolError("enqueue_many takes a list of {new, kind}")
        batch = [(self._addressed(i["new"]), Kind(i.get("kind", "content"))) for i in items]
        return [{"error": got.to_json(), "message": got.message}
                if isinstance(got, AgentwrapError) else {"message": got[0], "created": got[1]}
                for got in self.store.enqueue_many(batch)]

    def _get(self, message_id: str) -> Any:
        return self.own_message(message_id, read=True)

    def _get_by_prefix(self, prefix: str) -> Any:
        msg = self.store.get_by_prefix(prefix)
        return self.own_message(msg.id, read=True)

    def _filters(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"kinds": _enums(params.get("kinds"), Kind),
                "sources": _enums(params.get("sources"), Source),
                "priorities": _enums(params.get("priorities"), Priority)}

    def _peek(self, session: str, now: float | None = None, contains: str | None = None,
              due: bool = False, limit: int | None = None, **filters: Any) -> Any:
        return self.store.peek(self.own(session), now, contains=contains, due=due, limit=limit,
                               **self._filters(filters))

    def _claim_batch(self, session: str, batch_id: str, max_bytes: int,
                     now: float | None = None, contains: str | None = None,
                     limit: int | None = None, **filters: Any) -> Any:
        key = self.own(session)
        self.own_batch(batch_id)
        claimed = [m for m in self.store.in_flight(key) if m.batch_id == batch_id]
        if claimed:  # the same claim again, after a cut: what it claimed then
            return claimed
        return self.store.claim_batch(key, batch_id, int(max_bytes), now, contains=contains,
                                      limit=limit, **self._filters(filters))

    def _set_phase(self, batch_id: str, phase: str) -> Any:
        self.own_batch(batch_id)
        return self.store.set_phase(batch_id, Phase(phase))

    def _in_flight(self, session: str) -> Any:
        return self.store.in_flight(self.own(session))

    def _record_attempt(self, attempt: Mapping[str, Any]) -> None:
        a = wire.attempt_from_wire(attempt)
        self.own_message(a.message_id)
        self.own_batch(a.batch_id)
        if any(b.batch_id == a.batch_id and b.number == a.number
               for b in self.store.attempts(a.message_id)):
            return  # recorded before the link dropped
        self.store.record_attempt(a)

    def _attempts(self, message_id: str) -> Any:
        self.own_message(message_id, read=True)
        return self.store.attempts(message_id)

    def _retry_later(self, batch_id: str, next_attempt_at: float, detail: str) -> int:
        self.own_batch(batch_id)
        return self.store.retry_later(batch_id, float(next_attempt_at), str(detail))

    def _hold(self, batch_id: str, next_attempt_at: float, detail: str) -> int:
        self.own_batch(batch_id)
        return self.store.hold(batch_id, float(next_attempt_at), str(detail))

    def _finish(self, status: str, detail: str = "", message_ids: list[str] | None = None,
                batch_id: str | None = None, consumed_through: str | None = None) -> int:
        if batch_id is not None:
            self.own_batch(batch_id)
        for mid in message_ids or ():
            self.own_message(mid)
        return self.store.finish(Status(status), str(detail), message_ids=message_ids,
                                 batch_id=batch_id, consumed_through=consumed_through)

    def _cancel(self, message_id: str) -> Any:
        self.own_message(message_id)
        return self.store.cancel(message_id)

    def _acknowledge(self, message_id: str, detail: str) -> bool:
        self.own_message(message_id)
        return self.store.acknowledge(message_id, str(detail))

    def _flow_started(self, correlation_id: str) -> float | None:
        return self.store.flow_started(str(correlation_id))

    def _expire_overdue(self, now: float | None = None) -> int:
        return 0  # the hub sweeps its store itself

    def _overdue(self, now: float | None = None) -> bool:
        return False

    def _history(self, session: str | None, limit: int = 200,
                 statuses: list[str] | None = None) -> Any:
        if session is None:
            raise ForeignSession("a host reads the history of its own sessions, one at a time")
        return self.store.history(self.own(session), int(limit), _enums(statuses, Status))

    def _pending_count(self, session: str | None = None) -> int:
        if not isinstance(session, str):
            raise ForeignSession("a host counts the messages of one session at a time")
        other, name = SessionKeys.split(session)  # any host's: `ls` shows every host's count
        host = check_session_name(other) if other else self.host
        return self.store.pending_count(f"{host}/{check_session_name(name)}")

    def _events(self, after: int, session: str | None = None, kinds: list[str] | None = None,
                subject: str | None = None, limit: int = 1000) -> Any:
        key = None
        if session is not None and SessionKeys.split(session)[0] not in ("", self.host):
            other, name = SessionKeys.split(session)  # another host's: its view events only
            key = f"{check_session_name(other)}/{check_session_name(name)}"
        elif session is not None:
            key = self.own(session)
        got = self.store.events(int(after), session=key, kinds=kinds, subject=subject,
                                limit=int(limit))
        return [e for e in got if self.mine(e.session) or e.kind in wire.VIEW_EVENT_KINDS]

    def _last_event_id(self) -> int:
        return self.store.last_event_id()

    # --- the sessions the hub knows (not the store port's) ----------------------------

    def _roster(self) -> Roster:
        if self.roster is None:
            raise LinkProtocolError("this hub keeps no sessions' roster")
        return self.roster

    def _register(self, sessions: list[Mapping[str, Any]], period_s: float) -> int:
        from .roster import MAX_RECORD_BYTES, MAX_SESSIONS

        if not isinstance(sessions, list) or len(sessions) > MAX_SESSIONS:
            raise LinkProtocolError(f"a report carries a list of at most {MAX_SESSIONS} sessions")
        period = float(period_s)
        if not 0.1 <= period <= 3600:
            raise LinkProtocolError("a report's period_s is from 0.1 to 3600 seconds")
        kept = []
        for rec in sessions:
            if not isinstance(rec, Mapping) or not isinstance(rec.get("name"), str):
                raise LinkProtocolError("a reported session is an object with a name")
            host = rec.get("host") or ""
            if host not in ("", self.host):
                raise ForeignSession(
                    f"host {self.host!r} may not report session {host}/{rec['name']}")
            name = check_session_name(self.own(rec["name"]).split("/", 1)[1])  # another's: refused
            out = {**rec, "name": name, "host": self.host}
            if len(json.dumps(out)) > MAX_RECORD_BYTES:
                raise LinkProtocolError(f"a reported session is at most {MAX_RECORD_BYTES} bytes")
            kept.append(out)
        reported = self._roster().register(self.host, kept, period)
        self.roster_changed = reported.changed
        self._state_events(reported.before, kept)
        return reported.count

    def _state_events(self, before: Mapping[str, str], kept: list[dict[str, Any]]) -> None:
        """A ``session.state`` event on the hub's store for each reported session
        whose state is new or changed since the host's last report, so the
        hub's event stream (its page, ``events -f``) hears a host's states as
        they are reported, never from the host's own words for whose they are."""
        changed = [r for r in kept if before.get(r["name"]) != str(r.get("state", ""))]
        if not changed:
            return
        now = time.time()
        with self.store._write() as w:
            for r in changed:
                w.event(now, f"{self.host}/{r['name']}", "session.state", "",
                        state=str(r.get("state", ""))[:64], via="hub")

    def _sessions(self) -> dict[str, Any]:
        return self._roster().listed()

    # --- another host's session, asked of that host (s44-hubans: ``relay``) -------------

    def _relay(self, host: str, request: str, params: Mapping[str, Any]) -> Any:
        """Run one of :data:`~agentwrap.queue.link_protocol.RELAYED` on host
        ``host``'s link for this host (an answer, its status, a screen: the
        hub's policy of one view from any host); who asked is stamped by the
        hub (``source`` ``HOST:...``), and ``host`` checks the session is its own."""
        method = request
        if not isinstance(host, str) or not isinstance(method, str) \
                or not isinstance(params, Mapping):
            raise TypeError("relay takes host, request and params")
        if method not in wire.RELAYED:
            raise ForeignSession(
                f"host {self.host!r} may not have the hub run {method[:64]!r} on host"
                f" {host[:64]!r}", hint="only the session's host, or the hub's page, may")
        if self.remote is None:
            raise LinkProtocolError("this hub relays no requests")
        target = check_session_name(host)
        sent = dict(params)
        if method == "answer":
            source = str(sent.get("source", "cli"))[:64]
            sent["source"] = sent["by"] = f"{self.host}:{source}"
        return self.remote.call(target, method, **sent)
