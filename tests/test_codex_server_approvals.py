"""Codex's approval requests as the session's question, and the reply that answers
them, without Codex: the request -> question mapping, the open requests kept from
the server's messages, the detector taking the server's question over the
screen's dialog, the reply an answer becomes, and the deny-list over a rule.
The real server is driven by tests/e2e/test_codex_server_approvals.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentwrap.answers.actions import AnswerStatus, DenyAnswer, OptionAnswer
from agentwrap.answers.denylist import Where
from agentwrap.answers.rules import BUILTIN, decide
from agentwrap.app_server.approvals import (
    ServerApprovals,
    ServerQuestion,
    approval_question,
    shell_script,
)
from agentwrap.app_server.replies import reply
from agentwrap.codex_server.protocol import ApprovalRequest, Notification, approval_request
from agentwrap.config import AnswerRule
from agentwrap.detect.detector import Detector, StructuredReading
from agentwrap.detect.profiles import load_profile
from agentwrap.detect.states import Signal, State
from agentwrap.errors import AppServerError
from agentwrap.paths import Paths
from agentwrap.terminal.screen import Snapshot

COMMAND = "item/commandExecution/requestApproval"
# As Codex 0.169.0 sent it (docs/codex-app-server.md).
PARAMS: dict[str, Any] = {
    "threadId": "t1", "turnId": "u1", "itemId": "call_1", "reason": "scripted by the test",
    "command": "/bin/bash -lc 'touch tool_ran.txt'", "cwd": "/w",
    "commandActions": [{"type": "unknown", "command": "touch tool_ran.txt"}],
    "availableDecisions": [
        "accept", {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch"]}}, "cancel",
    ],
}


def request(rid: int = 7, **params: Any) -> ApprovalRequest:
    return approval_request(rid, COMMAND, {**PARAMS, **params})


def asked(rid: int = 7, **params: Any) -> ServerQuestion:
    got = approval_question(request(rid, **params))
    assert got is not None
    return got


def test_a_command_request_is_a_permission_question_with_the_exact_command_and_cwd() -> None:
    sq = asked()
    q = sq.question
    assert (q.kind, q.tool, q.command, q.cwd, q.source, q.dialog, q.command_unsure) == (
        "permission", "shell", "touch tool_ran.txt", "/w", "app-server", "permission", "")
    labels = [(o.number, o.label) for o in q.questions[0].options]
    assert labels == [(1, "Yes, proceed"),
                      (2, "Yes, and don't ask again for commands that start with `touch`"),
                      (3, "No, and tell Codex what to do differently")]
    assert q.questions[0].question == "scripted by the test"
    assert sq.decisions == ("accept", "acceptWithExecpolicyAmendment", "cancel")


def test_each_request_is_its_own_question_even_for_the_same_command() -> None:
    assert asked(7).question.id == asked(7).question.id
    assert asked(7).question.id != asked(8).question.id


def test_an_answer_becomes_the_requests_decision() -> None:
    sq = asked()
    assert sq.decision_for(1, False) == "accept"
    assert sq.result("accept") == {"decision": "accept"}
    assert sq.decision_for(2, False) == "acceptWithExecpolicyAmendment"
    assert sq.result("acceptWithExecpolicyAmendment") == {"decision": {
        "acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch"]}}}
    assert sq.decision_for(3, False) == "cancel"
    # deny: what the TUI's own "No" (Esc) sends: not run, the turn ends ("aborted by user")
    assert sq.decision_for(None, True) == "cancel"
    assert sq.decision_for(4, False) is None and sq.decision_for(None, False) is None
    # a request that offers no cancel: declined (not run, the turn goes on)
    assert asked(availableDecisions=["accept", "decline"]).decision_for(None, True) == "decline"


def test_the_shell_wrapper_is_taken_off_only_when_it_is_one() -> None:
    assert shell_script("/bin/bash -lc 'rm -rf ~/x && ls'") == "rm -rf ~/x && ls"
    assert shell_script("sh -c 'echo hi'") == "echo hi"
    assert shell_script("/usr/bin/python3 -c 'print(1)'") == "/usr/bin/python3 -c 'print(1)'"
    assert shell_script("bash -lc 'a' extra") == "bash -lc 'a' extra"
    assert shell_script("bash -lc 'open") == "bash -lc 'open"  # not shell words: as it is


def test_file_changes_name_their_files_and_other_requests_are_left_to_the_screen() -> None:
    approvals = ServerApprovals()
    approvals.thread_id = "t1"
    approvals.heard(Notification("item/started", {"item": {
        "type": "fileChange", "id": "call_2", "changes": [{"path": "/w/a.py", "kind": "add"}]}}))
    change = approval_request(3, "item/fileChange/requestApproval",
                              {"threadId": "t1", "turnId": "u1", "itemId": "call_2"})
    assert approvals.heard(change)
    got = approvals.open()
    assert got is not None and got.question.command == "/w/a.py"
    assert got.decisions == ("accept", "acceptForSession", "cancel")
    perms = approval_request(4, "item/permissions/requestApproval",
                             {"threadId": "t1", "turnId": "u1", "itemId": "x"})
    assert approval_question(perms) is None
    assert approval_question(request(command=None)) is None
    # left to the screen, but known to be open (the reason names it) until resolved
    assert approvals.elsewhere() is None
    assert approvals.heard(perms)
    assert approvals.elsewhere() == "item/permissions/requestApproval" and approvals.any_open()
    assert approvals.heard(Notification("serverRequest/resolved", {"requestId": 4}))
    assert approvals.elsewhere() is None
    ask = approval_request(5, "item/tool/requestUserInput", {"threadId": "t1", "turnId": "u1"})
    assert approvals.heard(ask) and approvals.elsewhere() == "item/tool/requestUserInput"
    assert approvals.heard(Notification("turn/completed", {"turn": {"id": "u1"}}))
    assert approvals.elsewhere() is None


def test_open_requests_follow_the_servers_messages() -> None:
    approvals = ServerApprovals()
    approvals.thread_id = "t1"
    assert not approvals.heard(request(1, threadId="side"))  # another thread's
    assert approvals.heard(request(1)) and approvals.heard(request(2))
    first = approvals.open()
    assert first is not None and first.request.request_id == 1  # the oldest first
    qid = first.question.id
    assert approvals.get(qid) is first and not approvals.resolved(qid)
    # answered anywhere (the TUI, or our reply): the server says so
    assert approvals.heard(Notification("serverRequest/resolved", {"requestId": 1, "threadId": "t1"}))
    assert approvals.resolved(qid)
    assert not approvals.heard(Notification("serverRequest/resolved", {"requestId": 1}))
    assert approvals.heard(Notification("turn/completed", {"turn": {"id": "u1"}}))
    assert approvals.open() is None
    approvals.heard(request(5))
    approvals.forget()  # the connection is gone
    assert approvals.open() is None


class Published:
    def __init__(self, reading: StructuredReading | None) -> None:
        self.reading = reading

    def read(self) -> StructuredReading | None:
        return self.reading

    def stamp(self) -> float | None:
        return None


DIALOG = """
  Would you like to run the following command?

  $ touch tool_ra…

