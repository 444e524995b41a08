"""What a joined host does when its hub asks (issue 38's one view): its own sessions only.

The hub serves every host's sessions on one page and one API, but a
session's screen, its agent's processes and the answers typed into it live
on the host that runs it. So the hub asks that host over its link
(:data:`~agentwrap.queue.link_protocol.HUB_METHODS`), and the supervisor
process holding the link runs the request here, against this host's own
state and runtime dirs: a screen, a stop (audited here, naming who asked on
the hub), an answer through this host's own intake (the question this
registry holds, still the one asked), an answer's status, and the page's
live terminal of a session, looked at and, once taken over, typed into
(:mod:`.hub_terminal`). The rule: a session is named bare or ``HOST/NAME``
with this host's name; any other host's name is refused
(:class:`~agentwrap.errors.ForeignSession`), and a name this host's registry
does not hold is :class:`~agentwrap.errors.SessionNotFound`: nothing is read
or signalled for it. Every value of the request is checked before anything
is done (a hostile hub gets a refusal, never a keystroke it did not name).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..audit import AuditLog
from ..errors import ForeignSession, SessionNotRunning
from ..paths import Paths, check_session_name
from ..queue import link_protocol as wire
from .hub_terminal import HostTerminals, words
from .registry import Registry, SessionRecord

if TYPE_CHECKING:
    from ..answers.store import AnswerStore

#: The hub's requests for a page's terminal, and the method of :mod:`.hub_terminal` that runs each.
TERMINAL_CALLS: dict[str, str] = {m: m.removeprefix("terminal_") for m in wire.TERMINAL_METHODS}
#: The most bytes of a styled screen document sent back (the supervisor's own are far smaller).
MAX_SCREEN_BYTES = 4 * 1024 * 1024


class HostRequests:
    """The hub's requests for host ``host``'s sessions (see the module)."""

    def __init__(self, paths: Paths, host: str, *,
                 stop: Callable[[Paths, list[str]], list[SessionRecord]]) -> None:
        self.paths = paths
        self.host = host
        self._stop = stop
        self.terminals = HostTerminals(paths, host, self.own)

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
        if method == "answer":
            return self.answer(**params)
        if method == "answer_status":
            return self.answer_status(**params)
        served = TERMINAL_CALLS.get(method)
        if served is not None:
            return getattr(self.terminals, served)(**params)
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
        """Stop the session's agent as ``agentwrap stop`` does here; its record.
        Audited here as a local stop is, naming who asked on the hub (``by``,
        marked as the hub's word: this host cannot check it)."""
        name = self.own(session)
        who = words(by, "by")
        (rec,) = self._stop(self.paths, [name])
        AuditLog(self.paths.audit_log).write(event="stopped", session=name,
                                             by=f"hub:{who}", via="hub")
        return {**rec.to_json(), "host": self.host}

    # --- answers (s44-hubans): this host's intake, behind the link ---------------------

    def _answers(self) -> AnswerStore:
        from ..answers.store import AnswerStore

        return AnswerStore(self.paths.db_path, events_dir=self.paths.events_dir, host=self.host)

    def answer(self, session: str, option: int | str | None = None,
               options: list[int | str] | None = None, text: str | None = None,
               deny: bool = False, question_id: str | None = None, source: str = "hub",
               answers: dict[str, Any] | None = None, by: str = "hub") -> dict[str, Any]:
        """Take an answer for this host's session through its own intake (the
        same checks as ``agentwrap answer`` here: the question this registry
        holds, still open, ``question_id`` its id); the answer stored, the
        question and whether a supervisor runs to type it. Every value is
        checked for its type first: a hostile hub gets a refusal."""
        from ..answers.intake import AnswerIntake
        from ..detect.profiles import load_profile

        name = self.own(session)
        if (option is not None and not isinstance(option, int | str)) or isinstance(option, bool):
            raise TypeError("option is a number or a label")
        if options is not None and not (isinstance(options, list) and all(
                isinstance(o, int | str) and not isinstance(o, bool) for o in options)):
            raise TypeError("options is a list of numbers or labels")
        if answers is not None and not isinstance(answers, dict):
            raise TypeError("answers is an object")
        for value, what in ((text, "text"), (question_id, "question_id")):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{what} is a string")
        if not isinstance(deny, bool):
            raise TypeError("deny is true or false")
        src = f"hub:{words(source, 'source')}"
        registry = Registry(self.paths.db_path, host=self.host)
        store = self._answers()
        try:
            intake = AnswerIntake(self.paths, registry, lambda: store,
                                  AuditLog(self.paths.audit_log),
                                  lambda profile: load_profile(profile, self.paths))
            got = intake.answer(name, option=option, options=options, text=text, deny=deny,
                                question_id=question_id, source=src, answers=answers)
        finally:
            store.close()
            registry.close()
        return {"answer": got.answer.to_json(), "question": got.question.to_json(),
                "supervised": got.supervised, "host": self.host}

    def answer_status(self, answer: str) -> dict[str, Any]:
        """One answer this host stored (its bare id), as ``agentwrap answer`` waits on it."""
        from ..errors import InvalidAnswer

        if not isinstance(answer, str) or not answer or len(answer) > 64 \
                or not all(c in "0123456789abcdef" for c in answer):
            raise InvalidAnswer(f"no answer {str(answer)[:80]!r} on host {self.host!r}")
        store = self._answers()
        try:
            got = store.get(answer)
        except KeyError:
            raise InvalidAnswer(f"no answer {answer!r} on host {self.host!r}") from None
        finally:
            store.close()
        return got.to_json()

