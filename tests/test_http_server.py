"""The real server: `agentwrap serve` as a subprocess on a free loopback port
(its own XDG dirs), a real httpx client, and a real stand-in agent that the
messages reach. Waits are deadlines for a hung test, never thresholds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from conftest import AwEnv
from support.delivery_kit import arrivals_of, pane_text, write_config
from support.http_kit import Served, body, register, serve, sse_events


@pytest.fixture
def server(aw: AwEnv) -> Iterator[Served]:
    write_config(aw)
    with aw.paths.config_file.open("a", encoding="utf-8") as f:
        f.write("\n[limits]\nrate_per_minute = 1000\nmax_pending_per_session = 500\n")
    yield from serve(aw)


def test_a_message_over_http_reaches_the_agent(aw: AwEnv, server: Served) -> None:
    aw.start_standin()
    aw.wait_state("sa", "ready")
    with server.client() as c:
        assert c.get("/healthz").json()["status"] == "ok"
        r = c.post("/api/sessions/sa/input", params={"wait": 60},
                   json=body("CI failed on main", priority="high"))
        assert r.status_code == 201, r.text
        assert (r.json()["status"], r.json()["final"]) == ("delivered", True)
        assert arrivals_of(aw, "CI failed on main") == 1
        assert c.get("/api/sessions/sa").json()["metrics"]["byStatus"]["delivered"] == 1
        assert c.get("/api/sessions", headers={"Authorization": "Bearer no"}).status_code == 401


def test_events_resume_with_last_event_id(aw: AwEnv, server: Served) -> None:
    register(aw, "fake")
    with server.client() as c:
        ids = []
        with c.stream("GET", "/api/events", params={"session": "fake"}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = r.iter_lines()
            assert next(lines).startswith("retry:")  # subscribed: nothing from now on is missed
            for i in range(3):
                ids.append(c.post("/api/sessions/fake/input", json=body(f"m{i}")).json()["id"])
            first = sse_events(lines, 2)
        # disconnected: more happens meanwhile
        ids.append(c.post("/api/sessions/fake/input", json=body("m3")).json()["id"])
        assert c.delete(f"/api/messages/{ids[0]}").status_code == 200
        with c.stream("GET", "/api/events", params={"session": "fake"},
                      headers={"Last-Event-ID": first[-1]["id"]}) as r:
            rest = sse_events(r.iter_lines(), 3)
    got = first + rest
    assert [e["event"] for e in got] == ["session.input.queued"] * 4 + ["message.cancelled"]
    assert [e["data"]["messageId"] for e in got] == [*ids, ids[0]]
    seen = [int(e["id"]) for e in got]
    assert seen == sorted(set(seen)), "an event was repeated or out of order"
    assert all(e["id"] == e["data"]["id"] and e["data"]["session"] == "fake" for e in got)


def test_200_concurrent_posts_are_each_delivered_once(aw: AwEnv, server: Served) -> None:
    # a tall pane: a block of dozens of messages must fit in the stand-in's input box
    # (a block taller than the pane pushes the box's rules off screen: state unknown)
    aw.start_standin("sa", "--busy", "0.05", run_args=("--rows", "120"))
    aw.wait_state("sa", "ready")
    accepted: list[str] = []
    refused: list[str] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        with server.client(limits=httpx.Limits(max_connections=1)) as c:
            for i in range(25):
                content = f"burst {k:02d}-{i:02d}"
                r = c.post("/api/sessions/sa/input", json=body(content, sourceId=f"c{k}"))
                with lock:
                    (accepted if r.status_code == 201 else refused).append(
                        content if r.status_code == 201 else f"{r.status_code} {r.text}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not refused and len(accepted) == 200

    with server.client() as c:
        def settled() -> bool:
            queues = c.get("/api/debug/input-queue").json()["queues"]
            return all(not q["entries"] for q in queues)

        aw.wait_for(settled, 240, "every message out of the queue")
        by_status = c.get("/api/metrics").json()["byStatus"]
    assert by_status["delivered"] == 200, ({k: v for k, v in by_status.items() if v}, _why(aw), pane_text(aw))
    for content in accepted:
        assert arrivals_of(aw, content) == 1, content


def _why(aw: AwEnv) -> list[str]:
    store = aw.store()
    try:
        out = []
        for m in store.history("sa", limit=500):
            if m.status.value != "delivered":
                out.append(f"{m.status.value}: {m.detail} / "
                           + "; ".join(f"{a.outcome} {a.evidence[:200]}" for a in store.attempts(m.id)))
        return out[:3]
    finally:
        store.close()


def test_connections_have_nagle_off() -> None:
    """The listener says IPPROTO_TCP, so asyncio sets TCP_NODELAY on each
    connection: with Nagle on, an answer on a kept-alive connection waited for
    the client's delayed ACK (~40 ms) between its head and its body."""
    import asyncio
    import socket

    from agentwrap.surfaces.http.server import bind

    async def check() -> int:
        sock, url = bind("127.0.0.1", 0, None)
        accepted: asyncio.Queue[asyncio.BaseTransport] = asyncio.Queue()

        class Keep(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                accepted.put_nowait(transport)

        server = await asyncio.get_running_loop().create_server(Keep, sock=sock)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
            transport = await asyncio.wait_for(accepted.get(), 30)
            conn = transport.get_extra_info("socket")
            nodelay = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            writer.close()
            transport.close()
            return int(nodelay)
        finally:
            server.close()

    assert asyncio.run(check()) != 0
