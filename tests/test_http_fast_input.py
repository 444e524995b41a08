"""The enqueue endpoint's hot path (agentwrap/surfaces/http/fast_input.py)
answers exactly as the FastAPI route does. The route is reached with a query
string (``?wait=0`` means no wait), which the hot path always hands on; every
case is sent both ways and the answers compared: status, headers that matter,
and the JSON body (message ids aside)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from conftest import AwEnv
from support.http_kit import InProcess, body, in_process, register

from agentwrap.message import QueueLimits
from agentwrap.surfaces.http.auth import require_token

ROUTE = "?wait=0"


def _shape(r: httpx.Response) -> tuple[int, str | None, str | None, Any]:
    got = r.json()
    if isinstance(got, dict):
        got = {k: ("<id>" if k == "id" else v) for k, v in got.items()}
        if isinstance(got.get("evicted"), list):
            got["evicted"] = [{**e, "id": "<id>"} for e in got["evicted"]]
    return (r.status_code, r.headers.get("content-type"), r.headers.get("retry-after"), got)


def _both(api: InProcess, path: str, **kw: Any) -> tuple[Any, Any]:
    return _shape(api.post(path, **kw)), _shape(api.post(path + ROUTE, **kw))


@pytest.fixture
def api(aw: AwEnv) -> InProcess:
    register(aw, "fake")
    client = in_process(aw, QueueLimits(rate_per_minute=1000, max_pending_per_session=500))
    yield client
    client.app.state.pool.close()


def test_the_hot_path_answers_without_the_routes_machinery(aw: AwEnv, api: InProcess) -> None:
    """The point of it: a valid, authorised request never runs the route's
    dependencies (the token check, a FastAPI dependency, is one)."""
    ran: list[str] = []

    async def counted() -> None:
        ran.append("route")

    api.app.dependency_overrides[require_token] = counted
    assert api.post("/api/sessions/fake/input", json=body("fast")).status_code == 201
    assert ran == []
    assert api.post("/api/sessions/fake/input" + ROUTE, json=body("slow")).status_code == 201
    assert ran == ["route"]


@pytest.mark.parametrize("case", [
    "stored", "every field", "repeat of a key", "key reused", "unknown session",
    "bad priority", "unknown field", "not json", "deep json", "not an object", "over the limit",
    "no token", "wrong token", "not bearer", "empty content", "text/plain", "json; charset",
    "host form", "host form, other host", "encoded address", "encoded, other host",
])
def test_the_hot_path_and_the_route_answer_alike(aw: AwEnv, api: InProcess, case: str) -> None:
    path = "/api/sessions/fake/input"
    kw: dict[str, Any] = {"json": body(f"case {case}")}
    if case == "every field":
        kw["json"] = body("all", priority="high", ttl=60, metadata={"pr": 42},
                          correlationId="c1", depth=1, ack=True)
    elif case == "repeat of a key":
        api.post(path, json=body("same", idempotencyKey="k-repeat"))
        kw["json"] = body("same", idempotencyKey="k-repeat")
    elif case == "key reused":
        api.post(path, json=body("first", idempotencyKey="k-reused"))
        kw["json"] = body("other", idempotencyKey="k-reused")
    elif case == "unknown session":
        path = "/api/sessions/nobody/input"
    elif case == "bad priority":
        kw["json"] = body(priority="urgent!")
    elif case == "unknown field":
        kw["json"] = body(colour="red")
    elif case == "not json":
        kw = {"content": b"{not json", "headers": {"content-type": "application/json"}}
    elif case == "deep json":
        kw = {"content": b"[" * 5000, "headers": {"content-type": "application/json"}}
    elif case == "not an object":
        kw = {"json": ["a", "list"]}
    elif case == "over the limit":
        kw["json"] = body("x" * 20_000)
    elif case == "no token":
        kw["auth"] = False
    elif case == "wrong token":
        kw["headers"] = {"Authorization": "Bearer wrong"}
    elif case == "not bearer":
        kw["headers"] = {"Authorization": f"Basic {api.token}"}
    elif case == "text/plain":
        kw = {"content": b'{"source": "webhook", "content": "hi"}',
              "headers": {"content-type": "text/plain"}}
    elif case == "json; charset":
        kw = {"content": b'{"source": "webhook", "content": "hi"}',
              "headers": {"content-type": "Application/JSON; charset=utf-8"}}
    elif case == "empty content":
        kw["json"] = body(" \n")
    elif case.startswith(("host form", "encoded")):  # HOST/NAME (addresses.py)
        reg = aw.registry()
        host = "elsewhere" if "other host" in case else reg.get("fake").host
        reg.close()
        path = (f"/api/hosts/{host}/sessions/fake/input" if case.startswith("host")
                else f"/api/sessions/{host}%2Ffake/input")
    fast, route = _both(api, path, **kw)
    assert fast == route


def test_refusals_from_the_store_answer_alike(aw: AwEnv) -> None:
    """The rate limit (429 and its Retry-After) and an ended session (409)."""
    register(aw, "fake")
    api = in_process(aw, QueueLimits(rate_per_minute=1))
    try:
        assert api.post("/api/sessions/fake/input", json=body("one")).status_code == 201
        fast, route = _both(api, "/api/sessions/fake/input", json=body("two"))
        assert fast == route and fast[0] == 429 and fast[2] is not None
        reg = aw.registry()
        reg.mark_ended("fake", 0)
        reg.close()
        fast, route = _both(api, "/api/sessions/fake/input", json=body("three"))
        assert fast == route and fast[0] == 409
    finally:
        api.app.state.pool.close()
