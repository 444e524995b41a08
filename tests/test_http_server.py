"""The real server: `agentwrap serve` as a subprocess on a free loopback port
(its own XDG dirs), a real httpx client, and a real stand-in agent that the
messages reach. Waits are deadlines for a hung test, never thresholds.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from conftest import AwEnv
from support.delivery_kit import arrivals_of, pane_text, write_config
from support.http_kit import Served, body, register, serve, sse_events
from support.waiting import wait_for

from agentwrap.audit import AuditLog
from agentwrap.errors import (
    IdempotencyConflict,
    InvalidMessage,
    RateLimited,
    SessionNotFound,
)
from agentwrap.message import NewMessage, QueueLimits, Source
from agentwrap.service import Sent, Service
from agentwrap.surfaces.http import pool as pool_mod
from agentwrap.surfaces.http.pool import ServicePool
from agentwrap.surfaces.http.server import bind, uvicorn_config


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


# --- group commit (issue 26): every POSTed message through one writer -----------------------


def _new(content: str, session: str = "fake", **kw: Any) -> NewMessage:
    return NewMessage(session=session, content=content, source=Source.WEBHOOK, source_id="gh", **kw)


def test_send_many_checks_each_message_as_send_does(aw: AwEnv) -> None:
    """One transaction, each message judged on its own and in order: a refused
    one (unknown session, reused key, over the rate, invalid) changes nothing,
    the others are stored with their event and audit line."""
    register(aw, "fake")
    svc = Service.open(aw.paths, limits=QueueLimits(rate_per_minute=3))
    try:
        before = svc.last_event_id()
        got = svc.send_many([
            _new("a", idempotency_key="k1"),
            _new("x", session="nope"),
            _new("b", idempotency_key="k1"),  # the key of "a" with other content
            _new("a", idempotency_key="k1"),  # the same again: the first message
            _new("c"),
            _new("d"),
            _new("e"),  # the 4th of this minute
            _new(" "),
        ])
        kinds = [type(r) for r in got]
        assert kinds == [Sent, SessionNotFound, IdempotencyConflict, Sent, Sent, Sent,
                         RateLimited, InvalidMessage], got
        first, again = got[0], got[3]
        assert isinstance(first, Sent) and isinstance(again, Sent)
        assert (first.created, again.created, again.message.id) == (True, False, first.message.id)
        stored = sorted(h.message.content for h in svc.history("fake"))
        assert stored == ["a", "c", "d"]
        queued = svc.events(before, kinds=["message.queued"])
        assert sorted(e.subject for e in queued) == sorted(
            r.message.id for r in got if isinstance(r, Sent) and r.created)
        audit = [e for e in AuditLog(aw.paths.audit_log).read() if e["event"] == "queued"]
        assert len(audit) == 3
    finally:
        svc.close()


def test_the_writer_stores_what_arrived_meanwhile_together_and_answers_after_the_commit(
    aw: AwEnv,
) -> None:
    """While another process holds the store's write lock, posts pile up; once
    it is free they go in together (one batch: the same last event id before
    it), and each is answered only when its row is visible to another
    connection (committed)."""
    register(aw, "fake")
    pool = ServicePool(aw.paths, QueueLimits(rate_per_minute=1000))
    other = sqlite3.connect(aw.paths.db_path, isolation_level=None)

    def then(svc: Service, sent: Sent, before: int) -> tuple[int, int]:
        reader = sqlite3.connect(aw.paths.db_path)
        try:
            seen = reader.execute("SELECT COUNT(*) FROM messages WHERE id = ?",
                                  (sent.message.id,)).fetchone()[0]
        finally:
            reader.close()
        return before, seen

    async def main() -> list[tuple[int, int]]:
        other.execute("BEGIN IMMEDIATE")  # another process is writing
        tasks = [asyncio.create_task(pool.writer.send(_new(f"m{i}"), then)) for i in range(10)]
        await asyncio.sleep(0)  # every task has handed its message to the writer
        other.execute("ROLLBACK")
        return list(await asyncio.gather(*tasks))

    try:
        got = asyncio.run(main())
    finally:
        other.close()
        pool.close()
    assert [seen for _, seen in got] == [1] * 10, "answered before its row was committed"
    assert len({before for before, _ in got}) <= 2, got  # the first alone, the rest together


# --- bounds: slow clients and idle services ---------------------------------------------------


def _serve_in_thread(app: Any, header_timeout_s: float) -> tuple[uvicorn.Server, threading.Thread, int]:
    sock, url = bind("127.0.0.1", 0, None)
    server = uvicorn.Server(uvicorn_config(app, "warning", header_timeout_s=header_timeout_s))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, "the server to start")
    return server, thread, int(url.rsplit(":", 1)[1])


async def _plain(scope: Any, receive: Any, send: Any) -> None:
    """200 "ok"; ``/slow`` answers after a while (a long request is not cut)."""
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        await asyncio.sleep(1.5)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


def test_clients_slow_with_their_request_head_are_cut_off() -> None:
    """A connection that sends nothing, or a header line now and then, is
    closed once the head is late; a request whose head is in runs as long as
    it needs, and a kept-alive client goes on."""
    server, thread, port = _serve_in_thread(_plain, header_timeout_s=0.5)
    silent: list[socket.socket] = []
    trickling: list[socket.socket] = []
    try:
        for i in range(20):
            s = socket.create_connection(("127.0.0.1", port))
            if i % 2:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
                trickling.append(s)
            else:
                silent.append(s)
            s.setblocking(False)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
            slow.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            open_ = silent + trickling

            def all_cut() -> bool:
                for s in trickling:
                    try:
                        s.send(b"X-More: 1\r\n")
                    except OSError:
                        pass
                open_[:] = [s for s in open_ if not _closed_by_peer(s)]
                return not open_

            wait_for(all_cut, 60, "the slow clients to be cut off", interval=0.2)
            assert slow.recv(4096).startswith(b"HTTP/1.1 200"), "a running request was cut"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            assert [c.get("/").text for _ in range(3)] == ["ok"] * 3
    finally:
        for s in silent + trickling:
            s.close()
        server.should_exit = True
        thread.join(30)


def test_the_pool_keeps_few_idle_services(aw: AwEnv) -> None:
    """50 services lent at once (50 requests on worker threads) are not all
    kept once given back: at most MAX_IDLE stay open. Counted by their WAL
    descriptors (a closed connection's database descriptor is kept by SQLite
    for reuse while the process has others open; its WAL's is not)."""
    from contextlib import ExitStack

    pool = ServicePool(aw.paths, QueueLimits())
    try:
        with ExitStack() as stack:
            for _ in range(50):
                stack.enter_context(pool.lease()).last_event_id()
            assert _wal_fds() >= 50  # each lent one holds its own
        assert _wal_fds() <= pool_mod.MAX_IDLE * 2  # a store and a registry each
    finally:
        pool.close()
    assert _wal_fds() == 0


def _wal_fds() -> int:
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return sum(1 for target in fds if target.endswith(".db-wal"))


#: anyio's default: the server runs at most this many requests' reads at once.
WORKER_THREADS = 40


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_event_streams_leave_no_database_handles_behind(aw: AwEnv, server: Served) -> None:
    """200 event streams at once hold their connection and a wake-up socket
    each, not a service (database handles) each; once they end, the server
    keeps at most MAX_IDLE services open."""
    register(aw, "fake")
    pid = server.proc.pid
    with server.client() as c:
        assert c.get("/healthz").status_code == 200
        assert c.post("/api/sessions/fake/input", json=body("one")).status_code == 201
    wait_for(lambda: _fds(pid) > 0, 30, "the server's descriptors")
    base = _fds(pid)
    port = int(server.url.rsplit(":", 1)[1])
    head = (f"GET /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}"
            "\r\n\r\n").encode()
    streams = []
    try:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            s.sendall(head)
            got = b""
            while b"retry:" not in got:  # subscribed and read once
                chunk = s.recv(4096)
                assert chunk, got
                got += chunk
            streams.append(s)
        # Each stream: its connection and its wake-up socket. Services: lent for each
        # read only, so at most one per worker thread at once (and the writer's);
        # SQLite keeps a closed one's database descriptor for reuse.
        services = (WORKER_THREADS + 1) * 2 + pool_mod.MAX_IDLE * 4
        wait_for(lambda: _fds(pid) <= base + 2 * 200 + services, 60,
                 "the server's descriptors with 200 streams open",
                 on_timeout=lambda: f"{_fds(pid)} open, {base} before")
    finally:
        for s in streams:
            s.close()
    wait_for(lambda: _fds(pid) <= base + services, 60, "the streams' descriptors closed",
             on_timeout=lambda: f"{_fds(pid)} open, {base} before")
