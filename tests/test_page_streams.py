"""The page's two sockets (issue 42): its events over ``/api/ws`` (the
``stream.ready`` frame a page asks for, then resuming as SSE's
Last-Event-ID does) and its live terminal paced by what it has drawn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import AwEnv
from starlette.testclient import TestClient
from support.http_kit import TOKEN, InProcess, Served, body, in_process, register, serve

from agentwrap.surfaces.http.auth import dashboard_token
from agentwrap.surfaces.http.terminal_ws import AHEAD

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def api(aw: AwEnv) -> Iterator[InProcess]:
    register(aw, "fake")
    client = in_process(aw)
    yield client
    client.app.state.pool.close()


def next_of(ws: Any, kind: str) -> dict[str, Any]:
    while True:
        frame: dict[str, Any] = json.loads(ws.receive_text())
        if frame["type"] == kind:
            return frame


def test_a_page_is_told_when_its_stream_is_subscribed_and_resumes_from_there(
    api: InProcess,
) -> None:
    with TestClient(api.app) as tc:
        with tc.websocket_connect("/api/ws") as ws:
            ws.send_text(json.dumps({"type": "auth", "token": dashboard_token(TOKEN),
                                     "ready": True}))
            ready = json.loads(ws.receive_text())  # before any event: the first frame
            assert ready["type"] == "stream.ready"
            assert ready["lastEventId"] == str(tc.get("/healthz").json()["lastEventId"])
            # what is sent after the ready frame is on this stream: nothing missed
            mid = tc.post("/api/sessions/fake/input", json=body("after ready"),
                          headers=AUTH).json()["id"]
            assert next_of(ws, "session.input.queued")["messageId"] == mid
        later = tc.post("/api/sessions/fake/input", json=body("while away"),
                        headers=AUTH).json()["id"]
        # a page with no event yet resumes where the ready frame said: the one it missed comes
        with tc.websocket_connect("/api/ws") as ws:
            ws.send_text(json.dumps({"type": "auth", "token": dashboard_token(TOKEN),
                                     "ready": True, "lastEventId": ready["lastEventId"]}))
            again = json.loads(ws.receive_text())
            assert again == {"type": "stream.ready", "lastEventId": ready["lastEventId"]}
            got = [next_of(ws, "session.input.queued")["messageId"] for _ in range(2)]
        assert got == [mid, later]


def test_a_client_that_does_not_ask_gets_events_only(api: InProcess) -> None:
    """Scripts and bots read every frame as an event: no ready frame unasked."""
    with TestClient(api.app) as tc, tc.websocket_connect("/api/ws?session=fake",
                                                         headers=AUTH) as ws:
        mid = tc.post("/api/sessions/fake/input", json=body("x"), headers=AUTH).json()["id"]
        seen = []
        while not seen or seen[-1]["type"] != "session.input.queued":
            seen.append(json.loads(ws.receive_text()))
    assert seen[-1]["messageId"] == mid
    assert all(e["type"] != "stream.ready" and "id" in e for e in seen), seen


def test_a_commit_right_after_the_accept_is_on_a_stream_that_asked_nothing(
    api: InProcess, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that names no event and asks no ready frame gets every event
    from its socket's accept on: a send committed between the accept and the
    stream's start (the server busy: seen at load 25, the client's own send
    missed and the client waiting forever) is on the stream."""
    from starlette.concurrency import run_in_threadpool

    from agentwrap.message import NewMessage, Source
    from agentwrap.service import Service
    from agentwrap.surfaces.http import ws as ws_module

    real = ws_module.authenticated
    sent: list[str] = []

    async def accept_then_a_send_lands(websocket: Any) -> dict[str, Any] | None:
        first = await real(websocket)
        new = NewMessage(session="fake", content="right after the accept", source=Source.USER)
        got = await run_in_threadpool(websocket.app.state.pool.call, Service.send, new)
        sent.append(got.message.id)
        return first

    monkeypatch.setattr(ws_module, "authenticated", accept_then_a_send_lands)
    with TestClient(api.app) as tc, tc.websocket_connect("/api/ws?session=fake",
                                                         headers=AUTH) as ws:
        mid = tc.post("/api/sessions/fake/input", json=body("then"), headers=AUTH).json()["id"]
        got = [next_of(ws, "session.input.queued")["messageId"] for _ in range(2)]
    assert got == [*sent, mid]


def test_an_event_stream_from_now_on_starts_before_its_response_does(api: InProcess) -> None:
    """``GET /api/events`` without Last-Event-ID: "now" is read before the
    response starts, so a send made once the client has the headers is on it."""
    with TestClient(api.app) as tc, tc.stream("GET", "/api/events?session=fake",
                                              headers=AUTH) as res:
        assert res.status_code == 200
        mid = tc.post("/api/sessions/fake/input", json=body("x"), headers=AUTH).json()["id"]
        for line in res.iter_lines():
            if line.startswith("data:") and '"session.input.queued"' in line:
                assert json.loads(line[5:])["messageId"] == mid
                break


# --- the terminal, paced -------------------------------------------------------------------


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    yield from serve(aw)


def frames_until(ws: Any, cond: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    while True:
        msg: dict[str, Any] = json.loads(ws.recv(timeout=60))
        if cond(msg):
            return msg
        assert msg["type"] in ("screen", "takeover"), (what, msg)


def test_a_pacing_page_gets_numbered_frames_and_no_ack_stops_the_stream(
    aw: AwEnv, server: Served
) -> None:
    """Frames carry seq 1, 2, ...; a page that acknowledges nothing still gets
    the screen's changes (a lost ack must not freeze it), and a ``drawn`` for
    a frame never sent is ignored."""
    from websockets.sync.client import connect

    aw.start_standin()
    aw.wait_state("sa", "ready")
    url = server.url.replace("http://", "ws://") + "/api/ws/terminal?session=sa"
    with connect(url) as ws:
        ws.send(json.dumps({"type": "auth", "token": server.token, "acks": True}))
        first = frames_until(ws, lambda m: m["type"] == "screen", "a screen")
        assert first["seq"] == 1
        ws.send(json.dumps({"type": "drawn", "seq": 99}))  # not sent yet: means nothing
        ws.send(json.dumps({"type": "takeover", "on": True}))
        frames_until(ws, lambda m: m["type"] == "takeover" and m["on"], "the keyboard")
        seqs = [1]
        for i in range(AHEAD + 2):  # more changes than frames it may have undrawn
            ws.send(json.dumps({"type": "keys", "data": f"line{i}\r"}))
            aw.wait_for(lambda n=i: f"line{n}" in "".join(aw.received()), 30, f"line{i} typed")
            seqs.append(frames_until(ws, lambda m: m["type"] == "screen", f"after line{i}")["seq"])
        assert seqs == list(range(1, AHEAD + 4))  # every screen frame read, in order
