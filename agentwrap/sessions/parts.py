"""The supervisor's parts: one shape for everything its loop gives turns to.

The supervisor's loop (:mod:`agentwrap.sessions.supervisor`) watches the
screen and publishes what it sees; everything else a session does, typing
queued messages, Aider's read file, answers, telling the person, answer
rules, the handoff record, is a :class:`Part` (the hooks are served beside
the loop, by the hook server, a companion: :mod:`agentwrap.surfaces.hooks.server`). A part is
told of the loop's moments through optional hooks (trio's ``Instrument`` is
the model): it overrides the hooks it cares about and is skipped for the
others. :class:`Parts` calls each hook on the parts that have it, in the
order the parts were given; :func:`agentwrap.sessions.compose.build_supervisor`
gives that order and says why it matters.

The hooks, in the order the loop reaches them:

* :meth:`Part.hook_answered`: an answer rule answered the agent through its
  hook (no dialog on the screen): announced (the hook kept it in the answers
  table before it answered).
* :meth:`Part.recorded`: a state was recorded in the registry.
* :meth:`Part.typing`: a part is typing into the agent now, so the screens
  that follow are its doing: then nobody is told of them and no rule looks at them.
* :meth:`Part.asked`: otherwise, the question the agent asks now (None: none).
* :meth:`Part.due`: when a part wants the screen looked at, besides the ticks.
* :meth:`Part.turn`: the part's work (woken, due, or the queue's safety poll);
  it returns when it wants its next turn.
* :meth:`Part.close`: the supervisor stops; with :class:`Ended` when the agent
  has gone (undelivered work is given its end state), None when it runs on
  (the next supervisor takes over).
* :meth:`Part.finish`: the agent's end has been recorded: a part's last word.

A part that raises in a hook is a broken part: it is logged and dropped, and
the others go on. Failures of the world are not: an
:class:`~agentwrap.errors.AgentwrapError` (the store locked, the backend
gone, ``DeliveryInterrupted``) or an :class:`OSError` goes to the caller as it
always did (the loop logs it and starts again from a fresh look), and the
part keeps its place: its next turn retries.

The adapters below turn the engines of the layers beneath into parts,
without those engines knowing of parts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..answers.hook_questions import HookQuestion, announcement
from ..delivery.notices import Event, Notices, event_notice
from ..delivery.seams import AnswerDriver, Asking, DraftFlag, Driver
from ..detect.question import Question
from ..errors import AgentwrapError

if TYPE_CHECKING:
    from ..answers.auto import AutoAnswer
    from ..answers.folder import AnswerFolder
    from ..answers.hook_questions import HookQuestions
    from ..answers.keys import Answerer
    from ..answers.store import AnswerStore
    from ..answers.telling import Teller
    from ..continuity.collect import Collector
    from ..delivery.engine import DeliveryEngine
    from ..delivery.read_channel import ReadFileChannel
    from ..queue.store import MessageStore

log = logging.getLogger("agentwrap.supervisor")


class Eyes(DraftFlag, Asking, Protocol):
    """The detector as the parts read it: a draft in the box, the question asked."""


class Host(Driver, AnswerDriver, Protocol):
    """The supervisor as its parts use it in their turns: what the delivery
    engine, the read file and the answerer each need of it."""

    @property
    def detector(self) -> Eyes: ...


@dataclass(frozen=True)
class Ended:
    """The agent has gone, with its exit status (128+N for signal N, None unknown)."""

    exit_code: int | None


class Part:
    """One part of a session's supervisor: every hook is optional (see the
    module docstring for when each is called); the defaults do nothing."""

    def hook_answered(self, hooked: HookQuestion) -> None:
        """An answer rule answered the agent's question through its hook."""

    def recorded(self, state: str, changed: bool, screen: Callable[[], str] | None) -> None:
        """The registry holds ``state`` (``changed``: a new state or question)."""

    def typing(self) -> bool:
        """True while this part types into the agent (its screens are its doing)."""
        return False

    def asked(self, question: Question | None) -> None:
        """The question the waiting agent asks now (None: it asks none)."""

    def due(self) -> float | None:
        """Monotonic time the screen should be looked at for this part (None: no need)."""
        return None

    def turn(self, sup: Host) -> float | None:
        """Do the work due; seconds until the next turn wanted (None: when woken)."""
        return None

    def close(self, ended: Ended | None) -> None:
        """The supervisor stops (``ended``: because the agent has gone)."""

    def finish(self, ended: Ended) -> None:
        """The agent's end is recorded in the registry."""


