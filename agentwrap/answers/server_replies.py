"""Answering Codex's approval requests by replying to them on its app-server.

A question that came from Codex's app-server (``source == "app-server"``,
:mod:`agentwrap.detect.app_server_approvals`) is the server's request for an
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

The answerer (:mod:`.keys`) has checked before that the question is still
the one open; a request the person answered in the TUI meanwhile is resolved
already, so the answer is ``stale`` and nothing is sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..detect.question import Question
from ..errors import AppServerError
from .actions import AnswerAction, AnswerStatus, DenyAnswer, OptionAnswer

if TYPE_CHECKING:  # only a Codex supervisor on its app-server has one (websockets)
    from ..detect.app_server_state import AppServerState

POLL_S = 0.03


def reply(
    server: AppServerState | None, question: Question, answer: AnswerAction,
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


__all__ = ["reply"]
