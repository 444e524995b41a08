"""A session's whole conversation, in order (issue 42): what was said to the
agent and what it did and said back.

The entries come from two places. What agentwrap delivered is the store's
own record (every message that reached the agent, its channel, its status,
whether its ACK came). What the agent said comes from the best source its
agent offers, asked in order until one has something:

1. the agent's own reader (:attr:`~agentwrap.agents.base.Agent.conversation`
   of the agent its profile's hooks name, else of its profile's name: each
   agent's own record, a transcript, a session file, a chat log or a store;
   found from the path its hooks reported, or the newest of the session's,
   and checked to be the agent's own for the project);
2. what its hooks said at the last turn's end (the reply and tool calls the
   handoff notes keep: :mod:`agentwrap.continuity.hooks`);
3. the last screen its supervisor saved, as one reply (the last resort).

The questions the agent asked on screen (a dialog, a permission) and the
answers given through agentwrap (``agentwrap answer``, the page, a rule, a
phone) are the answers table's: each applied answer is an ``answer`` entry
at the time it was typed, with the option it chose; one the agent's own
record shows already (Claude's AskUserQuestion result in its transcript) is
not shown twice. A question still waiting for its answer is the last entry.
A past question the agent's record does not keep is the one agentwrap saw:
each transition of the session to a dialog state, with the screen line that
decided it (the registry's transitions), at its time.

A delivered message is shown where it landed: a prompt of the transcript
that holds its text (or its batch's token) *is* that message, so the prompt
entry gives way to the message's entry at the prompt's place and time; a
message no source shows is placed at the time its delivery was recorded.
Nothing here changes a row, and nothing of the content becomes markup: the
entries are text for the surfaces to escape.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..agents.all_agents import get as agent_of
from ..agents.conversation import Entry, EntryKind, Query, cut
from ..continuity.hooks import notes_file, read_json
from ..message import AttemptOutcome, Message, Status
from ..paths import Paths
from ..queue.store import MessageStore
from ..sessions.registry import Registry, SessionRecord, Transition
from .profiles import ProfileCache

#: Statuses of a message that reached the agent (or may have: escalated wrote it to a file).
REACHED = frozenset({Status.DELIVERED, Status.ACKNOWLEDGED, Status.ESCALATED})
#: Characters of a message's text looked for in a transcript's prompt.
MATCH_CHARS = 120
#: Seconds apart within which a question of the agent's own record and one seen on screen are one.
SAME_QUESTION_S = 2.0
#: The states in which the agent asks the person something.
ASKING = ("dialog", "waiting_input")
#: The frame characters around a dialog's line on screen (not its words).
FRAME = " \t│║┃|╭╮╰╯─━┌┐└┘"
#: Seconds after an answer was typed within which the agent's own record of it counts as it.
SAME_ANSWER_S = 10.0

if TYPE_CHECKING:
    from ..answers.store import Answer


@dataclass(frozen=True)
class Conversation:
    """A session's conversation: ``entries`` oldest first; ``source``: where
    the agent's side was read (``transcript``, ``hook``, ``screen`` or
    ``none``)."""

    session: str
    source: str
    entries: tuple[Entry, ...]

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "source": self.source,
                "entries": [e.to_json() for e in self.entries]}


class Conversations:
    """Reads conversations from the store, the agent's own source and the screen."""

    def __init__(self, paths: Paths, store: MessageStore, registry: Registry,
                 profiles: ProfileCache,
                 answers: Callable[[str], Sequence[Answer]] | None = None) -> None:
        self.paths = paths
        self.store = store
        self.registry = registry
        self.profiles = profiles
        self.answers = answers  # a session's answers, newest first (the answers table)

    def read(self, name: str, *, limit: int = 500) -> Conversation:
        """Session ``name``'s conversation: at most ``limit`` messages of the
        store and the agent's entries, merged in order (the newest kept)."""
        rec = self.registry.get(name)
        source, said = self._agent_side(rec)
        messages = [m for m in self.store.history(self.registry.address(rec), limit=limit)
                    if m.status in REACHED]
        entries = merge(said, [message_entry(m, self._delivered_at(m)) for m in messages],
                        messages)
        if self.answers is not None:
            entries = with_answers(entries, self.answers(self.registry.address(rec)))
        question = rec.question if isinstance(rec.question, dict) else None
        asking = str(rec.state) in ASKING
        try:
            seen = self.registry.transitions(rec.name)
        except Exception:  # noqa: BLE001 - no transitions readable: the rest still is
            seen = []
        entries = with_past_questions(entries, seen, rec.state_since if asking else None)
        if question and asking:
            entries.append(question_entry(question, rec.state_since))
        return Conversation(rec.name, source, tuple(entries[-limit:]))

    def _delivered_at(self, m: Message) -> float:
        done = [a.finished for a in self.store.attempts(m.id)
                if a.finished is not None and a.outcome in _LANDED]
        return min(done) if done else (m.finished or m.updated)

    def _agent_side(self, rec: SessionRecord) -> tuple[str, list[Entry]]:
        notes = read_json(notes_file(self.paths, rec.name)) if self.registry.here(rec) else {}
        try:
            profile = self.profiles.get(rec.profile)
            # the agent its hooks name, else the one of the profile's own name
            # (an agent without hooks: its record is only its reader)
            agent = agent_of(profile.channels.hooks) or agent_of(profile.name)
        except Exception:  # noqa: BLE001 - a profile gone since: the screen is still there
            agent = None
        if agent is not None and agent.conversation is not None:
            hint = notes.get("transcript_path")
            launch = self.paths.state_dir / "launch" / rec.name if self.registry.here(rec) else ""
            cwd, environ = self._agent_view(rec)
            got = agent.conversation(Query(cwd=cwd, started=rec.started,
                                           hinted=hint if isinstance(hint, str) else "",
                                           environ=environ, launch_dir=str(launch)))
            if got:
                return "transcript", sorted(got, key=lambda e: e.at)
        from_hooks = self._from_notes(rec, notes)
        if from_hooks:
            return "hook", from_hooks
        from_screen = self._from_screen(rec)
        return ("screen", from_screen) if from_screen else ("none", [])

    def _agent_view(self, rec: SessionRecord) -> tuple[str, dict[str, str]]:
        """The project folder and environment the agent's reader is given: the
        host's; for an agent in a container (issue 39), its own (the folder as
        the container names it, its HOME where the host has it: the mounts its
        launch kept, :meth:`agentwrap.containers.mounts.Mounts.reader_view`)."""
        if rec.options.container and self.registry.here(rec):
            from ..agents.launch import launch_dir
            from ..containers.box import saved_mounts
            from ..errors import PathNotMounted

            try:
                mounts = saved_mounts(launch_dir(self.paths, rec.name))
            except PathNotMounted:
                return rec.cwd, {}  # its mounts unknown: no host folder is taken for its own
            if mounts is not None:
                return mounts.reader_view(rec.cwd)
        return rec.cwd, dict(os.environ)

    def _from_notes(self, rec: SessionRecord, notes: dict[str, Any]) -> list[Entry]:
        """The last turn's reply and tool calls, as the hooks reported them."""
        try:
            at = notes_file(self.paths, rec.name).stat().st_mtime
        except OSError:
            return []
        out: list[Entry] = []
        for tool in notes.get("tools") or []:
            if isinstance(tool, str) and tool:
                out.append(Entry(EntryKind.TOOL, at, cut(tool), "hook", target=cut(tool)))
            elif isinstance(tool, dict):
                name, target = str(tool.get("tool") or ""), str(tool.get("target") or "")
                when = tool.get("at")
                out.append(Entry(EntryKind.TOOL, when if isinstance(when, float) else at,
                                 cut(target or name), "hook",
                                 tool=name[:200], target=cut(target)))
        reply = notes.get("last_reply")
        if isinstance(reply, str) and reply.strip():
            out.append(Entry(EntryKind.REPLY, at, cut(reply), "hook"))
        return out

    def _from_screen(self, rec: SessionRecord) -> list[Entry]:
        """The last screen the supervisor saved, as one reply (this host's only)."""
        if not self.registry.here(rec):
            return []
        path = self.paths.runtime_dir / f"{rec.name}.screen"
        try:
            at = path.stat().st_mtime
            text = path.read_bytes()[:256 * 1024].decode("utf-8", "replace")
        except OSError:
            return []
        text = "\n".join(line.rstrip() for line in text.splitlines()).strip()
        return [Entry(EntryKind.REPLY, at, cut(text), "screen")] if text else []