class Turns(Protocol):
    """An engine beneath that takes the supervisor's turns and knows nothing of
    parts (an agent's native channel's: :mod:`.native`)."""

    def turn(self, sup: Host) -> float | None: ...

    def close(self, ended: Ended | None) -> None: ...


class _TurnsPart(Part):
    """The turns of a :class:`Turns` engine, as a part."""

    def __init__(self, engine: Turns) -> None:
        self.engine = engine

    def turn(self, sup: Host) -> float | None:
        return self.engine.turn(sup)

    def close(self, ended: Ended | None) -> None:
        self.engine.close(ended)


class NativeDeliveryPart(_TurnsPart):
    """The agent's native channel delivering messages (Codex's app-server:
    ``turn/start``, ``turn/steer``), before the typing."""


class NativeKeeperPart(_TurnsPart):
    """The agent's native channel keeping its server running (started again
    when it died)."""


#: What a raising part's error is taken for when it is the world's, not the part's.
WORLD_ERRORS: tuple[type[BaseException], ...] = (AgentwrapError, OSError)


class Parts:
    """A supervisor's parts, each hook called on the parts that define it, in
    the order given; a part whose hook raises (not :data:`WORLD_ERRORS`) is
    logged and dropped while the others go on."""

    def __init__(self, parts: Sequence[Part] = ()) -> None:
        self._parts = list(parts)

    def __iter__(self) -> Iterator[Part]:
        return iter(list(self._parts))

    def __len__(self) -> int:
        return len(self._parts)

    def _having(self, hook: str) -> Iterator[Part]:
        """The parts that define ``hook`` (override :class:`Part`'s default), in
        order: from a copy, as a hook may call another (delivery looks at the
        screen, which publishes), and skipping a part dropped meanwhile."""
        default = getattr(Part, hook)
        for p in [p for p in self._parts if getattr(type(p), hook, default) is not default]:
            if p in self._parts:
                yield p

    @contextmanager
    def _guard(self, part: Part, hook: str) -> Iterator[None]:
        try:
            yield
        except WORLD_ERRORS:
            raise
        except Exception:
            log.exception("part %s failed in %s: dropped", type(part).__name__, hook)
            if part in self._parts:
                self._parts.remove(part)

    def hook_answered(self, hooked: HookQuestion) -> None:
        for p in self._having("hook_answered"):
            with self._guard(p, "hook_answered"):
                p.hook_answered(hooked)

    def recorded(self, state: str, changed: bool, screen: Callable[[], str] | None) -> None:
        for p in self._having("recorded"):
            with self._guard(p, "recorded"):
                p.recorded(state, changed, screen)

    def typing(self) -> bool:
        for p in self._having("typing"):
            with self._guard(p, "typing"):
                if p.typing():
                    return True
        return False

    def asked(self, question: Question | None) -> None:
        for p in self._having("asked"):
            with self._guard(p, "asked"):
                p.asked(question)

    def due(self) -> float | None:
        """The soonest time a part wants the screen looked at."""
        times: list[float] = []
        for p in self._having("due"):
            with self._guard(p, "due"):
                t = p.due()
                if t is not None:
                    times.append(t)
        return min(times) if times else None

    def turn(self, sup: Host, until: Callable[[], bool] = lambda: False) -> float | None:
        """Each part's turn, in order, until ``until()`` says to stop (the agent
        exited: a later part would type into nothing); the soonest next turn wanted."""
        waits: list[float] = []
        for p in self._having("turn"):
            with self._guard(p, "turn"):
                wait = p.turn(sup)
                if wait is not None:
                    waits.append(wait)
            if until():
                break
        return min(waits) if waits else None

    def close(self, ended: Ended | None) -> None:
        for p in self._having("close"):
            with self._guard(p, "close"):
                p.close(ended)

    def finish(self, ended: Ended) -> None:
        for p in self._having("finish"):
            with self._guard(p, "finish"):
                p.finish(ended)


# --- the adapters ---------------------------------------------------------------------------


