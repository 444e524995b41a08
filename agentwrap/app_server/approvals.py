"""Codex's approval requests from its app-server, as the session's question (issue 24).

When the session's Codex TUI runs on agentwrap's private app-server and
agentwrap's connection is subscribed to the person's thread (``thread/resume``,
:class:`~.state.AppServerState`), every approval the
TUI shows a dialog for also reaches agentwrap as a server request with the
exact command (``/bin/bash -lc '...'``), its working directory and the answers
Codex takes. So the question is not read off the screen, where a long command
is cut at the dialog's edge: it is built here from the request
(:func:`approval_question`), and the answer is a reply to the request
(:mod:`.replies`), after which the server closes the TUI's
dialog itself (``serverRequest/resolved``). Nothing is typed.

Covered: command executions and file changes (the two dialogs Codex opens
while it works). Other requests (``item/permissions/requestApproval``,
``item/tool/requestUserInput``, MCP elicitations) are left to the screen, as
is every request while the server cannot be reached: they are kept as open
elsewhere (:meth:`ServerApprovals.elsewhere`) so the session's reason names
what Codex asks and that the terminal answers it.

``deny`` replies what the dialog's own "No" sends (:func:`deny_decision`):
``cancel`` ("No, and tell Codex what to do differently", Esc), which ends the
turn and tells the model the command was "aborted by user", as Esc did
before the app-server; ``decline`` only where the request offers no
``cancel``.

A request the person answers in the TUI first ends with
``serverRequest/resolved`` too: it is dropped here at once, so an answer
given elsewhere meanwhile finds its question gone (stale) and is never
applied to the next one. A request's question id includes the request's own
id: the same command asked twice is two questions.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..codex_server.protocol import ApprovalRequest, Notification
from ..detect.question import Item, Option, Question, question_id

COMMAND = "item/commandExecution/requestApproval"
FILE_CHANGE = "item/fileChange/requestApproval"
ANSWERED_HERE = (COMMAND, FILE_CHANGE)
RESOLVED = "serverRequest/resolved"
#: What Codex's TUI (0.169.0) asks and offers; the labels are its own, so a
#: rule or a person picking "Yes, proceed" or option 1 means the same as on screen.
ASKED = {
    COMMAND: "Would you like to run the following command?",
    FILE_CHANGE: "Would you like to make the following edits?",
}
#: A file change request names no decisions: these are the ones its dialog offers.
FILE_CHANGE_DECISIONS = ("accept", "acceptForSession", "cancel")
#: What answering ``deny`` replies: what the TUI's own "No" (Esc) sends on Codex
#: 0.169.0: the command does not run and the turn ends ("aborted by user" reaches
#: the model with the next message), as Esc did on the screen launch ...
DENY = "cancel"
#: ... or, where a request does not offer it, this: the command does not run, the
#: model gets "rejected by user" and the turn goes on.
DENY_ELSE = "decline"
#: The screen's dialog for these (patterns/codex.toml), so the question is the same
#: kind of question from wherever it was read.
DIALOG = "permission"
TOOL = "shell"
SOURCE = "app-server"
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})


def _label(decision: str, params: Mapping[str, Any], method: str) -> str:
    if decision == "accept":
        return "Yes, proceed"
    if decision == "acceptForSession":
        what = "these files" if method == FILE_CHANGE else "this command"
        return f"Yes, and don't ask again for {what} in this session"
    if decision == "acceptWithExecpolicyAmendment":
        prefix = _amendment(params)
        return ("Yes, and don't ask again for commands that start with"
                f" `{shlex.join(prefix) if prefix else '...'}`")
    if decision == "decline":
        return "No, continue without it"
    if decision == "cancel":
        return "No, and tell Codex what to do differently"
    return decision


def _amendment(params: Mapping[str, Any]) -> list[str] | None:
    """The command prefix Codex proposes to allow from now on, if any."""
    for raw in params.get("availableDecisions") or []:
        if isinstance(raw, dict) and isinstance(raw.get("acceptWithExecpolicyAmendment"), dict):
            words = raw["acceptWithExecpolicyAmendment"].get("execpolicy_amendment")
            if isinstance(words, list) and all(isinstance(w, str) for w in words):
                return list(words)
    words = params.get("proposedExecpolicyAmendment")
    if isinstance(words, list) and all(isinstance(w, str) for w in words):
        return list(words)
    return None


def shell_script(command: str) -> str:
    """What Codex's shell runs: ``/bin/bash -lc 'X'`` -> ``X`` (as the model wrote
    it, and as the TUI's dialog shows it after ``$``), anything else as it is.
    The deny-list reads both the same way; the rules match the script."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in ("-lc", "-c"):
        return words[2]
    return command


@dataclass(frozen=True)
class ServerQuestion:
    """An open request, the question it is shown as, and the decision each of
    the question's options replies (option ``n`` -> ``decisions[n - 1]``)."""

    request: ApprovalRequest
    question: Question
    decisions: tuple[str, ...]

    def result(self, decision: str) -> dict[str, Any]:
        """The reply's ``result`` for ``decision``: ``{"decision": ...}``, with the
        amendment Codex proposed where the decision carries one."""
        if decision == "acceptWithExecpolicyAmendment":
            return {"decision": {"acceptWithExecpolicyAmendment": {
                "execpolicy_amendment": _amendment(self.request.params) or []}}}
        return {"decision": decision}

    def decision_for(self, option: int | None, deny: bool) -> str | None:
        """The decision an answer picks: ``deny`` -> :func:`deny_decision`; option
        ``n`` -> its decision; None when the answer names no decision of this request."""
        if deny:
            return deny_decision(self.decisions)
        if option is not None and 1 <= option <= len(self.decisions):
            return self.decisions[option - 1]
        return None


