"""The last resort: the marked section of the agent's instruction file.

After ``fallback_after`` failed attempts, or at once when its block was
submitted and its ACK never came (typing it again could double it: see
:mod:`.engine`), a message is written to the section
(``agentwrap:begin`` / ``agentwrap:end`` markers, :mod:`.fallback`) and ends
ESCALATED (a submitted one with no file to go to ends delivered, not
acknowledged); the person is told (the tmux status line, a desktop notification)
and the agent gets a HIGH notice that points to the section instead of
repeating the content. The section goes once the agent acknowledged a notice
naming its entries, never sooner: a notice merely typed proves nothing was
read. A supervisor that starts finds entries no acknowledged notice covered
and announces them again. A raw message (a command) never goes to the file:
it belongs in the terminal, and fails instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path

from ..audit import AuditLog
from ..config import DeliveryConfig, NotifyConfig
from ..detect.neutralise import neutralise
from ..detect.profiles import Profile
from ..errors import AgentwrapError, BackendError, FallbackError, MessageNotFound, PathNotMounted
from ..message import (
    SECTION_REMOVED,
    UNACKNOWLEDGED,
    Attempt,
    AttemptOutcome,
    Kind,
    Message,
    NewMessage,
    Priority,
    Source,
    Status,
)
from ..queue.store import MessageStore
from ..terminal.base import Display
from .fallback import (
    FallbackEntry,
    WriteResult,
    read_section,
    remove_section,
    write_section,
)
from .framing import Injection
from .notices import Event, Notices, event_notice
from .outcome import Outcome
from .seams import Driver

log = logging.getLogger("agentwrap.delivery")


def is_raw(profile: Profile, batch: Sequence[Message]) -> bool:
    """The batch is typed as is (a raw session, or a command), not as a framed block."""
    return profile.raw or any(m.kind is Kind.COMMAND for m in batch)


class Escalation:
    """One session's instruction-file fallback, its notices and notifications."""

    def __init__(
        self,
        store: MessageStore,
        cfg: DeliveryConfig,
        profile: Profile,
        session: str,
        fallback_dir: Path,
        audit: AuditLog,
        *,
        lock_dir: Path | None = None,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.profile = profile
        self.session = session
        self.fallback_dir = fallback_dir  # where the instruction file (or the live context file) is
        self.audit = audit
        self.lock_dir = lock_dir  # for the fallback file's lock (None: the runtime dir)
        self.clock = clock
        # where the person hears of it (desktop, push services: set by the composition root)
        self.notices = Notices(NotifyConfig(), push=None)
        self.host = ""
        #: the agent runs in a container (issue 39): the fallback's path inside it, or
        #: PathNotMounted for a file it would never see (set by ``for_session``)
        self.guard: Callable[[Path], str] | None = None

    def removes_fallback(self) -> bool:
        """The section goes once a notice of it is acknowledged (else it stays)."""
        return self.cfg.remove_fallback_on_delivery and bool(self.profile.instruction_file)

    def escalate(self, sup: Driver | None, msgs: list[Message], result: Outcome, *,
                 submitted: bool = False) -> None:
        """The live path of ``msgs`` ends: into the instruction file's section.
        ``submitted``: the block was submitted (the agent may have it) and
        was not acknowledged; without a file to write to it ends *delivered*,
        not acknowledged, never failed."""
        if is_raw(self.profile, msgs):
            # A command belongs in the terminal, never in an instruction file.
            ids = [m.id for m in msgs]
            self.store.finish(Status.FAILED, f"{result.outcome}; not typed: {result.evidence}"[:500],
                              message_ids=ids)
            self.audit.write(event="raw_failed", session=self.session, ids=ids,
                             outcome=result.outcome)
            self._tell(sup, f"{len(ids)} raw message(s) could not be typed ({result.outcome})")
            return
        notices = [m for m in msgs if m.kind is Kind.FALLBACK_NOTICE]
        content = [m for m in msgs if m.kind is not Kind.FALLBACK_NOTICE]
        if notices:
            self.store.finish(
                Status.FAILED, f"fallback notice not delivered: {result.outcome}",
                message_ids=[m.id for m in notices],
            )
        if not content:
            return
        fname = self.profile.instruction_file
        ids = [m.id for m in content]
        if not fname:
            why = f"profile {self.profile.name} has no instruction file"
            if submitted:
                self._unacknowledged(content, why)
                return
            self.store.finish(Status.FAILED, f"{result.outcome}; {why}", message_ids=ids)
            return
        try:
            written = self.write_fallback(fname, content)
        except (FallbackError, PathNotMounted, OSError) as exc:
            # Refused (a symlink out of the project, malformed markers, not a
            # regular file, read-only) or failed: the messages still end, and
            # the person is told why, in one place.
            if submitted:
                self._unacknowledged(content, f"fallback refused: {exc}")
            else:
                self.store.finish(Status.FAILED, f"{result.outcome}; fallback refused: {exc}",
                                  message_ids=ids)
            self.audit.write(event="fallback_failed", session=self.session, ids=ids, error=str(exc))
            self._tell(sup, f"live delivery failed and {fname} was not written: {exc}")
            return
        reach = (
            "re-read on every request" if self.profile.instruction_file_live
            else f"{self.profile.name} reads it at start-up: the next session sees it"
        )
        self.store.finish(
            Status.ESCALATED,
            f"after {result.outcome}: written to {written.path.name}, section agentwrap ({reach})",
            message_ids=ids,
        )
        self.audit.write(
            event="escalated", session=self.session, ids=ids, file=str(written.path),
            outcome=result.outcome,
        )
        self._notify(sup, written.path.name, content)

    def _unacknowledged(self, msgs: list[Message], why: str) -> None:
        """Submitted, never acknowledged, and not written to a file: delivered,
        its last attempt :data:`~agentwrap.message.UNACKNOWLEDGED` (what a
        sender who asked for the ACK is told by)."""
        for m in msgs:
            done = self.store.attempts(m.id)
            if done:
                self.store.record_attempt(replace(done[-1], outcome=UNACKNOWLEDGED))
        self.store.finish(Status.DELIVERED, f"delivered: submitted; not acknowledged; {why}"[:500],
                          message_ids=[m.id for m in msgs])

    def write_fallback(self, fname: str, content: list[Message]) -> WriteResult:
        """The section as it should be now: what it held before (still known
        to the store) plus ``content``."""
        entries = self._section_entries(fname, content)
        if self.guard is not None:
            self.guard(self.fallback_dir / fname)
        return write_section(self.fallback_dir, fname, entries, lock_dir=self.lock_dir)

    def _section_entries(
        self, fname: str, content: list[Message], drop: Collection[str] = ()
    ) -> list[FallbackEntry]:
        """The section's entries: what it holds now (still known to the
        store) but ``drop``, then ``content``."""
        ids = {m.id for m in content}
        previous = read_section(self.fallback_dir, fname) or []
        entries = []
        for mid in previous:
            if mid in ids or mid in drop:
                continue
            try:
                old = self.store.get(mid)
            except MessageNotFound:
                # Written with another store (or a wiped one): only its id is known,
                # so its entry cannot be rebuilt and is dropped on this rewrite.
                log.warning("fallback section names unknown message %s; dropping its entry", mid)
                continue
            entries.append(self._entry(old))
        return entries + [self._entry(m) for m in content]

    def _entry(self, m: Message) -> FallbackEntry:
        """A section entry, defused like a typed block: the agent parses its
        instruction file too (CLAUDE.md and GEMINI.md import ``@path``)."""
        syntax = self.profile.syntax
        return FallbackEntry(
            m.id, neutralise(m.label, syntax), m.created, neutralise(m.content, syntax)
        )

    def _tell(self, sup: Driver | None, line: str, key: str = "") -> None:
        """Tell the person: the tmux status line, and the notices' channels
        (a desktop notification, the push services); ``key``: the messages."""
        if sup is not None and isinstance(sup.term, Display):
            try:
                sup.term.display(f"agentwrap: {line}")
            except BackendError:
                pass
        if self.cfg.notify_on_failure:
            self.notices.tell(event_notice(Event.FAILED, self.session, self.host, line,
                                           key or line, self.clock()))

    def _notify(self, sup: Driver | None, fname: str, msgs: list[Message]) -> None:
        """Announce an escalation, and queue a notice for the agent.

        The notice points to the section instead of repeating the content: the
        agent already saw that text in each failed attempt, and whatever it
        says reaches the model through the instruction file. Agents that read
        their instruction file only at start-up (Codex, Gemini) are told so.
        """
        line = f"context was written to {fname}, section agentwrap"
        self._tell(sup, line)
        self._queue_notice(fname, msgs)

    def _queue_notice(self, fname: str, msgs: list[Message], *, earlier: bool = False) -> None:
        """Queue the notice (a HIGH message of kind FALLBACK_NOTICE) naming
        ``msgs``' entries. ``earlier``: they were written before this
        supervisor started (an earlier session) and no notice of them was
        acknowledged: the section is still there, and this notice's ACK lets it go."""
        n = len(msgs)
        labels = ", ".join(sorted({m.label for m in msgs}))
        when = (
            "It is re-read on every request."
            if self.profile.instruction_file_live
            else "This agent reads it at start-up, so it takes effect in the next session;"
            " read the section now if it matters to the current task."
        )
        where = (f"{fname}, in the section between the 'agentwrap:begin agentwrap' and"
                 " 'agentwrap:end agentwrap' markers")
        notice = (
            f"Live delivery of {n} message{'s' if n != 1 else ''} ({labels}) failed, so"
            f" {'they were' if n != 1 else 'it was'} written to {where}. {when}"
        )
        if earlier:
            notice = (
                f"Your instruction file {fname} holds {n} message{'s' if n != 1 else ''}"
                f" ({labels}) that could not be delivered live earlier, in the section"
                f" between the 'agentwrap:begin agentwrap' and 'agentwrap:end agentwrap'"
                " markers. Read that section if you have not."
            )
        if self.removes_fallback():
            notice += (" The section stays in the file until you acknowledge this notice;"
                       " agentwrap removes it then.")
        try:
            self.store.enqueue(
                NewMessage(
                    session=self.session, content=notice,
                    source=Source.SYSTEM, source_id="fallback", priority=Priority.HIGH,
                    metadata={"fallback_ids": [m.id for m in msgs]},
                    require_ack=False,
                ),
                kind=Kind.FALLBACK_NOTICE,
                internal=True,
            )
        except AgentwrapError as exc:  # a full queue must not break the supervisor
            log.warning("could not queue the fallback notice: %s", exc)

    def after_success(self, batch: list[Message], token: str, result: Outcome) -> None:
        """A notice in ``batch`` reached the agent. Its section goes only once
        the agent has read it, which only an ACK of the notice proves:
        removing it as soon as the notice was typed lost the content (gone
        from the file before the agent opened it, and from the next session's
        start-up read). Unacknowledged, it stays for the agent's next read."""
        notices = [m for m in batch if m.kind is Kind.FALLBACK_NOTICE]
        if not notices or not self.removes_fallback():
            return
        if result.outcome == AttemptOutcome.ACKNOWLEDGED:
            self._retract(notices, token, f"read by the agent (ACK {token})")
        else:
            self._keep_section(notices, token, f"notice {result.outcome}, not acknowledged")

    def unacknowledged_notices(
        self, inj: Injection, batch: list[Message], started: float, channel: str,
        result: Outcome,
    ) -> list[Message]:
        """The notices in a batch whose ACK never came: their submission was
        proven, so they end delivered (retyping one adds nothing) and their
        section stays. Returns the rest of the batch, which failed."""
        notices = [m for m in batch if m.kind is Kind.FALLBACK_NOTICE]
        if not notices:
            return batch
        evidence = f"submitted; not acknowledged, the fallback section stays ({result.evidence})"
        for m in notices:
            self.store.record_attempt(Attempt(m.id, inj.token, m.attempts + 1, started,
                                              self.clock(), channel, UNACKNOWLEDGED,
                                              evidence[:2000]))
        self.store.finish(Status.DELIVERED, f"delivered: {evidence}"[:500],
                          message_ids=[m.id for m in notices])
        self._keep_section(notices, inj.token, "notice not acknowledged")
        return [m for m in batch if m.kind is not Kind.FALLBACK_NOTICE]

    def _keep_section(self, notices: list[Message], token: str, why: str) -> None:
        self.audit.write(event="fallback_kept", session=self.session, batch=token,
                         ids=sorted({i for n in notices for i in _announced(n)}), reason=why)

    def _retract(self, notices: list[Message], token: str, why: str) -> None:
        """Take the entries the notices announced out of the section (the
        section, once none is left), and record it on each message: an
        attempt through ``fallback-file`` that ``history`` shows, and an audit
        line. Entries written after the notice was queued stay: their own
        notice is still to be read."""
        fname = self.profile.instruction_file
        assert fname is not None
        announced = {i for n in notices for i in _announced(n)}
        try:
            gone = [i for i in read_section(self.fallback_dir, fname) or [] if i in announced]
            if not gone:
                return  # removed already (by the person, or another notice)
            entries = self._section_entries(fname, [], drop=gone)
            if entries:
                write_section(self.fallback_dir, fname, entries, lock_dir=self.lock_dir)
            else:
                remove_section(self.fallback_dir, fname, lock_dir=self.lock_dir)
        except (FallbackError, OSError) as exc:
            log.warning("could not remove the fallback section: %s", exc)
            self.audit.write(event="fallback_remove_failed", session=self.session,
                             ids=sorted(announced), error=str(exc))
            return
        now = self.clock()
        evidence = f"section removed from {fname}: {why}"
        for mid in gone:
            try:
                m = self.store.get(mid)
            except MessageNotFound:
                continue
            self.store.record_attempt(Attempt(mid, token, m.attempts + 1, now, now,
                                              "fallback-file", SECTION_REMOVED, evidence))
        self.audit.write(event="fallback_removed", session=self.session, batch=token, ids=gone,
                         file=fname, reason=why, left=len(entries))

    def announce_leftovers(self) -> None:
        """At the supervisor's start: entries no notice got acknowledged for
        are still in the section (a silent agent, a session that ended
        first). The agent read them at its start-up, or reads them now; a
        new notice asks it to acknowledge, so that the section can go. Named:
        this store's escalated messages no queued notice names already."""
        fname = self.profile.instruction_file
        if not fname or not self.removes_fallback():
            return
        try:
            ids = read_section(self.fallback_dir, fname) or []
        except (FallbackError, OSError) as exc:
            log.warning("could not read the fallback section: %s", exc)
            return
        waiting = [*self.store.peek(self.session), *self.store.in_flight(self.session)]
        named = {i for m in waiting if m.kind is Kind.FALLBACK_NOTICE for i in _announced(m)}
        msgs = []
        for mid in ids:
            try:
                m = self.store.get(mid)
            except MessageNotFound:
                continue
            if mid not in named and m.status is Status.ESCALATED:
                msgs.append(m)
        if msgs:
            self._queue_notice(fname, msgs, earlier=True)



def _announced(notice: Message) -> list[str]:
    """The ids of the messages a fallback notice names (its own metadata)."""
    ids = notice.metadata.get("fallback_ids")
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


__all__ = ["Escalation", "is_raw"]