› 1. Yes, proceed (y)
  2. No, and tell Codex what to do differently (esc)
"""


def test_the_servers_question_wins_over_the_dialog_on_screen(tmp_path: Path) -> None:
    q = asked().question
    source = Published(StructuredReading(State.WAITING_INPUT, "Codex's app-server asks", question=q))
    det = Detector(load_profile("codex", Paths.from_env({"HOME": str(tmp_path)})), source)
    reading = det.update(Snapshot.from_text(DIALOG, cols=80, rows=12))
    assert (reading.state, reading.signal) == (State.WAITING_INPUT, Signal.STRUCTURED)
    assert det.question == q and det.question.command == "touch tool_ran.txt"
    source.reading = None  # resolved: the screen decides again
    det.update(Snapshot.from_text(DIALOG, cols=80, rows=12))
    assert det.question is not None and det.question.source == "screen"


def test_an_announced_request_keeps_the_screens_dialog_from_being_the_question(
    tmp_path: Path,
) -> None:
    """The server says the thread waits on an approval whose request has not
    reached agentwrap yet: the dialog the TUI draws meanwhile is not the question
    (it would be replaced by the server's, of another id, and an answer to it
    refused as stale); once the request is there, it is the question."""
    due = StructuredReading(State.WAITING_INPUT, "on its way", question_due=True)
    source = Published(due)
    det = Detector(load_profile("codex", Paths.from_env({"HOME": str(tmp_path)})), source)
    reading = det.update(Snapshot.from_text(DIALOG, cols=80, rows=12))
    assert (reading.state, reading.signal, reading.rule) == (
        State.WAITING_INPUT, Signal.STRUCTURED, "structured:question-due")
    assert det.question is None
    q = asked().question
    source.reading = StructuredReading(State.WAITING_INPUT, "asks", question=q)
    det.update(Snapshot.from_text(DIALOG, cols=80, rows=12))
    assert det.question == q


def _status(flags: list[str], kind: str = "active") -> Notification:
    return Notification("thread/status/changed",
                        {"threadId": "t1", "status": {"type": kind, "activeFlags": flags}})


def test_the_request_is_awaited_a_moment_and_then_the_screen_decides(
    tmp_path: Path, monkeypatch: Any,
) -> None:
    """AppServerState's reading while the thread waits on the person: the question
    is due until a request is there (answered here or left to the terminal, which
    the reason then names), and for at most DUE_S: then the screen decides."""
    from agentwrap.app_server import state as mod

    state = mod.AppServerState(tmp_path / "none.sock")
    state.threads.thread_id = state.approvals.thread_id = "t1"
    monkeypatch.setattr(state.connection, "wake_subscriber", lambda: None)
    monkeypatch.setattr(state, "status", lambda: state.threads._status.get("t1"))
    state._heard(_status(["waitingOnApproval"]))
    got = state.read()
    assert got is not None and got.question_due and got.state is State.WAITING_INPUT
    state.approvals.heard(approval_request(4, "item/permissions/requestApproval",
                                           {"threadId": "t1", "turnId": "u1"}))
    got = state.read()
    assert got is not None and not got.question_due and got.question is None
    assert "item/permissions/requestApproval" in got.reason and "terminal" in got.reason
    state.approvals.forget()
    state._heard(_status([]))
    state._heard(_status(["waitingOnApproval"]))
    assert state.threads.waiting_since is not None
    state.threads.waiting_since -= mod.DUE_S  # the request never came: the screen decides
    got = state.read()
    assert got is not None and not got.question_due and got.state is State.WAITING_INPUT
    state._heard(_status([], kind="idle"))
    assert state.threads.waiting_since is None


def test_a_turn_starting_wakes_the_subscription_at_once(tmp_path: Path, monkeypatch: Any) -> None:
    """The person's thread turning active (its first turn: it can be resumed from
    now on) subscribes from the subscriber thread at once, not at the
    supervisor's next look: the first turn's approvals then reach agentwrap."""
    import threading

    from agentwrap.app_server import state as mod

    resumed = threading.Event()

    class Client:
        closed = False

        def resume(self, thread_id: str) -> None:
            assert thread_id == "t1"
            resumed.set()

    state = mod.AppServerState(tmp_path / "none.sock")
    state.threads.thread_id = state.approvals.thread_id = "t1"
    state.connection._client = Client()  # type: ignore[assignment]
    try:
        state._heard(_status([], kind="idle"))
        assert not resumed.wait(0.2)  # idle: nothing to subscribe to yet
        state._heard(_status([]))  # a turn started
        assert resumed.wait(10), "not subscribed when the turn started"
        assert state.connection._subscribed is state.connection._client
    finally:
        state.connection._closing.set()
        state.connection._kick.set()


class Server:
    """A scripted stand-in for AppServerState: the real ServerApprovals, and a
    reply that the server resolves (or a connection that fails)."""

    def __init__(self, fail: bool = False) -> None:
        self.approvals = ServerApprovals()
        self.sent: list[tuple[int | str, dict[str, Any]]] = []
        self.fail = fail

    def reply(self, sq: ServerQuestion, decision: str) -> None:
        if self.fail:
            raise AppServerError("connection lost")
        self.sent.append((sq.request.request_id, sq.result(decision)))
        self.approvals.heard(Notification("serverRequest/resolved",
                                          {"requestId": sq.request.request_id}))


def _reply(server: Server | None, q: Any, answer: Any) -> tuple[AnswerStatus, str]:
    return reply(server, q, answer, lambda _s: None, verify_s=1.0)  # type: ignore[arg-type]


def test_an_answer_is_a_reply_to_the_open_request_and_never_to_another() -> None:
    server = Server()
    server.approvals.heard(request(9))
    sq = server.approvals.open()
    assert sq is not None
    status, detail = _reply(server, sq.question, OptionAnswer(1, 1, "Yes, proceed"))
    assert status is AnswerStatus.APPLIED and "replied 'accept'" in detail, detail
    assert server.sent == [(9, {"decision": "accept"})]
    # the same question again: resolved already (answered in the TUI, say): stale, nothing sent
    status, detail = _reply(server, sq.question, DenyAnswer())
    assert status is AnswerStatus.STALE and server.sent == [(9, {"decision": "accept"})], detail


def test_deny_cancels_as_the_tuis_no_and_a_failed_reply_types_nothing() -> None:
    server = Server()
    server.approvals.heard(request(10))
    sq = server.approvals.open()
    assert sq is not None
    assert _reply(server, sq.question, DenyAnswer())[0] is AnswerStatus.APPLIED
    assert server.sent == [(10, {"decision": "cancel"})]
    broken = Server(fail=True)
    broken.approvals.heard(request(11))
    sq = broken.approvals.open()
    assert sq is not None
    status, detail = _reply(broken, sq.question, OptionAnswer(1, 1, "Yes, proceed"))
    assert status is AnswerStatus.FAILED and "nothing was typed" in detail
    assert _reply(None, sq.question, DenyAnswer())[0] is AnswerStatus.FAILED


def test_an_allow_everything_rule_never_approves_a_destructive_request(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    where = Where.of(project, home=str(tmp_path))
    rule = AnswerRule(name="allow-all", option=1)
    bad = asked(command="/bin/bash -lc 'rm -rf ~/important'", cwd=str(project)).question
    decision = decide(bad, "codex", [rule], where=where)
    assert decision is not None and decision.holds and decision.rule == BUILTIN, decision
    good = asked(cwd=str(project)).question
    decision = decide(good, "codex", [rule], where=where)
    assert decision is not None and decision.answer == {"option": 1}, decision


def _started(tid: str, **thread: Any) -> Notification:
    return Notification("thread/started", {"thread": {
        "id": tid, "ephemeral": False, "parentThreadId": None, "status": {"type": "idle"},
        **thread}})


def test_the_state_follows_the_thread_the_tui_moves_to(tmp_path: Path, monkeypatch: Any) -> None:
    """/new (a non-ephemeral thread/started) and /resume (thread/goal/cleared of a
    thread of the person's, idle, not just given a turn by agentwrap) move the
    state, the approvals and the subscription to that thread; side threads,
    sub-agents and agentwrap's own turn in the old thread do not."""
    from agentwrap.app_server import state as mod

    state = mod.AppServerState(tmp_path / "none.sock")
    monkeypatch.setattr(state.connection, "wake_subscriber", lambda: None)
    monkeypatch.setattr(state, "status", lambda: state.threads._status.get(state.threads.thread_id or ""))
    state._heard(_started("t1"))
    state._heard(_started("side", ephemeral=True))
    state._heard(_started("agent", parentThreadId="t1"))
    assert state.thread_id == state.approvals.thread_id == "t1"
    state._heard(_status([]))  # t1's first turn: subscribed, an approval open
    state.connection._subscribed = object()  # type: ignore[assignment]
    assert state.threads._turned and state.approvals.heard(request(3))
    state._heard(_status([], kind="idle"))
    state._heard(_started("t2"))  # the person's /new
    assert state.thread_id == state.approvals.thread_id == "t2"
    assert state.approvals.open() is None and not state.approvals.heard(request(4))
    assert state.connection._subscribed is None and not state.threads._turned  # t2 has no rollout yet
    got = state.read()
    assert got is not None and got.state is State.READY
    state._heard(_status(["waitingOnApproval"]))  # t1's status says nothing of t2 now
    assert state.read().state is State.READY  # type: ignore[union-attr]
    state._heard(_status([], kind="idle"))
    state.note_turn_start("t1")  # agentwrap's turn/start clears t1's goal too: no /resume
    state._heard(Notification("thread/goal/cleared", {"threadId": "t1"}))
    assert state.thread_id == "t2"
    state.threads._own_turns.clear()
    state._heard(Notification("thread/goal/cleared", {"threadId": "side"}))
    assert state.thread_id == "t2"
    state._heard(Notification("thread/goal/cleared", {"threadId": "t1"}))  # /resume of t1
    assert state.thread_id == state.approvals.thread_id == "t1" and state.threads._turned
    assert state.read().state is State.READY  # type: ignore[union-attr]
    state._heard(_status([]))
    assert state.read().state is State.BUSY  # type: ignore[union-attr]
