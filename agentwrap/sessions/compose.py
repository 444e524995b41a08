"""The composition root: what one session's supervisor is made of, built in one place.

:func:`build_supervisor` opens what the session's parts share once (the
message store, used by the delivery engine, the read file and Codex's
app-server delivery; the answer store, used by typing answers, the answer folder's
intake and the answer rules), builds each part, and hands them to the
:class:`~agentwrap.sessions.supervisor.Supervisor` as one list. The stores are
closed once, by the last part, after every part that used them has closed.

The order of the list is the order the supervisor calls each hook in
(:mod:`agentwrap.sessions.parts`), and it matters:

1. telling (:class:`~.parts.TellingPart`): the answer rules decide on the
   question first, then the person is told of it unless a rule answers it;
   and a rule's answer given through the agent's hook is announced ...
2. ... before it is recorded in the answers table: the answer folder
   (:class:`~.parts.AnswerFolderPart`: files dropped in become pending
   answers) comes before typing the answers (:class:`~.parts.AnswersPart`),
   and both before any message is typed, as an answer closes the dialog a
   message would wait behind; the answerer typing (``typing``) keeps telling
   and the rules off the screens it goes through;
3. Aider's read file (:class:`~.parts.ReadFilePart`) before the engine: it
   reaches the busy agent, and when the session ends, what it holds is
   settled (or goes back to the queue) before the engine gives every
   undelivered message its end state;
4. the agent's native channel's delivery (:class:`~.parts.NativeDeliveryPart`,
   :mod:`.native`: Codex's app-server), before the typing: it takes what is due while the agent is idle, and its
   batches are never typed;
5. the delivery engine (:class:`~.parts.DeliveryPart`), then the notice of an
   unexpected exit (:class:`~.parts.ExitNoticePart`), sent once the end is
   recorded; both tell the person through the same channels as telling does
   (:mod:`agentwrap.delivery.notices`: desktop, ``[notify] urls``);
6. the native channel's keeper (:class:`~.parts.NativeKeeperPart`): starts
   its server again when it died;
7. the handoff record (continuity, :class:`~.parts.ContinuityPart`): kept
   current as states are recorded, its last word once the agent's end is;
8. the shared stores (:class:`~.parts.SharedStores`), closed last.

Closing runs in the same order; the answer parts close before the read file
and the engine (until issue 21, after them): they touch other tables, so
nothing depends on it.

Beside the supervisor run its *companions* (:data:`Companion`): the
project's feedback watchers and schedules, the native hooks' server. Both
ways a supervisor runs (a process of its own,
:func:`agentwrap.sessions.lifecycle.supervise`, or a thread of the
supervisor host, :mod:`agentwrap.sessions.host`) start them with
:func:`start_companions`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..audit import AuditLog
from ..config import AnswerRule, Config
from ..detect.profiles import Profile
from ..detect.structured import structured_source
from ..errors import InvalidMessage, UnsafePath
from ..message import Kind, Message, Status, acknowledged
from ..paths import Paths, check_session_name
from ..queue.keys import host_name
from ..queue.store import MessageStore
from ..terminal.base import Display, Terminal
from .native import NativeSession, native_channel
from .parts import (
    AnswerFolderPart,
    AnswersPart,
    ContinuityPart,
    DeliveryPart,
    ExitNoticePart,
    NativeDeliveryPart,
    NativeKeeperPart,
    Part,
    ReadFilePart,
    SharedStores,
    TellingPart,
)
from .registry import Registry, SessionRecord
from .supervisor import Supervisor, Timing
from .turn_end import TURN_END_CHANNEL

if TYPE_CHECKING:
    from ..answers.auto import AutoAnswer
    from ..answers.folder import AnswerFolder
    from ..answers.store import AnswerStore
    from ..answers.telling import Teller
    from ..continuity.collect import Collector
    from ..delivery.notices import AnswerLinks, Notices
    from ..detect.detector import HookSource
    from ..queue.store import MessageStore
    from ..session_options import SessionOptions
    from .hosts import HostSeen

log = logging.getLogger("agentwrap.session")


def build_supervisor(
    paths: Paths, cfg: Config, rec: SessionRecord, term: Terminal,
    profile: Profile, registry: Registry, env: dict[str, str],
    serving: Callable[[str], Callable[[str, dict[str, Any]], Any]] | None = None,
) -> Supervisor:
    """The supervisor of session ``rec`` on ``term``, with its parts in the order
    the module docstring gives; ``serving``: on a joined host, what runs the
    hub's requests for this host's sessions over the link
    (:class:`~.hub_requests.HostRequests`)."""
    from ..answers.keys import Answerer
    from ..answers.store import AnswerStore
    from ..answers.telling import Teller
    from ..delivery.engine import DeliveryEngine
    from ..queue.backend import configured_store, linked_store

    channels = rec.options.channels or ()
    hooks: HookSource | None = None
    questions = None
    start_hook: Callable[[], bool] | None = None
    if rec.options.has_hooks():  # hand-over and signals, or signals only
        from ..answers.hook_questions import HookQuestions
        from .signals import HookSignals, awaits_start_hook

        hooks = HookSignals(paths, rec.name, since=rec.started)
        questions = HookQuestions(paths, rec.name, since=rec.started)
        if profile.channels.session_start_at_launch:
            start_hook = awaits_start_hook(paths, rec.name, rec.started)
    elif TURN_END_CHANNEL in channels:  # Aider's notifications command (no hooks)
        from .channels import turn_end_path
        from .turn_end import TurnEndMark

        hooks = TurnEndMark(turn_end_path(paths, rec.name), profile.name)
    # a hub's, if this host joined one; the link serves the hub's requests for this host's
    # sessions (their screens, stop: the one view through the hub)
    hub = linked_store(paths.state_dir, serving=serving)
    if hub is not None:  # the hub learns this host's sessions from its reports
        from .linked import reporter

        hub.report_every(cfg.host.heartbeat_s, reporter(paths.db_path, hub.host),
                         events_dir=paths.events_dir)
    store: MessageStore = hub or configured_store(paths.db_path, cfg,
                                                  events_dir=paths.events_dir)
    store.listen(wake=_woken_by_other_hosts(paths))
    answers = AnswerStore(paths.db_path, events_dir=paths.events_dir, url=registry.url,
                          host=registry.host)
    shared = SharedStores(store, answers)
    try:
        parts: list[Part] = []
        audit = AuditLog(paths.audit_log)
        reader: ReadFilePart | None = None
        held: Callable[[], Collection[str]] | None = None
        if "read-file" in channels:
            from ..delivery.read_channel import ReadFileChannel
            from .channels import read_file_path

            channel = ReadFileChannel.for_session(paths, cfg, profile, rec,
                                                  read_file_path(paths, rec.name), store=store)
            reader, held = ReadFilePart(channel), channel.batches
        # the agent's native channel (Codex's app-server, issue 24): made once the
        # engine says whether an ACK is asked; typing leaves it what it takes
        # (one channel per session mode) and never resumes its batches
        native: NativeSession | None = None
        read_held = held

        def taken() -> frozenset[Kind]:
            return native.takes() if native is not None else frozenset()

        def held_all() -> set[str]:
            return {*(read_held() if read_held else ()), *(native.held() if native else ())}

        engine = DeliveryEngine.for_session(
            paths, cfg, profile, rec, store=store,
            foreign_batches=_foreign_batches(paths, rec.name, held_all),
            awaits_start_hook=start_hook or (lambda: False), taken_kinds=taken)
        native = _native_session(paths, cfg, profile, rec, registry, env, term, store, audit,
                                 engine.require_ack)
        from ..delivery.push import notices_of

        notices = notices_of(cfg.notify)
        _tell_silent_hosts(notices)
        teller = Teller(rec.name, cfg.notify, audit,
                        display=term.display if isinstance(term, Display) else None,
                        notices=notices, host=registry.host or rec.host or host_name(cfg.host.name),
                        links=_answer_links(paths, cfg))
        folder, policy = _answer_sources(paths, cfg, profile, registry, answers, rec, teller)
        parts.append(TellingPart(rec.name, teller, policy, questions))
        if folder is not None:
            parts.append(AnswerFolderPart(folder))
        parts.append(AnswersPart(Answerer(answers, profile, rec.name, audit,
                                          server=native.replies if native else None)))
        if reader is not None:
            parts.append(reader)
        if native is not None:  # before the typing: it takes what is due while idle
            parts.append(NativeDeliveryPart(native.delivery))
        engine.escalation.notices = notices
        engine.escalation.host = teller.host
        parts.append(DeliveryPart(engine))
        parts.append(ExitNoticePart(rec.name, teller.host, notices))
        if native is not None:  # its server kept running
            parts.append(NativeKeeperPart(native.keeper))
        collector = _collector(paths, cfg, rec, hooks=rec.options.has_hooks())
        if collector is not None:
            parts.append(ContinuityPart(collector))
        parts.append(shared)
        return Supervisor(
            rec.name, term, profile, paths, registry, parts=parts,
            structured=native.structured if native is not None else structured_source(
                profile.structured, env, term.agent_pid),
            hooks=hooks, hook_questions=questions,
            trust_folder=rec.options.trust_folder,
            timing=Timing(idle_tick_s=cfg.run.idle_tick_s,
                          idle_poll_s=cfg.host.hub_poll_s if hub is not None else None),
            start_pending=_start_pending(start_hook),
        )
    except BaseException:
        shared.close(None)
        raise


_silent_hosts_told: list[Notices] = []  # the notices this process tells silent hosts to


def _tell_silent_hosts(notices: Notices) -> None:
    """A host of the shared store that falls silent (its heartbeat past its
    deadline) is told to the person as ``[notify]``'s "unreachable" event: by
    this process's beat (one per process, whatever its sessions), once per silence."""
    from .hosts import HostBeat

    _silent_hosts_told[:] = [notices]  # the config as it is now
    if _told_silent not in HostBeat.listeners:
        HostBeat.listeners.append(_told_silent)


