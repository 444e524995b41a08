"""What only a session's own host can do, asked of it (the hub's one view, issue 38).

On the hub, every host's sessions are listed, sent to and read from the
hub's store; but a session's screen and its agent's processes live on the
host that runs it. :class:`RemoteHosts` is the port through which a service
asks that host (the hub implements it over the host's link:
:class:`agentwrap.hub.remote.HostLinks`); a host that has no link raises
:class:`~agentwrap.errors.HostUnreachable` there, naming since when, and only
that session's call fails. What a host sends back is hostile data and is
read through the same checks as a file on this machine: a screen through
:func:`~agentwrap.terminal.styles.read_document`, a record through
:func:`~agentwrap.sessions.linked.record_from_report` (the host named by the
hub, never by the answer); an answer through :func:`answer_result` (its id
``HOST/ID``, so its status is asked of that host again).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import AgentwrapError, SessionNotRunning

if TYPE_CHECKING:
    from ..answers.intake import AnswerResult
    from ..answers.store import Answer
    from ..queue.link import HubStore
    from ..sessions.registry import SessionRecord
    from ..terminal.styles import Screen

#: The most characters of a plain screen taken from a host.
MAX_SCREEN_CHARS = 1024 * 1024


class RemoteHosts(Protocol):
    """Asks host ``host`` to run ``method`` for one of its sessions."""

    def call(self, host: str, method: str, **params: Any) -> Any: ...


class ThroughHub:
    """:class:`RemoteHosts` on a joined host: another host's session is asked of
    that host through the hub (the link's ``relay``: answers, their status,
    screens; the hub's policy says which), so ``answer HOST/NAME`` works from
    every host and is taken by the session's own host."""

    def __init__(self, hub: HubStore) -> None:
        self.hub = hub

    def call(self, host: str, method: str, **params: Any) -> Any:
        return self.hub.client.call("relay", host=host, request=method, params=params)


def screen_text(got: Any, name: str) -> str:
    if not isinstance(got, dict) or not isinstance(got.get("text"), str):
        raise SessionNotRunning(f"the host of {name!r} sent no screen")
    return str(got["text"])[:MAX_SCREEN_CHARS]


def screen_view(got: Any, name: str) -> Screen:
    """The styled screen a host sent (checked value by value), else its plain text."""
    from ..terminal.styles import Screen, read_document, rows_from_text

    text = screen_text(got, name)
    doc = got.get("document")
    if isinstance(doc, str):
        try:
            shown = read_document(base64.b64decode(doc, validate=True))
        except (binascii.Error, ValueError):
            shown = None
        if shown is not None:
            return shown
    lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    return Screen(digest="", at=0.0, cols=max((len(x) for x in lines), default=0),
                  cursor=(0, 0), title="", lines=rows_from_text(lines), styled=False)


def stopped(got: Any, rec: SessionRecord) -> SessionRecord:
    """The record a host sent back after stopping ``rec`` (as its host and name)."""
    from dataclasses import replace

    from ..sessions.linked import record_from_report

    if not isinstance(got, dict) or rec.seen is None:
        raise SessionNotRunning(f"the host of {rec.name!r} sent no record")
    try:
        back = record_from_report(got, rec.host, rec.seen)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise SessionNotRunning(f"the host of {rec.name!r} sent no record") from None
    return replace(back, name=rec.name)


# --- answers (s44-hubans): taken by the session's host, read back as HOST/ID ----------


def answer_back(got: Any, host: str, address: str | None = None) -> Answer:
    """The answer host ``host`` sent back (its JSON, checked field by field), as
    the hub names it: id ``HOST/ID``, session ``address`` (None: the host's
    session it names, as ``HOST/NAME``)."""
    from ..answers.actions import AnswerStatus, from_json
    from ..answers.store import Answer
    from ..errors import InvalidAnswer
    from ..queue import link_protocol as wire

    try:
        if not isinstance(got, dict):
            raise TypeError
        _, aid = wire.split_answer(str(got["id"]))
        if address is None:
            from ..paths import check_session_name

            address = f"{host}/{check_session_name(str(got['session']).rpartition('/')[2])}"
        finished = got.get("finished")
        return Answer(wire.answer_address(host, aid), address, str(got["questionId"])[:64],
                      from_json(got["answer"]), str(got["source"])[:200],
                      AnswerStatus(got["status"]), str(got.get("detail", ""))[:2000],
                      float(got["created"]), None if finished is None else float(finished))
    except (KeyError, TypeError, ValueError, AttributeError, AgentwrapError):
        raise InvalidAnswer(f"the host of {address!r} sent back no answer") from None


def answer_result(got: Any, host: str, address: str) -> AnswerResult:
    """What host ``host``'s intake stored for ``address`` (:func:`answer_back`),
    with the question it answers."""
    from ..answers.intake import AnswerResult
    from ..detect.question import Question
    from ..errors import InvalidAnswer

    if not isinstance(got, dict):
        raise InvalidAnswer(f"the host of {address!r} sent back no answer")
    answer = answer_back(got.get("answer"), host, address)
    try:
        question = Question.from_json(got["question"])
    except (KeyError, TypeError, ValueError, AttributeError):
        raise InvalidAnswer(f"the host of {address!r} sent back no question") from None
    return AnswerResult(answer, question, supervised=got.get("supervised") is True)
