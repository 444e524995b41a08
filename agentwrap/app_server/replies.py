"""Answering Codex's approval requests by replying to them on its app-server.

A question that came from Codex's app-server (``source == "app-server"``,
:mod:`.approvals`) is the server's request for an
approval, with the exact command. Its answer, from whichever surface (the CLI,
HTTP, the page, the answer folder, a rule: all through the one intake), is not
typed: :func:`reply` sends the decision the answer picks as the JSON-RPC
result of that very request (``{"decision": "accept"}``; ``deny`` -> what the
dialog's own "No" sends, ``cancel``: the command does not run and the turn ends,
as Esc did), and waits for the server's ``serverRequest/resolved``, which also
closes the TUI's dialog. No key
is ever pressed for such a question, whatever happens: a reply that cannot be
sent fails, and the person answers again (the screen's question then, if the
server is gone).

The answerer (:mod:`agentwrap.answers.keys`) has checked before that the question is still
the one open; a request the person answered in the TUI meanwhile is resolved
already, so the answer is ``stale`` and nothing is sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..answers.actions import AnswerAction, AnswerStatus, DenyAnswer, OptionAnswer
from ..detect.question import Question
from ..errors import AppServerError

if TYPE_CHECKING:  # only a Codex supervisor on its app-server has one (websockets)
    from .approvals import ServerApprovals, ServerQuestion
    from .state import AppServerState

POLL_S = 0.03


class Replier(Protocol):
    """What :func:`reply` needs of the server: its open requests, and a way to send."""

    @property
    def approvals(self) -> ServerApprovals: ...

    def reply(self, asked: ServerQuestion, decision: str) -> None: ...


class ServerReplies:
    """The answerer's :class:`~agentwrap.answers.keys.Replies` on the session's
    app-server: the requests it heard (``state.approvals``), answered on its
    live connection."""

    def __init__(self, state: AppServerState) -> None:
        self.state = state

    @property
    def approvals(self) -> ServerApprovals:
        return self.state.approvals

    def reply(self, asked: ServerQuestion, decision: str) -> None:
        """Answer the request with ``decision`` (one of its question's, or
        ``decline``); AppServerError when it cannot be sent."""
        client = self.state.client()
        if client is None:
            raise AppServerError(f"Codex's app-server cannot be reached ({self.state.problem})")
        if self.approvals.get(asked.question.id) is None:  # gone with a lost connection
            raise AppServerError("the request went with the connection it came on")
        client.respond(asked.request.request_id, asked.result(decision))

    def answer(self, question: Question, answer: AnswerAction, wait: Callable[[float], None],
               verify_s: float) -> tuple[AnswerStatus, str]:
        return reply(self, question, answer, wait, verify_s)


def reply(
    server: Replier | None, question: Question, answer: AnswerAction,
    wait: Callable[[float], None], verify_s: float,
) -> tuple[AnswerStatus, str]:
    """Reply ``answer`` to the server's request behind ``question``; the answer's
    outcome and its detail. ``wait(s)`` lets the supervisor go on meanwhile."""
    if server is None:
        return AnswerStatus.FAILED, ("the question came from Codex's app-server, which this"
                                     " supervisor does not read; nothing was typed")
    asked = server.approvals.get(question.id)
    if asked is None:
        return AnswerStatus.STALE, (f"Codex's app-server no longer asks question {question.id}"
                                    " (answered in the terminal, or its turn ended); nothing"
                                    " was sent")
    option = answer.number if isinstance(answer, OptionAnswer) else None
    decision = asked.decision_for(option, isinstance(answer, DenyAnswer))
    if decision is None:
        return AnswerStatus.FAILED, (f"answer {answer.how} picks no decision of Codex's request"
                                     f" (it takes {', '.join(asked.decisions)}); nothing was sent")
    request = f"request {asked.request.request_id} ({asked.request.method})"
    try:
        server.reply(asked, decision)
    except AppServerError as exc:
        return AnswerStatus.FAILED, (f"the reply to Codex's app-server {request} failed:"
                                     f" {exc.message}; nothing was typed")
    deadline = time.monotonic() + verify_s
    while not server.approvals.resolved(question.id):
        if time.monotonic() >= deadline:
            return AnswerStatus.FAILED, (f"replied {decision!r} to {request}, but the server did"
                                         f" not resolve it within {verify_s:g} s")
        wait(POLL_S)
    return AnswerStatus.APPLIED, (f"replied {decision!r} to Codex's app-server {request} for"
                                  f" {question.command or question.title!r}; the server resolved"
                                  " it (the TUI's dialog closed by itself)")


__all__ = ["Replier", "ServerReplies", "reply"]
