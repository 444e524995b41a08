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
        "pending_count": {"session": "beta/api"},
        "events": {"after": 0, "session": "beta/api"},
    }


def test_every_scoped_method_refuses_another_hosts_session(store: SQLMessageStore) -> None:
    beta = HostCalls(store, "beta")
    sent = call(beta, "enqueue", new=NewMessage(session="api", content="beta's own"))
    beta_msg = sent["result"]["message"]["id"]
    assert sent["result"]["message"]["session"] == "beta/api"
    assert call(beta, "claim_batch", session="api", batch_id="b-beta", max_bytes=10_000)["result"]
    table = foreign_calls(beta_msg)
    scoped = {m for m, by in wire.METHODS.items() if by in ("session", "batch", "message")}
    assert scoped | {"events"} == set(table), "every scoped method has its row"
    alpha = HostCalls(store, "alpha")
    for method, params in table.items():
        got = call(alpha, method, **params)
        assert got["error"]["code"] == wire.REFUSED, method
        assert got["error"]["data"]["error"] == "ForeignSession", method
    assert store.get(beta_msg).status is Status.DELIVERING  # nothing changed
    assert store.attempts(beta_msg) == []
    assert call(alpha, "events", after=0)["result"] == []  # none of beta's events


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
