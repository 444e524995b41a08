"""The :class:`Service` class: the one API every surface calls.

It holds what one service has open (the store, the registry, the audit log,
the answers table, the parsed profiles) and hands each call to the
collaborator that does that job (:mod:`.sending`, :mod:`.hand_over`,
:mod:`.reading`, :mod:`.sessions`, :mod:`.answering`, :mod:`.events`,
:mod:`.takeover`, :mod:`.conversation`), so a
surface sees one object with one set of rules and each job's rules are read
in one place. The method docstrings here are the contract in one line; the
collaborator's say the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..audit import AuditLog
from ..config import Config, load_config
from ..delivery import handover
from ..errors import AgentwrapError
from ..events import Event, Subscription
from ..message import Message, NewMessage, Priority, QueueLimits
from ..paths import Paths
from ..queue.store import MessageStore, QueueMetrics, SenderLimit
from ..sessions.hosts import Forgotten, host_name
from ..sessions.registry import Registry, SessionRecord, Transition
from . import events
from .answering import Answering
from .events import RECHECK_S
from .hand_over import HandOver
from .profiles import ProfileCache
from .reading import Reading
from .sending import Sending
from .sessions import Sessions
from .takeover import Takeovers
from .views import HistoryEntry, QueueView, Sent, SessionView

#: How long a command on a joined host waits for its link's first connection
#: (a hub that refuses or is down is known sooner: the first try's answer).
LINK_WAIT_S = 10.0
#: How often a wait for another host's answer asks that host again (no event bus reaches).
REMOTE_ANSWER_POLL_S = 0.25

if TYPE_CHECKING:  # imported where used: a hook opens a service and must start fast
    from ..answers.intake import AnswerIntake, AnswerResult
    from ..answers.store import Answer, AnswerStore
    from ..config import LaunchChoice
    from ..queue.link import HubStore
    from ..terminal.live import PagePane
    from ..terminal.styles import Screen
    from ..terminal.takeover import Keyboard
    from .conversation import Conversation, Conversations
    from .hosts import Hosts, HostView
    from .links import Links
    from .remote import RemoteHosts


class Service:
    """The operations every surface offers, with one set of rules."""

    def __init__(
        self, paths: Paths, store: MessageStore, registry: Registry, *,
        audit: AuditLog | None = None,
    ) -> None:
        self.paths = paths
        self.store = store
        self.registry = registry
        self.audit = audit if audit is not None else AuditLog(paths.audit_log)
        self.recheck_s = RECHECK_S  # a waiter's look again without an announcement
        self.store_where = ""  # where the queue is, no password (open() says it)
        #: False for a store lent by its owner (the hub's one store, shared by
        #: its links and every service its HTTP API leases): close leaves it open
        self.owns_store = True
        profiles = ProfileCache(paths)
        self._sending = Sending(paths, store, registry, self.audit, profiles)
        self._hand_over = HandOver(paths, store, registry, self.audit)
        self._reading = Reading(paths, store, registry)
        self._sessions = Sessions(paths, store, registry, self.audit, profiles)
        self._answering = Answering(paths, registry, self.audit, profiles)
        self._takeovers = Takeovers(paths, registry, self.audit)
        self._profiles = profiles
        self._conversations_job: Conversations | None = None  # made on first use (as hosts)
        self._hosts_job: Hosts | None = None  # made on first use: a hook never lists hosts
        self._links: Links | None = None
        #: who runs what only a session's own host can do (its screen, stop), for a
        #: session of another host: the hub's links (:mod:`.remote`); None: such a
        #: session is refused, as on a joined host or a shared store
        self.remote: RemoteHosts | None = None

    def _recheck_s(self) -> float:
        """:attr:`recheck_s` as it is at each wait (a caller may change it
        while a wait runs: a test unblocking a waiter does)."""
        return self.recheck_s

    def session_name(self, address: str) -> str:
        """The session a caller names, ``NAME`` or ``HOST/NAME`` (every method
        here that takes a session takes either: :meth:`Registry.resolve`)."""
        return self.registry.resolve(address)

    def own(self, name: str) -> str:
        """The address of this host's session ``name``, for a caller that
        speaks for its own session (a hook, an MCP server): a bare name given to
        the methods here names another host's session when this one has none
        of that name (it may have ended and been cleaned up)."""
        return self.registry.keys.key(name)

    def _maybe(self, address: str | None) -> str | None:
        return None if address is None else self.registry.resolve(address)

    @classmethod
    def open(
        cls, paths: Paths, *, limits: QueueLimits | None = None,
        busy_timeout_ms: int | None = None, link_required: bool = True,
    ) -> Service:
        """Store and registry of ``paths`` (its dirs made and checked first).

        ``limits``: the queue limits to enforce; by default those of the
        user's config, so a config error is reported here. A caller that only
        reads (``doctor``) passes its own and does not depend on the config.
        ``busy_timeout_ms``: how long a locked database is waited for before
        :class:`~agentwrap.errors.StoreLocked` (a hook, which must answer at
        once, waits ~100 ms; by default the store's own timeout).

        On a host joined to a hub (a link file in the state dir) the queue is
        the hub's, over the link (:meth:`_linked`), never this host's file: a
        link that does not come up raises
        :class:`~agentwrap.errors.HubUnreachable` here (exit 75), unless
        ``link_required`` is False (a part that lives beside a supervisor and
        must start while the hub is away: its calls fail closed until the
        link is back).
        """
        from ..queue import db
        from ..queue.backend import describe, linked_store, open_store, store_url

        paths.ensure()
        if limits is None:
            cfg = load_config(paths)
            limits = cfg.limits
        else:
            try:
                cfg = load_config(paths)
            except AgentwrapError:  # the caller reads only, and reports the config itself
                cfg = Config()
        wait = db.BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms
        hub = linked_store(paths.state_dir, wait_s=LINK_WAIT_S, required=link_required)
        if hub is not None:  # a joined host: the hub's queue and every host's sessions
            return cls._linked(paths, hub, wait)
        url = store_url(cfg.store.url)
        registry = Registry(paths.db_path, events_dir=paths.events_dir, busy_timeout_ms=wait,
                            url=url, host=host_name(cfg.host.name),
                            heartbeat_s=cfg.host.heartbeat_s)
        try:
            store = open_store(paths.db_path, limits, url=url, events_dir=paths.events_dir,
                               busy_timeout_ms=wait, host=registry.host)
        except BaseException:
            registry.close()
            raise
        svc = cls(paths, store, registry)
        svc.store_where = describe(paths.db_path, url)
        return svc

    @classmethod
    def _linked(cls, paths: Paths, hub: HubStore, wait_ms: int) -> Service:
        """The service of a host joined to a hub (issue 38): the queue is the
        hub's, over this host's link, so what a command sends, cancels or
        reads is the hub's and nothing is kept here; the sessions are this
        host's own plus the other hosts' the hub knows
        (:class:`~agentwrap.sessions.linked.LinkedRegistry`). The link was
        up when this returns (else :class:`~agentwrap.errors.HubUnreachable`)."""
        from ..sessions.linked import LinkedRegistry

        try:
            registry = LinkedRegistry(paths.db_path, hub=hub, events_dir=paths.events_dir,
                                      busy_timeout_ms=wait_ms)
        except BaseException:
            hub.close()
            raise
        svc = cls(paths, hub, registry)
        svc.store_where = f"hub {hub.client.link.url} (host {hub.host})"
        from .remote import ThroughHub

        svc.remote = ThroughHub(hub)  # another host's session: asked of it through the hub
        return svc

    def close(self) -> None:
        if self.owns_store:
            self.store.close()
        self.registry.close()
        self._answering.close()

    @property
    def answers(self) -> AnswerStore:
        """The answers table (opened on first use: most commands never need it)."""
        return self._answering.store

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- messages: admission (.sending) -----------------------------------------------

    def send(self, new: NewMessage, *, raw: bool = False,
             sender_limit: SenderLimit | None = None) -> Sent:
        """Store ``new`` durably for its session and wake the session's
        supervisor (:meth:`Sending.send <.sending.Sending.send>`)."""
        return self._sending.send(new, raw=raw, sender_limit=sender_limit)

    def send_many(self, news: Sequence[NewMessage]) -> list[Sent | AgentwrapError]:
        """:meth:`send` for several senders at once, stored in one transaction
        (:meth:`Sending.send_many <.sending.Sending.send_many>`)."""
        return self._sending.send_many(news)

    def send_as_agent(
        self, caller: str, target: str, content: str, *,
        priority: Priority | str = Priority.NORMAL, metadata: dict[str, Any] | None = None,
    ) -> Sent:
        """A message from the agent of session ``caller`` to session ``target``,
        carrying the caller's flow on, within the agents' limits
        (:meth:`Sending.send_as_agent <.sending.Sending.send_as_agent>`)."""
        return self._sending.send_as_agent(caller, target, content, priority=priority,
                                           metadata=metadata)

    def cancel(self, message_id: str) -> Message:
        """Cancel a pending message (id or unique prefix), audited
        (:meth:`Sending.cancel <.sending.Sending.cancel>`)."""
        return self._sending.cancel(message_id)

    # --- messages a reader takes itself (.hand_over) --------------------------------------

    def consume(
        self, session: str, *, channel: str, max_bytes: int = 10 * 1024,
        source: str | None = None, contains: str | None = None, limit: int | None = None,
    ) -> list[Message]:
        """Hand the due messages to a reader that delivers them itself, recorded
        ``delivered`` through ``channel`` (:meth:`HandOver.consume <.hand_over.HandOver.consume>`)."""
        return self._hand_over.consume(session, channel=channel, max_bytes=max_bytes,
                                       source=source, contains=contains, limit=limit)

    def hand_over(self, session: str, *, channel: str, limit_chars: int, at_start: bool = False,
                  log: Callable[[str], None] = lambda _: None) -> str:
        """The session's due messages that fit in ``limit_chars``, framed, for a
        reader that shows the text to the model itself
        (:meth:`HandOver.hand_over <.hand_over.HandOver.hand_over>`)."""
        return self._hand_over.hand_over(session, channel=channel, limit_chars=limit_chars,
                                         at_start=at_start, log=log)

    def claim_hand_over(self, session: str, *, channel: str, limit_chars: int,
                        log: Callable[[str], None] = lambda _: None) -> handover.Claimed | None:
        """What :meth:`hand_over` hands over, claimed but not yet recorded
        (:meth:`HandOver.claim_hand_over <.hand_over.HandOver.claim_hand_over>`)."""
        return self._hand_over.claim_hand_over(session, channel=channel,
                                               limit_chars=limit_chars, log=log)

    def first_turn(self, session: str, channel: str) -> list[str]:
        """A model turn has run since the session started: what its SessionStart
        hook handed over went to the model in it
        (:meth:`HandOver.first_turn <.hand_over.HandOver.first_turn>`)."""
        return self._hand_over.first_turn(session, channel)

    def inbox(
        self, session: str, *, source: str | None = None, contains: str | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """What :meth:`consume` with the same filters would hand over now,
        changing nothing (:meth:`HandOver.inbox <.hand_over.HandOver.inbox>`)."""
        return self._hand_over.inbox(session, source=source, contains=contains, limit=limit)

    def acknowledge(
        self, session: str, message_id: str, status: str, note: str | None = None, *,
        channel: str,
    ) -> Message:
        """The agent of ``session`` acknowledges a message it got, once
        (:meth:`HandOver.acknowledge <.hand_over.HandOver.acknowledge>`)."""
        return self._hand_over.acknowledge(session, message_id, status, note, channel=channel)

    # --- reading messages (.reading) ------------------------------------------------------

    def get(self, message_id: str) -> Message:
        """A message by its full id or a unique prefix a person typed (4+ characters)."""
        return self._reading.get(message_id)

    def message(self, message_id: str) -> HistoryEntry:
        """One message (id or unique prefix) with every attempt at it."""
        return self._reading.message(message_id)

    def peek(self, session: str, now: float | None = None) -> QueueView:
        """What waits for ``session`` and why, never consuming anything
        (:meth:`Reading.peek <.reading.Reading.peek>`)."""
        return self._reading.peek(self.session_name(session), now)

    def history(self, session: str | None = None, limit: int = 200) -> list[HistoryEntry]:
        """Messages newest first (of one session, or all), each with its attempts.
        An unknown session is an error, not an empty history."""
        return self._reading.history(self._maybe(session), limit)

    def metrics(self, session: str | None = None) -> QueueMetrics:
        """Delivery figures from the persisted rows (one session, or all)."""
        return self._reading.metrics(self._maybe(session))

    def wait_for_end_state(self, message_id: str, timeout: float) -> Message | None:
        """Block until the message reaches a terminal status; None after ``timeout``.
        Woken by the event bus, looking again every :attr:`recheck_s`
        (:meth:`Reading.wait_for_end_state <.reading.Reading.wait_for_end_state>`)."""
        return self._reading.wait_for_end_state(message_id, timeout, self._recheck_s)

    # --- answering the question a waiting agent shows (.answering) -----------------------

    def answer(
        self, session: str, *, option: int | str | None = None,
        options: Sequence[int | str] | None = None, text: str | None = None,
        deny: bool = False, question_id: str | None = None, source: str = "cli",
        answers: Mapping[str, Any] | None = None,
    ) -> AnswerResult:
        """Store an answer to the question ``session``'s agent shows, and wake its
        supervisor, which types it with the agent's own keys only while the same
        question is open (:mod:`agentwrap.answers.keys`).

        The rules are :meth:`AnswerIntake.answer
        <agentwrap.answers.intake.AnswerIntake.answer>`'s, which the
        answer folder and the answer policy inside the supervisor use too.
        """
        address = self.session_name(session)
        rec = self._elsewhere(address)
        if rec is not None:  # its host's intake takes it, over the link (s44-hubans)
            from .remote import answer_result

            got = self._ask(rec, "answer", option=option,
                            options=None if options is None else list(options), text=text,
                            deny=deny, question_id=question_id, source=source,
                            answers=None if answers is None else dict(answers), by=source)
            result = answer_result(got, rec.host, address)
            self.audit.write(event="answer_requested", session=address, answer=result.answer.id,
                             question=result.question.id, source=source, via="hub")
            return result
        return self.intake.answer(address, option=option, options=options, text=text,
                                  deny=deny, question_id=question_id, source=source,
                                  answers=answers)

    @property
    def intake(self) -> AnswerIntake:
        return self._answering.intake

    @property
    def links(self) -> Links:
        """One-tap answer links: what one would answer, and answering with it once
        (:class:`~agentwrap.service.links.Links`)."""
        if self._links is None:
            from .links import Links

            self._links = Links(self.paths, self.session_name, self.state,
                                lambda: self._answering.store,
                                lambda: load_config(self.paths).answer_rules,
                                lambda: self.intake)
        return self._links

    def answer_status(self, answer_id: str) -> Answer:
        """One answer by id; another host's (``HOST/ID``, as :meth:`answer`
        names it) asked of that host through :attr:`remote`."""
        if "/" in answer_id and self.remote is not None:
            from ..errors import InvalidAnswer, LinkProtocolError
            from ..queue import link_protocol as wire
            from .remote import answer_back

            try:
                host, aid = wire.split_answer(answer_id)
            except (LinkProtocolError, AgentwrapError):
                raise InvalidAnswer(f"no answer {answer_id[:80]!r}") from None
            return answer_back(self.remote.call(host, "answer_status", answer=aid), host)
        return self._answering.status(answer_id)

    def wait_answer(self, answer_id: str, timeout: float) -> Answer:
        """Block until the answer is applied, stale or failed, or ``timeout``
        passed (then it is returned still pending); woken by the event bus,
        or (another host's answer: no bus reaches here) asked again every
        :data:`REMOTE_ANSWER_POLL_S`."""
        if "/" in answer_id and self.remote is not None:
            deadline = time.monotonic() + timeout
            while True:
                got = self.answer_status(answer_id)
                if got.ended or time.monotonic() >= deadline:
                    return got
                time.sleep(min(REMOTE_ANSWER_POLL_S, max(0.0, deadline - time.monotonic())))
        return self._answering.wait(answer_id, timeout, self._recheck_s)

    # --- hosts (.hosts) -------------------------------------------------------------------

    @property
    def _hosts(self) -> Hosts:
        if self._hosts_job is None:
            from .hosts import Hosts

            self._hosts_job = Hosts(self.store, self.registry, self.audit)
        return self._hosts_job

    def hosts(self) -> list[HostView]:
        """Every host the store knows (this one only on SQLite), with its
        liveness, last beat, running sessions and pending messages."""
        return self._hosts.listed()

    def forget_host(self, name: str, *, by: str) -> Forgotten:
        """Forget a silent host for good: its sessions end, its pending
        messages fail, its row goes (one transaction, audited)."""
        return self._hosts.forget(name, by=by)

    # --- sessions (.sessions) -------------------------------------------------------------

    def sessions(self, include_ended: bool = False) -> list[SessionView]:
        """Every session (running and stale; ended ones too if asked), oldest
        first, with its pending count."""
        return self._sessions.listed(include_ended)

    def state(self, name: str) -> SessionRecord:
        """One session's record: state, and the signal, rule and evidence that
        decided it; ``liveness`` is checked now, never stored."""
        return self._sessions.state(name)

    def transitions(self, name: str, after_id: int = 0) -> list[Transition]:
        """The session's state changes after ``after_id``, oldest first (bounded log)."""
        return self._sessions.transitions(self.session_name(name), after_id)

    def _elsewhere(self, address: str) -> SessionRecord | None:
        """The record of ``address`` when it is another host's and a
        :attr:`remote` asks it, else None (this host's, or nobody to ask)."""
        if self.remote is None:
            return None
        rec = self.registry.get(address)
        return None if self.registry.here(rec) else rec

    def _ask(self, rec: SessionRecord, method: str, **params: Any) -> Any:
        assert self.remote is not None
        return self.remote.call(rec.host, method, session=rec.name, **params)

    def screen(self, name: str) -> str:
        """The screen the session's last verdict was based on (to debug a profile)."""
        address = self.session_name(name)
        rec = self._elsewhere(address)
        if rec is not None:
            from .remote import screen_text

            return screen_text(self._ask(rec, "screen"), address)
        return self._sessions.screen(address)

    def screen_view(self, name: str) -> Screen:
        """The same screen with its colours, for a person watching
        (:meth:`Sessions.screen_view <.sessions.Sessions.screen_view>`); another
        host's asked of it through :attr:`remote`."""
        address = self.session_name(name)
        rec = self._elsewhere(address)
        if rec is not None:
            from . import remote

            return remote.screen_view(self._ask(rec, "screen"), address)
        return self._sessions.screen_view(address)

    def screen_stamps(self, session: str | None = None) -> dict[str, int]:
        """When each session's styled screen was last saved (ns), cheaply."""
        return self._sessions.screen_stamps(self._maybe(session))

    def live_pane(self, name: str) -> PagePane:
        """The session's tmux pane as a page's terminal reads it (tmux only):
        this host's, or on the hub another host's, through its link."""
        address = self.session_name(name)
        return self._takeovers.pane(address, self._elsewhere(address), self.remote)

    def take_over(self, name: str, *, by: str, client: str, idle_s: float = 120.0) -> Keyboard:
        """Hand one page the session's keyboard (audited on its own host; ``end()``
        gives it back, as ``serve`` does after ``idle_s`` without a key)."""
        address = self.session_name(name)
        return self._takeovers.begin(address, self._elsewhere(address), self.remote, by=by,
                                     client=client, idle_s=idle_s)

    def launch_choices(self) -> tuple[LaunchChoice, ...]:
        """The sessions the person listed for the dashboard to start
        (``[[dashboard.launch]]``, their own config file only)."""
        return self._sessions.launch_choices()

    def start(self, choice: str, name: str | None = None, *, by: str) -> SessionRecord:
        """Start the listed session ``choice`` as ``run --detach`` does; nothing
        but a listed entry (:meth:`Sessions.start <.sessions.Sessions.start>`)."""
        return self._sessions.start(choice, name, by=by)

    def stop(self, name: str, *, by: str) -> SessionRecord:
        """Stop a running session's agent (its whole process tree), as
        ``agentwrap stop`` does; the record with its exit code."""
        address = self.session_name(name)
        rec = self._elsewhere(address)
        if rec is not None:
            from ..errors import SessionNotRunning
            from .remote import stopped

            if rec.ended is not None:
                raise SessionNotRunning(f"session {address!r} has ended already")
            back = stopped(self._ask(rec, "stop", by=by), rec)
            self.audit.write(event="stopped", session=address, by=by)
            return back
        return self._sessions.stop(address, by=by)

    def dismiss(self, name: str, *, by: str) -> SessionRecord:
        """Forget an ended session (record, state log, last screen; its messages
        stay in the history), audited (:meth:`Sessions.dismiss <.sessions.Sessions.dismiss>`)."""
        return self._sessions.dismiss(self.session_name(name), by=by)

    def prune_ended(self, now: float | None = None) -> list[str]:
        """Forget the ended sessions past ``[sessions] keep_ended_s``; their names."""
        return self._sessions.prune(now)

    def conversation(self, name: str, *, limit: int = 500) -> Conversation:
        """The session's conversation in order: the person's prompts, the
        messages delivered (with their ACK), the agent's replies, tool calls,
        questions and answers, from the best source its agent offers
        (:class:`.conversation.Conversations`)."""
        if self._conversations_job is None:
            from .conversation import Conversations

            self._conversations_job = Conversations(
                self.paths, self.store, self.registry, self._profiles,
                answers=lambda session: self._answering.store.recent(session, limit=200))
        return self._conversations_job.read(self.session_name(name), limit=limit)

    def check_store(self) -> None:
        """Raise :class:`StoreCorrupt` unless the store's integrity check passes."""
        self.store.check_integrity()

    def check_host_name(self) -> None:
        """Raise :class:`HostNameTaken` when another machine that is up holds
        this host's name in the shared store (cloned machines share a hostname)."""
        self.registry.check_name()

    # --- events (.events) -----------------------------------------------------------------

    def events(
        self, after_id: int = 0, session: str | None = None, *,
        kinds: Iterable[str] | None = None, subject: str | None = None, limit: int = 1000,
    ) -> list[Event]:
        """Events with ids above ``after_id``, oldest first (see :data:`agentwrap.events.KINDS`)."""
        return self.store.events(after_id, session=self._maybe(session), kinds=kinds, subject=subject,
                                 limit=limit)

    def last_event_id(self) -> int:
        """The newest event's id (0 if none): follow from here for only new ones."""
        return self.store.last_event_id()

    def subscribe(self) -> Subscription:
        """A wake-up for every commit that records events, from any process.
        Close it (or use it as a context manager) when done."""
        return events.subscribe(self.paths, self.store)

    def follow_events(
        self, after_id: int = 0, session: str | None = None, *,
        kinds: Iterable[str] | None = None,
    ) -> Iterator[Event]:
        """Every event after ``after_id``, then each new one as it is committed,
        forever (:func:`.events.follow`), looking again every :attr:`recheck_s`."""
        return events.follow(self.store, self.paths, after_id, self._maybe(session), kinds,
                             self._recheck_s)
