"""The hub's rule for one host's calls (issue 38), over a real SQLite hub store
and real frames of ``agentwrap.link/1``: every store method a host may call
is scoped to its own sessions, the calls a supervisor repeats after a cut
are applied once, and a garbage frame is a protocol error, never a crash."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentwrap.errors import LinkProtocolError
from agentwrap.hub.keys import HubKeys
from agentwrap.hub.scope import HostCalls
from agentwrap.hub.server import open_hub_store
from agentwrap.message import Attempt, NewMessage, Status
from agentwrap.queue import link_protocol as wire
from agentwrap.queue.sqlstore import SQLMessageStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLMessageStore]:
    s = open_hub_store(tmp_path)
    try:
        yield s
    finally:
        s.close()


def call(calls: HostCalls, method: str, **params: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(calls.answer(wire.request(1, method, params)))
    return out


#: One call per scoped method of the protocol that names beta's session, batch
#: or message: each must be refused for alpha (the table covers METHODS).
def foreign_calls(beta_msg: str) -> dict[str, dict[str, Any]]:
    attempt = Attempt(beta_msg, "b-beta", 1, time.time(), None, "tmux-paste", "ok", "")
    return {
        "get": {"message_id": beta_msg},
        "get_by_prefix": {"prefix": beta_msg[:12]},
        "peek": {"session": "beta/api"},
        "claim_batch": {"session": "beta/api", "batch_id": "b-x", "max_bytes": 10_000},
        "set_phase": {"batch_id": "b-beta", "phase": "pasting"},
        "in_flight": {"session": "beta/api"},
        "record_attempt": {"attempt": wire.to_wire(attempt)},
        "attempts": {"message_id": beta_msg},
        "retry_later": {"batch_id": "b-beta", "next_attempt_at": 0.0, "detail": "x"},
        "hold": {"batch_id": "b-beta", "next_attempt_at": 0.0, "detail": "x"},
        "finish": {"status": "delivered", "batch_id": "b-beta"},
        "cancel": {"message_id": beta_msg},
        "acknowledge": {"message_id": beta_msg, "detail": "ACK"},
        "history": {"session": "beta/api"},
    }


def test_every_scoped_method_refuses_another_hosts_session(store: SQLMessageStore) -> None:
    beta = HostCalls(store, "beta")
    sent = call(beta, "enqueue", new=NewMessage(session="api", content="beta's own"))
    beta_msg = sent["result"]["message"]["id"]
    assert sent["result"]["message"]["session"] == "beta/api"
    assert call(beta, "claim_batch", session="api", batch_id="b-beta", max_bytes=10_000)["result"]
    table = foreign_calls(beta_msg)
    scoped = {m for m, by in wire.METHODS.items() if by in ("session", "batch", "message")}
    assert scoped == set(table), "every scoped method has its row"
    alpha = HostCalls(store, "alpha")
    for method, params in table.items():
        got = call(alpha, method, **params)
        assert got["error"]["code"] == wire.REFUSED, method
        assert got["error"]["data"]["error"] == "ForeignSession", method
    assert store.get(beta_msg).status is Status.DELIVERING  # nothing changed
    assert store.attempts(beta_msg) == []
    assert call(alpha, "events", after=0)["result"] == []  # none of beta's message events
    assert call(alpha, "events", after=0, session="beta/api")["result"] == []
    # ... but every host's view events (`events -f` across hosts): states, the hub's word
    with store._write() as w:
        w.event(time.time(), "beta/api", "session.state", "", state="busy", via="hub")
        w.event(time.time(), "", "host.silent", "", host="beta", reason="its link closed")
    for session in (None, "beta/api"):
        seen = call(alpha, "events", after=0, session=session)["result"]
        assert {e["kind"] for e in seen} == ({"session.state", "host.silent"} if session is None
                                             else {"session.state"}), seen
        assert {e["kind"] for e in seen} <= wire.VIEW_EVENT_KINDS
    # the one view: any host counts another's pending messages (`ls` on every host), no more
    assert call(alpha, "pending_count", session="beta/api")["result"] == 0
    assert call(alpha, "pending_count", session="api")["result"] == 0
    assert call(alpha, "pending_count")["error"]["data"]["error"] == "ForeignSession"


def test_calls_repeated_after_a_cut_are_applied_once(store: SQLMessageStore) -> None:
    alpha = HostCalls(store, "alpha")
    for text in ("one", "two"):
        call(alpha, "enqueue", new=NewMessage(session="api", content=text))
    first = call(alpha, "claim_batch", session="api", batch_id="b-1", max_bytes=4, limit=1)
    call(alpha, "enqueue", new=NewMessage(session="api", content="three"))
    again = call(alpha, "claim_batch", session="api", batch_id="b-1", max_bytes=10_000)
    assert [m["id"] for m in again["result"]] == [m["id"] for m in first["result"]]
    mid = first["result"][0]["id"]
    attempt = wire.to_wire(Attempt(mid, "b-1", 1, time.time(), time.time(), "tmux-paste",
                                   "submitted", "seen"))
    call(alpha, "set_phase", batch_id="b-1", phase="pasting")
    call(alpha, "set_phase", batch_id="b-1", phase="pasting")
    call(alpha, "record_attempt", attempt=attempt)
    call(alpha, "record_attempt", attempt=attempt)
    assert len(store.attempts(mid)) == 1
    assert call(alpha, "finish", status="delivered", batch_id="b-1")["result"] == 1
    assert call(alpha, "finish", status="delivered", batch_id="b-1")["result"] == 0
    assert store.pending_count("alpha/api") == 2


@pytest.mark.parametrize("frame", [
    "{not json", "[]", '"x"', '{"jsonrpc": "1.0", "id": 1, "method": "get"}',
    '{"jsonrpc": "2.0", "method": "get"}', '{"jsonrpc": "2.0", "id": 1, "params": {}}',
    "[" * 100_000,
])
def test_a_garbage_frame_is_a_protocol_error(store: SQLMessageStore, frame: str) -> None:
    with pytest.raises(LinkProtocolError):
        HostCalls(store, "alpha").answer(frame)


@pytest.mark.parametrize(("method", "params", "code"), [
    ("drop_tables", {}, wire.NO_METHOD),
    ("close", {}, wire.NO_METHOD),  # the store's own, not the protocol's
    ("get", {"nope": 1}, wire.BAD_PARAMS),
    ("set_phase", {"batch_id": "b", "phase": "typed-twice"}, wire.BAD_PARAMS),
    ("enqueue", {"new": {"session": "api"}}, wire.BAD_PARAMS),
])
def test_a_bad_call_is_answered_with_its_json_rpc_error(
        store: SQLMessageStore, method: str, params: dict[str, Any], code: int) -> None:
    got = call(HostCalls(store, "alpha"), method, **params)
    assert got["error"]["code"] == code


def test_a_join_code_works_once_and_the_hashes_hold_no_secret(tmp_path: Path) -> None:
    keys = HubKeys(tmp_path / "keys.db")
    code = keys.invite("plain", "alpha")
    credential = keys.join(code, "alpha")
    raw = (tmp_path / "keys.db").read_bytes()
    assert code.split(".")[1].encode() not in raw and credential.encode() not in raw
    keys.check("alpha", credential)
    from agentwrap.errors import JoinRefused, LinkRefused

    with pytest.raises(JoinRefused, match="already used"):
        keys.join(code, "alpha")
    with pytest.raises(JoinRefused, match="for host 'alpha'"):
        keys.join(keys.invite("plain", "alpha"), "beta")
    with pytest.raises(LinkRefused):
        keys.check("alpha", credential[:-1] + ("A" if credential[-1] != "A" else "B"))
    assert keys.revoke("alpha")
    with pytest.raises(LinkRefused):
        keys.check("alpha", credential)


_RECORD = {"name": "api", "profile": "standin", "backend": "tmux", "command": ["x"],
           "cwd": "/", "started": 1.0, "state": "ready"}


@pytest.mark.parametrize("report", [
    [{**_RECORD, "host": "beta"}],            # names another host
    [{**_RECORD, "name": "beta/api"}],        # another host's key
    [_RECORD, {**_RECORD, "name": "beta/x"}],  # one foreign row refuses the whole report
])
def test_a_host_reports_only_its_own_sessions(store: SQLMessageStore, tmp_path: Path,
                                              report: list[dict[str, Any]]) -> None:
    from agentwrap.hub.roster import Roster

    roster = Roster(tmp_path / "hub-sessions.db")
    alpha = HostCalls(store, "alpha", roster)
    got = call(alpha, "register", sessions=report, period_s=1.0)
    assert got["error"]["data"]["error"] == "ForeignSession"
    assert roster.listed()["hosts"] == []  # nothing kept


@pytest.mark.parametrize("report", [
    "not a list", [{"no": "name"}], [{**_RECORD, "name": "../../etc"}], [_RECORD] * 1001,
])
def test_a_malformed_report_is_refused_and_keeps_nothing(
        store: SQLMessageStore, tmp_path: Path, report: Any) -> None:
    from agentwrap.hub.roster import Roster

    roster = Roster(tmp_path / "hub-sessions.db")
    got = call(HostCalls(store, "alpha", roster), "register", sessions=report, period_s=1.0)
    assert "error" in got and got["error"]["code"] in (wire.BAD_PARAMS, wire.REFUSED)
    assert roster.listed()["hosts"] == []


def test_reports_replace_the_hosts_last_and_every_host_is_viewed(
        store: SQLMessageStore, tmp_path: Path) -> None:
    from agentwrap.hub.roster import Roster
    from agentwrap.sessions.linked import others_from

    roster = Roster(tmp_path / "hub-sessions.db")
    alpha, beta = HostCalls(store, "alpha", roster), HostCalls(store, "beta", roster)
    assert call(beta, "register", sessions=[_RECORD, {**_RECORD, "name": "web"}],
                period_s=1.0)["result"] == 2
    assert call(beta, "register", sessions=[_RECORD], period_s=1.0)["result"] == 1  # web ended
    call(alpha, "register", sessions=[{**_RECORD, "name": "own"}], period_s=1.0)
    view = call(alpha, "sessions")["result"]
    assert [(h["host"], [s["name"] for s in h["sessions"]]) for h in view["hosts"]] == [
        ("alpha", ["own"]), ("beta", ["api"])]
    others = others_from(view, "alpha")
    assert [(r.host, r.name, r.liveness) for r in others] == [("beta", "api", "running")]
    later = {**view, "now": view["now"] + 10}  # past 3 of beta's 1 s periods
    (silent,) = others_from(later, "alpha")
    assert silent.liveness == "unreachable" and silent.seen is not None
    assert silent.seen.unreachable_since == view["hosts"][1]["reported"]
    garbage = {"now": 1.0, "hosts": [{"host": "beta"}, {"host": "gamma", "reported": 1.0,
                                                        "periodS": 1.0,
                                                        "sessions": [{"state": "?"}]}]}
    assert others_from(garbage, "alpha") == []  # skipped, never guessed at


def test_a_report_like_the_last_rewrites_no_row_and_tells_nobody(
        store: SQLMessageStore, tmp_path: Path) -> None:
    """An idle host's report is its last one again: the hub moves the report's
    time only (a thousand idle sessions cost one small write per report), no
    ``session.state`` event is written, and the page is not told (nothing
    changed); a changed state is one event with the state it had before."""
    from agentwrap.hub.roster import Roster

    roster = Roster(tmp_path / "hub-sessions.db")
    beta = HostCalls(store, "beta", roster)
    mine = {**_RECORD, "host": "beta"}  # as the hub keeps a report's record
    first = roster.register("beta", [mine], 1.0, now=100.0)
    assert first.changed and first.before == {} and first.count == 1
    again = roster.register("beta", [dict(reversed(list(mine.items())))], 1.0, now=105.0)
    assert not again.changed and again.before == {"api": "ready"}  # key order is no change
    assert roster.listed(now=106.0)["hosts"][0]["reported"] == 105.0  # the beat moved
    before = store.last_event_id()
    call(beta, "register", sessions=[_RECORD], period_s=1.0)
    assert not beta.roster_changed and store.last_event_id() == before
    call(beta, "register", sessions=[{**_RECORD, "state": "busy"}], period_s=1.0)
    assert beta.roster_changed
    events = [e for e in store.events(after=before) if e.kind == "session.state"]
    assert [(e.session, e.data["state"]) for e in events] == [("beta/api", "busy")]
    gone = roster.register("beta", [], 1.0)
    assert gone.changed and gone.count == 0
    assert [h["sessions"] for h in roster.listed()["hosts"] if h["host"] == "beta"] == [[]]


def test_a_store_open_on_a_host_that_never_joined_loads_no_link_code(tmp_path: Path) -> None:
    """The link file's name is one name in both modules, and a host without it
    pays nothing for the hub: the link's module (asyncio, ssl) is not imported."""
    import subprocess
    import sys

    from agentwrap.queue import backend, link

    assert backend.LINK_FILE == link.LINK_FILE
    code = ("import sys; from pathlib import Path; from agentwrap.queue.backend import linked_store;"
            f" assert linked_store(Path({str(tmp_path)!r})) is None;"
            " print('agentwrap.queue.link' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_sender_reads_its_message_to_another_host_and_acts_on_nothing(
        store: SQLMessageStore) -> None:
    alpha, beta, gamma = (HostCalls(store, h) for h in ("alpha", "beta", "gamma"))
    forged = NewMessage(session="beta/api", content="from alpha",
                        metadata={"hub_sender": "gamma"})  # the frame's word is not taken
    sent = call(alpha, "enqueue", new=forged)["result"]["message"]
    assert sent["metadata"]["hub_sender"] == "alpha"
    for method, params in (("get", {"message_id": sent["id"]}),
                           ("get_by_prefix", {"prefix": sent["id"][:12]}),
                           ("attempts", {"message_id": sent["id"]})):
        assert "result" in call(alpha, method, **params), method  # the sender reads it
        assert "result" in call(beta, method, **params), method  # the owner too
        assert call(gamma, method, **params)["error"]["data"]["error"] == "ForeignSession"
    for method, params in (("cancel", {"message_id": sent["id"]}),
                           ("acknowledge", {"message_id": sent["id"], "detail": "ACK"}),
                           ("finish", {"status": "delivered", "message_ids": [sent["id"]]})):
        assert call(alpha, method, **params)["error"]["data"]["error"] == "ForeignSession"
    assert store.get(sent["id"]).status is Status.PENDING