_LANDED = frozenset({AttemptOutcome.SUBMITTED, AttemptOutcome.ACKNOWLEDGED,
                     AttemptOutcome.DELIVERED, AttemptOutcome.UNACKNOWLEDGED})


def message_entry(m: Message, at: float) -> Entry:
    """A delivered message as an entry: its id, status, and its ACK (None: none asked)."""
    asked = m.require_ack is not False and m.status is not Status.ESCALATED
    acked: bool | None = (m.status is Status.ACKNOWLEDGED) if asked else None
    return Entry(EntryKind.MESSAGE, at, cut(m.content), "queue", message_id=m.id,
                 status=m.status.value, acked=acked, target=m.label)


def answer_entry(a: Answer) -> Entry:
    """An answer given through agentwrap, as the option (or keys) it gave."""
    given = a.answer.to_json()
    words = given.get("label") or given.get("labels") or given.get("text") or given.get("keys") \
        or given.get("how", "")
    text = ", ".join(str(x) for x in words) if isinstance(words, list) else str(words)
    return Entry(EntryKind.ANSWER, a.finished or a.created, cut(text), "answers",
                 target=a.question_id, status=a.status.value, channel=a.source)


def question_entry(q: dict[str, Any], at: float) -> Entry:
    """The question the agent asks now (the registry's
    :meth:`~agentwrap.detect.question.Question.to_json`), with its options."""
    lines = [str(q.get("title") or "")]
    for item in q.get("questions") or []:
        if not isinstance(item, dict):
            continue
        if item.get("question") and item.get("question") != q.get("title"):
            lines.append(str(item["question"]))
        lines += [f"- {o.get('label')}" for o in item.get("options") or []
                  if isinstance(o, dict) and o.get("label")]
    text = "\n".join(x for x in lines if x)
    return Entry(EntryKind.QUESTION, at, cut(text.strip() or "a question"), "screen",
                 target=str(q.get("id") or ""))