def _told_silent(seen: HostSeen) -> None:
    from ..delivery.notices import Event, event_notice, when

    for notices in _silent_hosts_told:
        notices.tell(event_notice(
            Event.UNREACHABLE, "", seen.name,
            f"no heartbeat since {when(seen.heartbeat)}: its sessions may be stalled",
            f"host:{seen.name}", seen.heartbeat))


def _woken_by_other_hosts(paths: Paths) -> Callable[[str], object]:
    """A message or an answer another host stored for a session (a shared
    store's NOTIFY) wakes this host's supervisor of it, as a local ``send``
    does; a name that is no session of this host reaches no socket."""
    from ..datagram import wake

    def woken(name: str) -> bool:
        try:
            check_session_name(name)
        except InvalidMessage:
            return False
        return wake(paths, name)

    return woken


def _native_session(
    paths: Paths, cfg: Config, profile: Profile, rec: SessionRecord, registry: Registry,
    env: dict[str, str], term: Terminal, store: MessageStore, audit: AuditLog, require_ack: bool,
) -> NativeSession | None:
    """The agent's native channel as this supervisor reads and drives it (its
    word wakes the supervisor; the pid of a server started again goes into the
    session's record), or None: the agent has none, or its launch started none."""
    channel = native_channel(profile.name)
    if channel is None:
        return None
    from ..datagram import wake

    name = rec.name

    def record(options: SessionOptions) -> None:
        registry.update(name, options=options)

    return channel.open(
        paths, cfg, profile, rec.options, name=name, command=list(rec.command),
        cwd=Path(rec.cwd), env=env, store=store, audit=audit, require_ack=require_ack,
        wake=lambda: wake(paths, name, b"native"), agent_pid=term.agent_pid,
        options=lambda: registry.get(name).options, record=record)