def deny_decision(decisions: tuple[str, ...]) -> str:
    """What ``deny`` replies to a request offering ``decisions``: the dialog's own
    "No" (:data:`DENY`) when offered, else :data:`DENY_ELSE`."""
    return DENY if DENY in decisions else DENY_ELSE


def approval_question(req: ApprovalRequest, files: tuple[str, ...] = ()) -> ServerQuestion | None:
    """The question an approval request is shown as, or None for a request this
    module leaves to the screen. ``files``: what a file change writes (from its
    item, which the request does not repeat)."""
    if req.method not in ANSWERED_HERE:
        return None
    if req.method == COMMAND:
        if not req.command:
            return None
        command: str | None = shell_script(req.command)
        decisions = req.decisions or ("accept", "cancel")
    else:
        grant = req.params.get("grantRoot")
        command = " ".join(files) or (grant if isinstance(grant, str) and grant else None)
        decisions = FILE_CHANGE_DECISIONS
    options = tuple(Option(label=_label(d, req.params, req.method), number=n)
                    for n, d in enumerate(decisions, start=1))
    asked = ASKED[req.method]
    item = Item(question=req.reason or asked, options=options)
    qid = question_id(f"{SOURCE}:{req.method}:{req.request_id}", (item,), TOOL, command)
    return ServerQuestion(req, Question(
        id=qid, kind="permission", title=asked, questions=(item,), tool=TOOL, command=command,
        dialog=DIALOG, source=SOURCE, cwd=req.cwd or ""), tuple(decisions))


def _file_paths(item: Mapping[str, Any]) -> tuple[str, ...]:
    changes = item.get("changes")
    if not isinstance(changes, list):
        return ()
    return tuple(c["path"] for c in changes if isinstance(c, dict) and isinstance(c.get("path"), str))


class ServerApprovals:
    """The open approval requests of the person's thread, fed with every message
    agentwrap's connection hears (:meth:`heard`, in the client's reader thread),
    read by the supervisor (:meth:`open`, :meth:`get`). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int | str, ServerQuestion] = {}  # by request id, in arrival order
        # the requests left to the screen: request id -> (method, turn id)
        self._elsewhere: dict[int | str, tuple[str, str | None]] = {}
        self._files: dict[str, tuple[str, ...]] = {}  # file change item id -> its paths
        self.thread_id: str | None = None  # the person's thread (None: not known yet)

    def heard(self, message: Notification | ApprovalRequest) -> bool:
        """Take one message; True when the open questions changed."""
        with self._lock:
            if isinstance(message, ApprovalRequest):
                if self.thread_id is not None and message.thread_id != self.thread_id:
                    return False
                files = self._files.get(message.item_id or "", ())
                asked = approval_question(message, files)
                if asked is None:  # the terminal answers it; the reason says what it is
                    self._elsewhere[message.request_id] = (message.method, message.turn_id)
                    return True
                self._open[message.request_id] = asked
                return True
            params = message.params
            if message.method == RESOLVED:
                rid = params.get("requestId")
                if not isinstance(rid, (int, str)):
                    return False
                was_left = self._elsewhere.pop(rid, None) is not None
                return self._open.pop(rid, None) is not None or was_left
            if message.method == "item/started":
                item = params.get("item")
                if isinstance(item, dict) and item.get("type") == "fileChange" \
                        and isinstance(item.get("id"), str):
                    if len(self._files) > 64:
                        self._files.clear()
                    self._files[item["id"]] = _file_paths(item)
                return False
            if message.method == "turn/completed":  # a turn's requests end with it
                turn = params.get("turn")
                tid = turn.get("id") if isinstance(turn, dict) else None
                gone = [k for k, q in self._open.items() if q.request.turn_id == tid]
                for k in gone:
                    del self._open[k]
                left = [k for k, (_m, turn_id) in self._elsewhere.items() if turn_id == tid]
                for k in left:
                    del self._elsewhere[k]
                return bool(gone or left)
            return False

    def follow(self, thread_id: str) -> None:
        """The TUI moved to ``thread_id`` (``/new``, ``/resume``): from now on only
        its requests count, and another thread's still open are dropped (their
        dialog is no longer on screen; an answer to one finds it gone)."""
        with self._lock:
            self.thread_id = thread_id
            for rid in [k for k, q in self._open.items() if q.request.thread_id != thread_id]:
                del self._open[rid]
            self._elsewhere.clear()

    def forget(self) -> None:
        """The connection is gone: its requests went with it (the screen decides)."""
        with self._lock:
            self._open.clear()
            self._elsewhere.clear()

    def elsewhere(self) -> str | None:
        """The method of the oldest open request left to the screen, if any."""
        with self._lock:
            return next((m for m, _t in self._elsewhere.values()), None)

    def any_open(self) -> bool:
        """Whether a request is known to be open, answered here or left to the screen."""
        with self._lock:
            return bool(self._open or self._elsewhere)

    def open(self) -> ServerQuestion | None:
        """The oldest open request (the one the TUI's dialog shows first)."""
        with self._lock:
            return next(iter(self._open.values()), None)

    def get(self, question_id: str) -> ServerQuestion | None:
        with self._lock:
            return next((q for q in self._open.values() if q.question.id == question_id), None)

    def resolved(self, question_id: str) -> bool:
        """Whether the request of ``question_id`` is no longer open."""
        return self.get(question_id) is None


__all__ = ["DENY", "DENY_ELSE", "SOURCE", "ServerApprovals", "ServerQuestion",
           "approval_question", "deny_decision", "shell_script"]