def with_past_questions(entries: list[Entry], seen: Sequence[Transition],
                        asking_since: float | None) -> list[Entry]:
    """``entries`` with each question agentwrap saw on screen (a transition to
    a dialog or waiting_input state: the screen line that decided it, else its
    reason) in place by time, for the agents whose own record keeps no
    question: one the record shows within :data:`SAME_QUESTION_S` is not
    doubled, nor the one asked now (``asking_since``: its entry comes last,
    with its options), nor a repeat of the one before it."""
    theirs = [e.at for e in entries if e.kind is EntryKind.QUESTION]
    ours: list[Entry] = []
    last = ""
    for t in seen:
        if t.state not in ASKING:
            last = ""
            continue
        text = "\n".join(x.strip(FRAME) for x in t.evidence.splitlines()).strip() or t.reason
        if not text or text == last or (asking_since is not None and t.at >= asking_since):
            continue
        last = text
        if not any(abs(at - t.at) <= SAME_QUESTION_S for at in theirs):
            ours.append(Entry(EntryKind.QUESTION, t.at, cut(text), "screen", target=t.rule[:200]))
    return sorted([*entries, *ours], key=lambda e: e.at)


def with_answers(entries: list[Entry], answers: Sequence[Answer]) -> list[Entry]:
    """``entries`` with each applied answer in place by time, unless the agent's
    own record has an answer within :data:`SAME_ANSWER_S` after it (the same one)."""
    from ..answers.actions import AnswerStatus

    theirs = [e.at for e in entries if e.kind is EntryKind.ANSWER]
    ours = [answer_entry(a) for a in answers if a.status is AnswerStatus.APPLIED]
    ours = [e for e in ours if not any(0 <= t - e.at <= SAME_ANSWER_S or 0 <= e.at - t <= 1.0
                                       for t in theirs)]
    return sorted([*entries, *ours], key=lambda e: e.at)


def _lands_in(m: Message, prompt: str) -> bool:
    head = m.content.strip()[:MATCH_CHARS]
    return (bool(head) and head in prompt) or (bool(m.batch_id) and str(m.batch_id) in prompt)


def merge(said: Sequence[Entry], delivered: Sequence[Entry],
          messages: Sequence[Message]) -> list[Entry]:
    """The agent's entries and the delivered messages in one order: a prompt
    that holds a message's text (or token) is that message (its entry takes
    the prompt's place and time); the rest by time. Stable: entries of one
    moment keep the order their source gave."""
    by_id = {m.id: m for m in messages}
    placed: set[str] = set()
    out: list[Entry] = []
    for e in said:
        if e.kind is EntryKind.PROMPT:
            landed = [d for d in delivered if d.message_id not in placed
                      and _lands_in(by_id[d.message_id], e.text)]
            if landed:
                out += [replace(d, at=e.at) for d in landed]
                placed.update(d.message_id for d in landed)
                continue
        out.append(e)
    out += [d for d in delivered if d.message_id not in placed]
    return sorted(out, key=lambda e: e.at)


__all__ = ["ASKING", "FRAME", "MATCH_CHARS", "REACHED", "SAME_ANSWER_S", "SAME_QUESTION_S",
           "Conversation", "Conversations", "answer_entry", "merge", "message_entry", "question_entry",
           "with_answers", "with_past_questions"]