def _start_pending(awaits: Callable[[], bool] | None) -> Callable[[], str | None] | None:
    """Why the agent's start-up is not complete, for the detector (None: it is)."""
    if awaits is None:
        return None
    return lambda: "its SessionStart hook has not run yet" if awaits() else None


def _foreign_batches(paths: Paths, session: str,
                     held: Callable[[], Collection[str]] | None) -> Callable[[], set[str]]:
    """The batches in flight through a channel other than typing, which the
    engine must never resume (type): Aider's read file's, and what the
    SessionStart hook handed over, which goes to the model in the first turn."""
    from ..delivery.handover import started

    path = paths.started_batches(session)

    def batches() -> set[str]:
        return {*started(path), *(held() if held is not None else ())}

    return batches


def _collector(paths: Paths, cfg: Config, rec: SessionRecord, hooks: bool) -> Collector | None:
    """The updater of this launch's handoff record (None: continuity is off for it)."""
    from ..continuity.launch import collector
    from ..queue.backend import configured_store

    def messages() -> list[Message]:
        store = configured_store(paths.db_path, cfg)
        try:
            return store.history(rec.name, limit=100)
        finally:
            store.close()

    def unacknowledged(delivered: Sequence[str]) -> set[str]:
        store = configured_store(paths.db_path, cfg)
        try:
            return {i for i in delivered
                    if acknowledged(Status.DELIVERED, store.attempts(i)) is False}
        finally:
            store.close()

    return collector(paths, cfg.continuity, rec.name, Path(rec.cwd), rec.started, messages, hooks,
                     unacknowledged)


