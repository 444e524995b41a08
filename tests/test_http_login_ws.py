"""The dashboard's way in (one-time login links, dashboard tokens), the message
list it shows, and the WebSocket event stream: in-process where the app alone
decides, against the real server where the socket matters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import AwEnv
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from support.http_kit import TOKEN, InProcess, Served, body, in_process, register, serve
from websockets.sync.client import connect

from agentwrap.surfaces.http.auth import (
    LoginCodes,
    dashboard_token,
    login_code,
    login_url,
    token_accepted,
)


@pytest.fixture
def api(aw: AwEnv) -> Iterator[InProcess]:
    register(aw, "fake")
    client = in_process(aw)
    yield client
    client.app.state.pool.close()


# --- login links ----------------------------------------------------------------------------


def test_a_login_code_is_good_once_and_gives_a_working_token(api: InProcess) -> None:
    code = login_code(TOKEN)
    r = api.post("/api/login", json={"code": code}, auth=False)
    assert r.status_code == 200, r.text
    dash = r.json()["token"]
    assert dash != TOKEN and dash.startswith("dash1.")
    assert api.get("/api/sessions", headers={"Authorization": f"Bearer {dash}"}).status_code == 200
    again = api.post("/api/login", json={"code": code}, auth=False)
    assert again.status_code == 401
    assert "agentwrap token --link" in again.json()["hint"]


@pytest.mark.parametrize("code", [
    "", "x", "1.2.3", login_code("another-servers-token"), login_code(TOKEN, now=0),
    login_code(TOKEN).replace(".", ".0", 1),
], ids=["empty", "one-part", "three-parts", "another-servers", "expired", "tampered"])
def test_bad_or_expired_codes_are_401(api: InProcess, code: str) -> None:
    r = api.post("/api/login", json={"code": code}, auth=False)
    assert r.status_code == 401, r.text


def test_login_body_is_validated(api: InProcess) -> None:
    assert api.post("/api/login", json={"code": 5}, auth=False).status_code == 400
    assert api.post("/api/login", json={"code": "a", "x": 1}, auth=False).status_code == 400
    assert api.post("/api/login", json={"code": "a" * 500}, auth=False).status_code == 400


def test_dashboard_tokens_are_bound_to_the_api_token() -> None:
    dash = dashboard_token(TOKEN)
    assert token_accepted(dash, TOKEN)
    assert not token_accepted(dash, TOKEN + "renewed")
    assert not token_accepted(dash[:-1] + ("0" if dash[-1] != "0" else "1"), TOKEN)
    assert not token_accepted("dash1..", TOKEN) and not token_accepted("dash1", TOKEN)
    assert not token_accepted("ünïcode", TOKEN)


def test_codes_are_remembered_only_until_they_expire() -> None:
    codes = LoginCodes(TOKEN)
    code = login_code(TOKEN, now=1000, ttl_s=10)
    assert codes.redeem(code, now=1005) is not None
    assert codes.redeem(code, now=1006) is None  # used
    assert codes.redeem(login_code(TOKEN, now=2000, ttl_s=10), now=2001) is not None
    assert len(codes._used) == 1  # the first, expired, was forgotten


def test_token_link_prints_a_fragment_link(aw: AwEnv) -> None:
    out = aw.cli("token", "--link", "--url", "http://127.0.0.1:9999/", check=True).stdout.strip()
    assert out.startswith("http://127.0.0.1:9999/#login=")
    token = aw.cli("token", check=True).stdout.strip()
    assert LoginCodes(token).redeem(out.split("#login=", 1)[1]) is not None
    assert login_url("http://h:1", token).startswith("http://h:1/#login=")


# --- the message list ----------------------------------------------------------------------


def test_messages_lists_history_newest_first_with_attempts(aw: AwEnv, api: InProcess) -> None:
    ids = [api.post("/api/sessions/fake/input", json=body(f"m{i}")).json()["id"] for i in range(3)]
    api.delete(f"/api/messages/{ids[1]}")
    r = api.get("/api/messages", params={"session": "fake", "limit": 2})
    assert r.status_code == 200, r.text
    got = r.json()
    assert [m["id"] for m in got["messages"]] == [ids[2], ids[1]]
    assert got["total"] == 2 and got["more"] is True
    assert got["messages"][1]["status"] == "cancelled"
    assert "attemptLog" in got["messages"][0]
    every = api.get("/api/messages").json()
    assert every["more"] is False and every["total"] == 3
    assert api.get("/api/messages", params={"session": "nope"}).status_code == 404
    assert api.get("/api/messages", params={"limit": 0}).status_code == 400
    assert api.get("/api/messages", auth=False).status_code == 401


# --- the WebSocket, in-process -----------------------------------------------------------


def _frames(ws: Any, n: int, kind: str = "session.input.queued") -> list[dict[str, Any]]:
    """The next ``n`` events of ``kind`` (registering a session records its state too)."""
    got: list[dict[str, Any]] = []
    while len(got) < n:
        event = json.loads(ws.receive_text())
        if event["type"] == kind:
            got.append(event)
    return got


def test_ws_streams_events_after_an_auth_frame_and_resumes(api: InProcess) -> None:
    with TestClient(api.app) as tc:
        with tc.websocket_connect("/api/ws?session=fake") as ws:
            ws.send_text(json.dumps({"type": "auth", "token": dashboard_token(TOKEN),
                                     "lastEventId": "0"}))
            ids = [tc.post("/api/sessions/fake/input", json=body(f"w{i}"),
                           headers={"Authorization": f"Bearer {TOKEN}"}).json()["id"]
                   for i in range(2)]
            got = _frames(ws, 2)
        assert [e["type"] for e in got] == ["session.input.queued"] * 2
        assert [e["messageId"] for e in got] == ids
        later = tc.post("/api/sessions/fake/input", json=body("w2"),
                        headers={"Authorization": f"Bearer {TOKEN}"}).json()["id"]
        with tc.websocket_connect(f"/api/ws?lastEventId={got[-1]['id']}",
                                  headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
            (missed,) = _frames(ws, 1)
        assert missed["messageId"] == later


@pytest.mark.parametrize("first", [
    {"type": "auth", "token": "wrong"}, {"type": "auth"}, {"type": "hello"}, "not json",
])
def test_ws_refuses_a_bad_first_frame(api: InProcess, first: Any) -> None:
    with TestClient(api.app) as tc, tc.websocket_connect("/api/ws") as ws:
        ws.send_text(first if isinstance(first, str) else json.dumps(first))
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    assert closed.value.code in (4400, 4401)


def test_ws_for_a_session_of_no_such_host_is_refused(api: InProcess) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (TestClient(api.app) as tc, pytest.raises(WebSocketDisconnect) as closed,
          tc.websocket_connect("/api/ws?session=nohost/fake", headers=headers) as ws):
        ws.receive_text()
    assert closed.value.code == 4404 and "no session 'fake' on host 'nohost'" in closed.value.reason


def test_ws_from_another_origin_is_refused(api: InProcess) -> None:
    headers = {"Origin": "http://127.0.0.1:9999", "Authorization": f"Bearer {TOKEN}"}
    with (TestClient(api.app, base_url="http://127.0.0.1:7878") as tc,
          pytest.raises(WebSocketDisconnect) as closed,
          tc.websocket_connect("/api/ws", headers=headers)):
        pass
    assert closed.value.code == 4401


# --- the real server --------------------------------------------------------------------------


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    yield from serve(aw)


def test_ws_on_the_real_server_sees_a_cli_send(aw: AwEnv, server: Served) -> None:
    register(aw, "fake")
    with server.client() as c:  # resume from here: nothing after it can be missed
        last = c.get("/healthz").json()["lastEventId"]
    ws_url = server.url.replace("http://", "ws://") + f"/api/ws?session=fake&lastEventId={last}"
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {server.token}"},
                 open_timeout=60) as ws:
        mid = aw.cli("send", "fake", "from the CLI", "--json", check=True).stdout
        event = json.loads(ws.recv(timeout=60))
    assert event["type"] == "session.input.queued"
    assert event["messageId"] == json.loads(mid)["id"]