class TellingPart(Part):
    """The person is told of the question the agent asks, unless one of the
    user's answer rules answers it (``policy``, consulted first: whether it
    does and why not, the teller says). A question the agent's hook holds
    (``hook_questions``) is answered there by the same rules, so the rules do
    not take it from the screen too."""

    def __init__(self, session: str, teller: Teller, policy: AutoAnswer | None = None,
                 hook_questions: HookQuestions | None = None) -> None:
        self.session = session
        self.teller = teller
        self.policy = policy
        self.hook_questions = hook_questions

    def hook_answered(self, hooked: HookQuestion) -> None:
        self.teller.announce(announcement(self.session, hooked))

    def asked(self, question: Question | None) -> None:
        if question is not None and self.policy is not None and self.hook_questions is not None \
                and self.policy.rules and self.hook_questions.holds(question):
            question = None  # the agent's hook answers it by the same rules, or says it will not
        handled = self.policy is not None and self.policy.update(question)
        self.teller.update(None if handled else question,
                           note=self.policy.note if self.policy is not None else "")

    def due(self) -> float | None:
        """An answer rule's ``after_s``: on time, not at the next tick."""
        return self.policy.due() if self.policy is not None else None


class ExitNoticePart(Part):
    """Tells the person an agent exited unexpectedly: not stopped by agentwrap,
    and with a status other than success or the person's own interrupt."""

    EXPECTED = (0, 130, 143)  # success, Ctrl-C (SIGINT), a stop's SIGTERM

    def __init__(self, session: str, host: str, notices: Notices) -> None:
        self.session = session
        self.host = host
        self.notices = notices
        self._sup: Host | None = None

    def turn(self, sup: Host) -> float | None:
        self._sup = sup
        return None

    def finish(self, ended: Ended) -> None:
        if ended.exit_code in self.EXPECTED or getattr(self._sup, "stopping", False):
            return
        status = "an unknown status" if ended.exit_code is None else f"status {ended.exit_code}"
        self.notices.tell(event_notice(Event.EXITED, self.session, self.host,
                                       f"the agent exited with {status}",
                                       f"exit:{self.session}", time.time()))


class AnswerFolderPart(Part):
    """Answer files dropped in the session's folder, taken in on each turn."""

    def __init__(self, folder: AnswerFolder) -> None:
        self.folder = folder

    def turn(self, sup: Host) -> float | None:
        self.folder.step()
        return None

    def close(self, ended: Ended | None) -> None:
        self.folder.close()


class AnswersPart(Part):
    """Types the answers people gave (:mod:`agentwrap.answers.keys`). The answers
    rules give through the agent's hook are kept by the hook itself, before it
    answers (:mod:`agentwrap.surfaces.hooks.handler`): not here, when the
    supervisor next looks, which may be after the tool they allowed has run."""

    def __init__(self, answerer: Answerer) -> None:
        self.answerer = answerer

    def typing(self) -> bool:
        return self.answerer.applying

    def turn(self, sup: Host) -> float | None:
        self.answerer.step(sup)
        return None

    def close(self, ended: Ended | None) -> None:
        if ended is not None:
            self.answerer.abandon("session ended before the answer was typed")


class ReadFilePart(Part):
    """Aider's read file (:mod:`agentwrap.delivery.read_channel`): reaches the
    busy agent, so its turn comes before the engine's."""

    def __init__(self, channel: ReadFileChannel) -> None:
        self.channel = channel

    def turn(self, sup: Host) -> float | None:
        return self.channel.step(sup)

    def close(self, ended: Ended | None) -> None:
        """Before the engine's: what the file holds is settled, or goes back to the
        queue, and the engine's abandon then gives a released message its end."""
        if ended is not None:
            self.channel.abandon("the session ended")
        self.channel.close()


class DeliveryPart(Part):
    """The delivery engine (:mod:`agentwrap.delivery.engine`): types the queue."""

    def __init__(self, engine: DeliveryEngine) -> None:
        self.engine = engine

    def turn(self, sup: Host) -> float | None:
        return self.engine.step(sup)

    def close(self, ended: Ended | None) -> None:
        if ended is not None:
            self.engine.abandon(f"session ended (agent exit code {ended.exit_code})")
        self.engine.close()


class ContinuityPart(Part):
    """The project's handoff record (:mod:`agentwrap.continuity`), kept current
    as states are published, given its last word when the agent exits."""

    def __init__(self, collector: Collector) -> None:
        self.collector = collector

    def recorded(self, state: str, changed: bool, screen: Callable[[], str] | None) -> None:
        self.collector.tick(state, changed, screen)

    def finish(self, ended: Ended) -> None:
        self.collector.finish(ended.exit_code)


class SharedStores(Part):
    """The stores the composition root opened once for all parts: closed after
    every part before it in the list has closed."""

    def __init__(self, messages: MessageStore, answers: AnswerStore) -> None:
        self.messages = messages
        self.answers = answers

    def close(self, ended: Ended | None) -> None:
        try:
            self.messages.close()
        finally:
            self.answers.close()