def _answer_sources(
    paths: Paths, cfg: Config, profile: Profile, registry: Registry, answers: AnswerStore,
    rec: SessionRecord, teller: Teller,
) -> tuple[AnswerFolder | None, AutoAnswer | None]:
    """The answers taken inside the supervisor: files dropped in the session's answer
    folder, and the user's answer rules; both through the intake's checks."""
    from ..answers.auto import AutoAnswer
    from ..answers.folder import AnswerFolder
    from ..answers.intake import AnswerIntake

    audit = AuditLog(paths.audit_log)
    intake = AnswerIntake(paths, registry, lambda: answers, audit, lambda _name: profile)
    folder: AnswerFolder | None = None
    try:
        folder = AnswerFolder(paths, rec.name, intake, audit).open()
    except (OSError, UnsafePath) as exc:  # answers still come through the CLI and the API
        log.warning("no answer folder for %s: %s", rec.name, exc)
    from ..answers.rules import LiveRules

    # the person's rules as they are when a question comes (a rule added while the
    # session runs answers on the screen: issue 35), then the ones opted in at launch
    rules = LiveRules(paths, profile.name, Path(rec.cwd), cfg.answer_rules,
                      opted_in_rules(profile, trust_folder=rec.options.trust_folder))
    policy = AutoAnswer(rec.name, profile.name, rules, intake, answers, audit,
                        announce=teller.announce, project=rec.cwd,
                        on_timeout=rec.options.answers(cfg.answers))  # run --on-timeout wins
    return folder, policy


def opted_in_rules(profile: Profile, *, trust_folder: bool) -> tuple[AnswerRule, ...]:
    """The answers a person opted in to (``--trust-folder``) for the dialogs whose
    option is named by label (``opt_in_option``), as answer rules: typed like
    any rule's answer, after the user's own rules (an ``ask`` rule of theirs
    still leaves it to them). Dialogs with fixed ``keys`` are answered by the
    supervisor itself."""
    return tuple(
        AnswerRule(name=f"--{d.opt_in.replace('_', '-')}", agent=profile.name, kind=d.kind,
                   option=d.opt_in_option)
        for d in profile.dialogs
        if d.opt_in_option and d.opt_in == "trust_folder" and trust_folder
    )


# --- companions -----------------------------------------------------------------------------


class Stoppable(Protocol):
    def stop(self) -> None: ...


#: Something started beside a session's supervisor and stopped with it; None
#: when it has nothing to do for that session. The caller hands it in, so this
#: layer depends on none of them (:mod:`agentwrap.feedback`, the hooks' server).
Companion = Callable[[Paths, str], "Stoppable | None"]


def start_companions(companions: Sequence[Companion], paths: Paths, name: str) -> list[Stoppable]:
    """Each companion of session ``name`` that has something to do; one that
    fails is logged and left out (the session is supervised all the same)."""
    started: list[Stoppable] = []
    for make in companions:
        try:
            c = make(paths, name)
        except Exception:
            logging.getLogger("agentwrap.host").exception("a companion of %s did not start", name)
            continue
        if c is not None:
            started.append(c)
    return started


def _answer_links(paths: Paths, cfg: Config) -> AnswerLinks:
    """One-tap links in the notices pushed to a phone ([notify] urls): signed,
    single use, on ``[serve] public_url`` (agentwrap.answers.links). None on
    the desktop's notices: the terminal is right there."""
    from ..delivery.notices import NO_LINKS

    if not cfg.notify.urls:
        return NO_LINKS
    from ..answers.links import LinkMaker

    return LinkMaker.from_config(paths, cfg)


__all__ = ["Companion", "Stoppable", "build_supervisor", "start_companions"]