def test_a_call_the_hub_fails_to_run_is_answered_at_once_as_store_down(
        store: SQLMessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub's own fault (its database: a missing table, a bug) answers the
    call with -32603 naming StoreDown, which the host raises (exit 75: nothing
    recorded it did not find again), not a link left waiting out its 15 s."""
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError('relation "hub_sessions" does not exist')

    monkeypatch.setattr(store, "pending_count", broken)
    got = call(HostCalls(store, "alpha"), "pending_count", session="alpha/dev")
    assert got["error"]["code"] == wire.INTERNAL
    assert got["error"]["data"]["error"] == "StoreDown"
    assert "hub_sessions" not in json.dumps(got)  # the fault's words stay in the hub's log
    from agentwrap.errors import StoreDown

    assert isinstance(wire.error_from_wire(got["error"]), StoreDown)


def test_the_hub_says_once_that_a_host_went_silent_and_when_it_linked(
        store: SQLMessageStore, tmp_path: Path) -> None:
    """host.silent once per silence (its link closed, or its reports past their
    deadline), host.linked when it is back; a host just linked gets its deadline
    afresh (its first report is on its way)."""
    from agentwrap.hub.liveness import HostWatch
    from agentwrap.hub.roster import Roster

    roster = Roster(tmp_path / "roster.db")
    now = time.time()
    roster.register("beta", [], 1.0, now=now - 10)  # silent past 3 periods
    roster.register("alpha", [], 1.0, now=now)
    watch = HostWatch(store, roster)

    def said() -> list[tuple[str, str, str]]:
        return [(e.kind, e.data["host"], str(e.data.get("reason", "")))
                for e in store.events(0, kinds=["host.silent", "host.linked"])]

    assert watch.judge(now) == ["beta"]
    assert watch.judge(now) == []  # once per silence
    watch.unlinked("beta")  # said already: not again
    assert said() == [("host.silent", "beta", "no report past its deadline")]
    watch.linked("beta")
    assert watch.judge(time.time()) == []  # just linked: its report is on its way
    watch.unlinked("beta")
    assert said()[1:] == [("host.linked", "beta", ""),
                          ("host.silent", "beta", "its link to the hub closed")]
    assert all(e.session == "" for e in store.events(0, kinds=["host.silent"]))
