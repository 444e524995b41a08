"""The HTTP API in-process (httpx's ASGI transport over the real app, store
and registry): every endpoint and every error code. The rules behind them are
the service's and are tested there; these tests check the adapter: status
codes, bodies, headers, and that nothing is stored when a request is refused.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys

import pytest
from conftest import ROOT, AwEnv
from support.http_kit import TOKEN, InProcess, body, chunks, in_process, register

from agentwrap.events import Event
from agentwrap.message import QueueLimits
from agentwrap.surfaces.http.app import body_limit
from agentwrap.surfaces.http.auth import load_or_create_token, token_path
from agentwrap.surfaces.http.sse import Cursor, format_sse, parse_last_event_id, public_events

OPENAPI = ROOT / "docs" / "openapi.json"
REGENERATE = ".venv/bin/python -m agentwrap.surfaces.http.openapi > docs/openapi.json"


@pytest.fixture
def api(aw: AwEnv) -> InProcess:
    register(aw, "fake")
    client = in_process(aw)
    yield client
    client.app.state.pool.close()


def stored(aw: AwEnv) -> int:
    store = aw.store()
    try:
        return len(store.history(None, limit=10_000))
    finally:
        store.close()


# --- auth -----------------------------------------------------------------------------------


def test_every_api_request_needs_the_token(api: InProcess) -> None:
    for method, path in [("GET", "/api/sessions"), ("POST", "/api/sessions/fake/input"),
                         ("GET", "/api/events"), ("DELETE", "/api/messages/abcd")]:
        r = api.request(method, path, auth=False, json=body())
        assert r.status_code == 401, (method, path, r.text)
        assert r.json()["error"] == "Unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
        r = api.request(method, path, auth=False, json=body(),
                        headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and r.json()["detail"] == "wrong bearer token"
    r = api.get("/healthz", auth=False)
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_the_token_file_is_private_and_stable(aw: AwEnv) -> None:
    first = load_or_create_token(aw.paths)
    assert load_or_create_token(aw.paths) == first and len(first) >= 40
    mode = stat.S_IMODE(os.stat(token_path(aw.paths)).st_mode)
    assert mode == 0o600
    assert aw.cli("token", check=True).stdout.strip() == first
    renewed = aw.cli("token", "--new", check=True).stdout.strip()
    assert renewed != first and load_or_create_token(aw.paths) == renewed


# --- POST input -----------------------------------------------------------------------------


def test_post_input_stores_the_message(aw: AwEnv, api: InProcess) -> None:
    r = api.post("/api/sessions/fake/input", json=body(
        "CI failed on main", priority="high", ttl=60, metadata={"pr": 42},
        correlationId="c1", depth=1, ack=True))
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["queued"] is True and got["created"] is True and got["status"] == "pending"
    assert got["supervised"] is False and got["final"] is False and got["evicted"] is None
    m = api.get(f"/api/messages/{got['id']}").json()
    assert (m["content"], m["source"], m["sourceId"], m["priority"]) == (
        "CI failed on main", "webhook", "github", "high")
    assert m["metadata"] == {"pr": 42} and m["correlationId"] == "c1" and m["depth"] == 1
    assert m["requireAck"] is True and m["attemptLog"] == []


def test_idempotency_key_repeat_and_conflict(aw: AwEnv, api: InProcess) -> None:
    first = api.post("/api/sessions/fake/input", json=body("x", idempotencyKey="k1"))
    again = api.post("/api/sessions/fake/input", json=body("x", idempotencyKey="k1"))
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"] and again.json()["created"] is False
    clash = api.post("/api/sessions/fake/input", json=body("other", idempotencyKey="k1"))
    assert clash.status_code == 409, clash.text
    assert clash.json()["error"] == "Idempotency key reused with other content"
    assert stored(aw) == 1


@pytest.mark.parametrize("payload, field", [
    (body(extra=1), "extra"),  # unknown field
    (body(content=5), "content"),  # wrong type
    (body(ttl="30"), "ttl"),  # a string is not a number here
    (body(priority="urgent"), "priority"),
    (body(priority="startup"), "priority"),  # agentwrap's own
    (body(source="nobody"), "source"),
    ({"source": "webhook"}, "content"),  # missing
])
def test_a_malformed_body_is_400_naming_the_field(
    aw: AwEnv, api: InProcess, payload: dict[str, object], field: str
) -> None:
    r = api.post("/api/sessions/fake/input", json=payload)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "Invalid request" and r.json()["field"] == field
    assert all(set(e) == {"field", "message", "type"} for e in r.json()["errors"])  # no input
    assert stored(aw) == 0


@pytest.mark.parametrize("payload, words", [
    (body(ttl=0), "ttl"),
    (body(ttl=99_999), "ttl"),
    (body(source="system"), "reserved"),  # the store refuses agentwrap's own source
    (body("   "), "empty"),
    (body(metadata={"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {}}}}}}}}}), "deeper"),
])
def test_values_the_store_refuses_are_400(
    aw: AwEnv, api: InProcess, payload: dict[str, object], words: str
) -> None:
    r = api.post("/api/sessions/fake/input", json=payload)
    assert r.status_code == 400, r.text
    assert words in r.json()["detail"] and r.json()["hint"]
    assert stored(aw) == 0


def test_bodies_that_are_not_json_or_not_utf8_are_400(aw: AwEnv, api: InProcess) -> None:
    ok = json.dumps(body("caf\u00e9"), ensure_ascii=False).encode()
    assert b"\xc3\xa9" in ok
    for raw in [ok.replace(b"\xc3\xa9", b"\xe9"), b"{not json", b"[" * 50_000]:
        r = api.post("/api/sessions/fake/input", content=raw,
                     headers={"content-type": "application/json"})
        assert r.status_code == 400, (raw[:20], r.status_code, r.text)
        assert r.json()["error"] == "Invalid request"
    lone = b'{"source": "webhook", "content": "a \\ud800 b"}'  # a lone surrogate
    r = api.post("/api/sessions/fake/input", content=lone,
                 headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert stored(aw) == 0


def test_unknown_session_is_404_with_its_id(aw: AwEnv, api: InProcess) -> None:
    r = api.post("/api/sessions/nosuch/input", json=body())
    assert r.status_code == 404
    assert r.json()["error"] == "Session not found" and r.json()["sessionId"] == "nosuch"
    for path in ["/api/sessions/nosuch", "/api/sessions/nosuch/input"]:
        r = api.get(path)
        assert r.status_code == 404 and r.json()["sessionId"] == "nosuch"


def test_content_over_the_limit_is_413_never_truncated(aw: AwEnv, api: InProcess) -> None:
    r = api.post("/api/sessions/fake/input", json=body("x" * (10 * 1024 + 1)))
    assert r.status_code == 413, r.text
    assert r.json()["error"] == "Payload too large" and r.json()["limit"] == 10 * 1024
    assert api.post("/api/sessions/fake/input", json=body("x" * 10 * 1024)).status_code == 201
    assert stored(aw) == 1


def test_bodies_are_capped_before_parsing(aw: AwEnv, api: InProcess) -> None:
    cap = body_limit(QueueLimits())
    huge = json.dumps(body("y" * (cap + 10))).encode()
    r = api.post("/api/sessions/fake/input", content=huge,
                 headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["limit"] == cap
    r = api.post("/api/sessions/fake/input", content=chunks(huge),  # no Content-Length
                 headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["limit"] == cap
    assert stored(aw) == 0


def test_rate_limit_is_429_with_retry_after(aw: AwEnv) -> None:
    register(aw, "fake")
    api = in_process(aw, QueueLimits(rate_per_minute=2))
    try:
        for i in range(2):
            assert api.post("/api/sessions/fake/input", json=body(f"m{i}")).status_code == 201
        r = api.post("/api/sessions/fake/input", json=body("m2"))
        assert r.status_code == 429, r.text
        got = r.json()
        assert got["error"] == "Rate limit exceeded"
        assert (got["limit"], got["window"]) == (2, "60s")
        assert 1 <= got["retryAfter"] <= 60 and r.headers["retry-after"] == str(got["retryAfter"])
        # another source has its own window
        assert api.post("/api/sessions/fake/input",
                        json=body("m3", source="monitoring")).status_code == 201
    finally:
        api.app.state.pool.close()


def test_a_full_queue_evicts_the_oldest_and_says_so(aw: AwEnv) -> None:
    register(aw, "fake")
    api = in_process(aw, QueueLimits(max_pending_per_session=2, rate_per_minute=100))
    try:
        ids = [api.post("/api/sessions/fake/input", json=body(f"m{i}")).json()["id"]
               for i in range(2)]
        r = api.post("/api/sessions/fake/input", json=body("m2", source="agent"))
        assert r.status_code == 201
        assert r.json()["evicted"] == [{"id": ids[0], "source": "webhook"}]
        assert api.get(f"/api/messages/{ids[0]}").json()["status"] == "evicted"
    finally:
        api.app.state.pool.close()


def test_ended_session_is_409(aw: AwEnv, api: InProcess) -> None:
    reg = aw.registry()
    reg.mark_ended("fake", 0)
    reg.close()
    r = api.post("/api/sessions/fake/input", json=body())
    assert r.status_code == 409 and r.json()["error"] == "Session not running"


def test_a_shell_takes_commands_only_from_trusted_sources(aw: AwEnv, api: InProcess) -> None:
    register(aw, "sh", profile="shell")
    r = api.post("/api/sessions/sh/input", json=body("rm -rf ~"))
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "Source not trusted" and "raw_sources" in r.json()["hint"]
    assert stored(aw) == 0
    r = api.post("/api/sessions/sh/input", json=body("make test", source="user"))
    assert r.status_code == 201  # the user config's default trusts "user"
    assert api.get(f"/api/messages/{r.json()['id']}").json()["kind"] == "command"


def test_wait_returns_the_state_at_the_deadline(aw: AwEnv, api: InProcess) -> None:
    r = api.post("/api/sessions/fake/input?wait=0.2", json=body())
    assert r.status_code == 201 and r.json()["final"] is False
    assert r.json()["status"] == "pending"  # no supervisor: it waits for adopt
    assert api.post("/api/sessions/fake/input?wait=-1", json=body("b")).status_code == 400


def _submitted_then_ended(aw: AwEnv, token: str) -> None:
    """What the supervisor records for the session's next message: claimed,
    typed and submitted (its ACK awaited if asked), then the session ended."""
    from agentwrap.config import load_config
    from agentwrap.delivery.engine import DeliveryEngine
    from agentwrap.detect.profiles import load_profile
    from agentwrap.message import Phase

    store, reg = aw.store(), aw.registry()
    engine = DeliveryEngine.for_session(aw.paths, load_config(aw.paths),
                                        load_profile("standin", aw.paths), reg.get("fake"))
    try:
        assert store.claim_batch("fake", token, 10_000)
        store.set_phase(token, Phase.SUBMITTED)
        engine.abandon("session ended (agent exit code 137)")
    finally:
        engine.close()
        reg.close()
        store.close()


def test_a_delivery_whose_ack_never_came_says_so(aw: AwEnv, api: InProcess) -> None:
    """Issue 25.4: a message submitted, its ACK awaited, then the session ended:
    still status ``delivered`` (compatible), but ``acknowledged: false`` and
    ``outcome: unacknowledged``, in the end state ``?wait`` returns and in GET."""
    sent = body("deploy freeze", ack=True, idempotencyKey="k1")
    r = api.post("/api/sessions/fake/input", json=sent)
    mid = r.json()["id"]
    assert (r.json()["acknowledged"], r.json()["outcome"]) == (None, "pending")
    _submitted_then_ended(aw, "b1")
    got = api.get(f"/api/messages/{mid}").json()
    assert (got["status"], got["acknowledged"], got["outcome"]) == (
        "delivered", False, "unacknowledged")
    assert got["attemptLog"][-1]["outcome"] == "unacknowledged"
    again = api.post("/api/sessions/fake/input?wait=5", json=sent).json()
    assert (again["id"], again["status"], again["final"]) == (mid, "delivered", True)
    assert (again["acknowledged"], again["outcome"]) == (False, "unacknowledged")
    # one that asked no ACK is delivered plainly: neither acknowledged nor not
    plain = api.post("/api/sessions/fake/input", json=body("no ack", ack=False)).json()["id"]
    _submitted_then_ended(aw, "b2")
    got = api.get(f"/api/messages/{plain}").json()
    assert (got["status"], got["acknowledged"], got["outcome"]) == ("delivered", None, "delivered")
    assert got["attemptLog"] == []


# --- reading --------------------------------------------------------------------------------


def test_peek_filters_and_never_consumes(aw: AwEnv) -> None:
    register(aw, "fake")
    api = in_process(aw, QueueLimits(rate_per_minute=100))
    try:
        for i, (src, prio) in enumerate([("webhook", "low"), ("agent", "high"),
                                         ("webhook", "critical"), ("webhook", "normal")]):
            api.post("/api/sessions/fake/input", json=body(f"m{i}", source=src, priority=prio))
        r = api.get("/api/sessions/fake/input")
        got = r.json()
        assert got["total"] == 4
        assert [e["priority"] for e in got["inputs"]] == ["critical", "high", "normal", "low"]
        assert all(e["waitingBecause"] and e["ttlLeftS"] > 0 for e in got["inputs"])
        r = api.get("/api/sessions/fake/input", params={"source": "webhook", "limit": 2})
        assert r.json()["total"] == 3 and [e["content"] for e in r.json()["inputs"]] == ["m2", "m3"]
        r = api.get("/api/sessions/fake/input", params={"priority": "high"})
        assert [e["content"] for e in r.json()["inputs"]] == ["m1"]
        assert api.get("/api/sessions/fake/input", params={"priority": "x"}).status_code == 400
        assert api.get("/api/sessions/fake/input").json()["total"] == 4  # still there
    finally:
        api.app.state.pool.close()


def test_sessions_session_metrics_and_debug(aw: AwEnv, api: InProcess) -> None:
    api.post("/api/sessions/fake/input", json=body("a", priority="high"))
    api.post("/api/sessions/fake/input", json=body("b", source="agent"))
    sessions = api.get("/api/sessions").json()["sessions"]
    assert [(s["name"], s["pending"], s["liveness"]) for s in sessions] == [("fake", 2, "stale")]
    one = api.get("/api/sessions/fake").json()
    assert one["state"] == "starting" and one["explanation"]["state"] == "starting"
    assert set(one["explanation"]) >= {"reason", "signal", "rule", "evidence", "since"}
    assert one["queueDepth"] == 2 and one["pendingByPriority"] == {"high": 1, "normal": 1}
    assert one["metrics"]["total"] == 2
    assert api.get("/api/metrics").json()["byStatus"]["pending"] == 2
    (queue,) = api.get("/api/debug/input-queue").json()["queues"]
    assert queue["session"] == "fake" and len(queue["entries"]) == 2
    assert all(e["ageS"] >= 0 and 0 < e["ttlLeftS"] <= 300 for e in queue["entries"])


def test_message_get_cancel_and_409_once_not_pending(aw: AwEnv, api: InProcess) -> None:
    mid = api.post("/api/sessions/fake/input", json=body()).json()["id"]
    assert api.get(f"/api/messages/{mid[:8]}").json()["id"] == mid
    r = api.get("/api/messages/ffffffff")
    assert r.status_code == 404 and r.json() == {**r.json(), "error": "Message not found",
                                                  "messageId": "ffffffff"}
    r = api.delete(f"/api/messages/{mid}")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    r = api.delete(f"/api/messages/{mid}")
    assert r.status_code == 409 and r.json()["error"] == "Message not pending"
    assert api.delete("/api/messages/ffffffff").status_code == 404


def test_cors_is_closed_and_unknown_routes_are_json(api: InProcess) -> None:
    r = api.request("OPTIONS", "/api/sessions", auth=False, headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in r.headers
    r = api.get("/api/sessions", headers={"Origin": "http://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    r = api.get("/api/nothing-here")
    assert r.status_code in (401, 404) and "error" in r.json()


def test_access_log_has_no_content_token_or_metadata(
    aw: AwEnv, api: InProcess, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="agentwrap.http"):
        api.post("/api/sessions/fake/input?wait=0", json=body(
            "SECRET-CONTENT", metadata={"k": "SECRET-META"}))
        api.get("/api/sessions/fake/input", params={"source": "SECRET-QUERY"})
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("agentwrap.http")]
    assert "POST /api/sessions/fake/input 201" in lines
    text = "\n".join(lines)
    for secret in ("SECRET", TOKEN):
        assert secret not in text


# --- events and the OpenAPI document --------------------------------------------------------


def test_store_event_kinds_map_to_the_api_names() -> None:
    def names(kind: str, **data: object) -> list[tuple[str, str]]:
        return [(p.id, p.type) for p in public_events(Event(7, 1.0, "s", kind, "m1", data))]

    assert names("message.queued", priority="high") == [("7", "session.input.queued")]
    for status in ("delivered", "acknowledged", "escalated", "expired", "evicted", "cancelled",
                   "failed"):
        assert names("message.ended", status=status) == [("7", f"message.{status}")]
    assert names("session.state", state="busy") == [("7", "session.state")]
    assert names("session.state", state="waiting_input") == [
        ("7.0", "session.state"), ("7", "session.waiting_input")]
    assert names("session.ended", exit_code=3) == [("7", "session.exited")]
    asked = {"id": "q1", "kind": "permission"}
    state, waiting = public_events(Event(7, 1.0, "s", "session.state", "",
                                         {"state": "waiting_input", "question": asked}))
    assert state.data["question"] == asked and waiting.data["question"] == asked
    (took,) = public_events(Event(7, 1.0, "s", "session.consumed", "",
                                  {"count": 2, "sources": ["webhook"], "channel": "mcp",
                                   "ids": ["a", "b"]}))
    assert took.type == "session.input.consumed"
    assert took.data == {"count": 2, "sources": ["webhook"], "channel": "mcp"}
    (ended,) = public_events(Event(7, 1.0, "s", "session.ended", "", {"exit_code": 3}))
    assert ended.data == {"exitCode": 3} and ended.messageId is None
    assert parse_last_event_id("7") == Cursor(7)
    assert parse_last_event_id("7.0") == Cursor(6, 0)
    assert parse_last_event_id("x") is None and parse_last_event_id(None) is None


def test_openapi_document_is_generated_and_committed(api: InProcess) -> None:
    served = api.get("/openapi.json", auth=False).json()
    assert set(served["paths"]) >= {
        "/api/sessions/{name}/input", "/api/sessions", "/api/sessions/{name}",
        "/api/messages/{message_id}", "/api/metrics", "/api/debug/input-queue", "/api/events",
        "/healthz"}
    from agentwrap.surfaces.http.openapi import document

    assert served == json.loads(document())
    committed = OPENAPI.read_text(encoding="utf-8") if OPENAPI.exists() else ""
    assert committed == document(), f"docs/openapi.json is stale; regenerate: {REGENERATE}"


def test_openapi_module_prints_the_document() -> None:
    done = subprocess.run([sys.executable, "-m", "agentwrap.surfaces.http.openapi"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=True)
    assert json.loads(done.stdout)["info"]["title"] == "agentwrap"


def test_a_source_id_not_in_the_users_sources_list_is_403(aw: AwEnv, api: InProcess) -> None:
    aw.paths.config_file.write_text('[sources]\nwebhook = ["github"]\n')
    r = api.post("/api/sessions/fake/input", json=body(sourceId="evil"))
    assert r.status_code == 403 and "may send only as github" in r.json()["detail"], r.text
    assert stored(aw) == 0
    assert api.post("/api/sessions/fake/input", json=body(sourceId="github")).status_code == 201


def test_the_event_stream_is_documented_as_sse_events_with_json_data(api: InProcess) -> None:
    """Found by the fuzzer: the document gave the StreamEvent as the schema of
    text/event-stream, which (before OpenAPI 3.2) describes each *event* as a
    client parses it, {id, event, data}; the StreamEvent is the JSON in data."""
    doc = api.get("/openapi.json", auth=False).json()
    ok = doc["paths"]["/api/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    schema = ok["schema"]
    data = schema["properties"]["data"]
    assert (data["type"], data["contentMediaType"]) == ("string", "application/json")
    (pub,) = public_events(Event(7, 1.0, "s", "message.queued", "m1", {"priority": "high"}))
    event = dict(line.split(": ", 1) for line in format_sse(pub).strip().split("\n"))
    assert set(schema["required"]) <= set(event) <= set(schema["properties"])
    payload = json.loads(event["data"])
    assert set(data["contentSchema"]["required"]) <= set(payload)
    assert set(payload) <= set(data["contentSchema"]["properties"])


def test_the_documented_input_bounds_are_the_stores(aw: AwEnv, api: InProcess) -> None:
    """The document states the store's fixed bounds (depth, TTL, id length, no
    'system', some text): a value at a bound is accepted, one past it refused."""
    doc = api.get("/openapi.json", auth=False).json()
    props = doc["components"]["schemas"]["InputRequest"]["properties"]
    assert props["source"]["not"] == {"const": "system"}
    assert props["content"]["minLength"] == 1
    depth = {k: int(props["depth"][k]) for k in ("minimum", "maximum")}  # FastAPI writes 16.0
    ttl = props["ttl"]
    ids = [props[k]["maxLength"] for k in ("sourceId", "correlationId", "idempotencyKey")]
    assert len(set(ids)) == 1
    for fields, status in [
        ({"depth": depth["maximum"]}, 201), ({"depth": depth["maximum"] + 1}, 400),
        ({"depth": depth["minimum"] - 1}, 400),
        ({"ttl": ttl["minimum"]}, 201), ({"ttl": ttl["minimum"] / 2}, 400),
        ({"correlationId": "c" * ids[0]}, 201), ({"correlationId": "c" * (ids[0] + 1)}, 400),
        ({"correlationId": ""}, 400), ({"sourceId": "a\x07b"}, 400),
    ]:
        r = api.post("/api/sessions/fake/input", json=body(**fields))
        assert r.status_code == status, (fields, r.text)
