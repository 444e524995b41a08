"""``agentwrap mcp``: the input queue as MCP tools, called by the SDK's own client.

Every test spawns the real server (``python -m agentwrap mcp``) with the
test's XDG environment through ``mcp.client.stdio`` and talks MCP to it;
messages come from the real CLI in other processes, and what the tools did is
checked in the store and with ``agentwrap history``. Sessions are records
without a process (``register``): their messages wait, so nothing but the
tools takes them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import pytest
from conftest import AwEnv
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent
from support import hosts_kit
from support.http_kit import register
from support.records import record

from agentwrap.errors import InvalidMessage
from agentwrap.message import NewMessage, Phase, Priority, Source, Status
from agentwrap.paths import Paths
from agentwrap.queue.sqlite import SQLiteMessageStore
from agentwrap.service import AGENT_SENDS, Service
from agentwrap.sessions.channels import config_json, server_env, server_spec
from agentwrap.sessions.registry import Registry

TOOLS = {"check_input_queue", "wait_for_input", "send_message", "acknowledge", "list_sessions"}


class Tools:
    """An initialised client session with one method: call a tool."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, **args: Any) -> CallToolResult:
        return await self.session.call_tool(name, args)

    async def ok(self, name: str, **args: Any) -> Any:
        """The structured result of a call that must succeed."""
        res = await self.call(name, **args)
        assert not res.is_error, error_text(res)
        data = res.structured_content
        return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data

    async def error(self, name: str, **args: Any) -> str:
        """The message of a call that must fail as a tool error."""
        res = await self.call(name, **args)
        assert res.is_error, f"{name}({args}) succeeded: {res.structured_content}"
        return error_text(res)


def error_text(res: CallToolResult) -> str:
    return " ".join(c.text for c in res.content if isinstance(c, TextContent))


@asynccontextmanager
async def server(
    aw: AwEnv, session: str | None = "me", *, params: StdioServerParameters | None = None,
) -> AsyncIterator[Tools]:
    env = dict(aw.env)
    env.pop("AGENTWRAP_SESSION", None)
    if session is not None:
        env["AGENTWRAP_SESSION"] = session
    params = params or StdioServerParameters(
        command=sys.executable, args=["-m", "agentwrap", "mcp"], env=env, cwd=str(aw.project))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield Tools(s)


def run(aw: AwEnv, body: Callable[[Tools], Awaitable[None]], session: str | None = "me") -> None:
    async def main() -> None:
        async with server(aw, session) as tools:
            await body(tools)

    anyio.run(main)


def send(aw: AwEnv, session: str, content: str, *args: str) -> str:
    """Queue a message with the real CLI; its id."""
    proc = aw.cli("send", session, content, "--json", *args, check=True)
    return str(json.loads(proc.stdout)["id"])


@pytest.fixture
def sessions(aw: AwEnv) -> AwEnv:
    for name in ("me", "other", "third"):
        register(aw, name)
    return aw


def history(aw: AwEnv, session: str) -> dict[str, dict[str, Any]]:
    rows = json.loads(aw.cli("history", session, "--json", check=True).stdout)
    return {r["id"]: r for r in rows}


# --- the tools ------------------------------------------------------------------------------


def test_tools_are_listed_with_their_schemas(sessions: AwEnv) -> None:
    async def body(t: Tools) -> None:
        listed = {tool.name: tool for tool in (await t.session.list_tools()).tools}
        assert set(listed) == TOOLS
        for tool in listed.values():
            assert tool.description and len(tool.description) > 80  # they teach when to call
        limit = listed["check_input_queue"].input_schema["properties"]["limit"]
        assert (limit["default"], limit["maximum"]) == (10, 50)
        timeout = listed["wait_for_input"].input_schema["properties"]["timeout"]
        assert (timeout["default"], timeout["maximum"]) == (30, 180)
        assert set(listed["send_message"].input_schema["required"]) == {"target", "content"}

    run(sessions, body)


def test_check_input_queue_takes_in_priority_order_once(sessions: AwEnv) -> None:
    aw = sessions
    low = send(aw, "me", "low one", "--priority", "low")
    normal = send(aw, "me", "CI failed on main", "--source", "webhook", "--source-id", "github",
                  "--metadata", '{"run": 42}', "--correlation-id", "ci-42")
    high = send(aw, "me", "urgent", "--priority", "high", "--source", "monitoring")
    send(aw, "other", "not mine")

    async def body(t: Tools) -> None:
        got = await t.ok("check_input_queue")
        assert [m["id"] for m in got] == [high, normal, low]
        ci = got[1]
        assert ci["formatted"] == "[webhook:github] CI failed on main"
        assert ci["metadata"] == {"run": 42} and ci["correlationId"] == "ci-42"
        assert (ci["priority"], ci["source"], ci["sourceId"]) == ("normal", "webhook", "github")
        assert ci["timestamp"] <= time.time() < ci["expires"]
        assert got[0]["formatted"] == "[monitoring] urgent"
        assert await t.ok("check_input_queue") == []  # taken once

    run(aw, body)
    rows = history(aw, "me")
    for mid in (low, normal, high):
        assert rows[mid]["status"] == "delivered"
        assert [a["channel"] for a in rows[mid]["attempt_log"]] == ["mcp"]
    assert "mcp" in aw.cli("history", "me").stdout  # the table's channel column
    assert history(aw, "other")  # another session's message stays queued
    assert Status.PENDING.value in {r["status"] for r in history(aw, "other").values()}
    store = aw.store()
    try:  # through Service.consume: the event of a reader that took messages itself
        consumed = store.events(0, session="me", kinds=["session.consumed"])
    finally:
        store.close()
    assert [(e.data["count"], e.data["channel"]) for e in consumed] == [(3, "mcp")]


def test_peek_limit_and_source(sessions: AwEnv) -> None:
    aw = sessions
    ids = [send(aw, "me", f"user {i}") for i in range(3)]
    hook = send(aw, "me", "from github", "--source", "webhook", "--source-id", "github")

    async def body(t: Tools) -> None:
        for _ in range(2):  # peeking takes nothing
            assert [m["id"] for m in await t.ok("check_input_queue", peek=True)] == [*ids, hook]
        only = await t.ok("check_input_queue", peek=True, source="webhook")
        assert [m["id"] for m in only] == [hook]
        assert [m["id"] for m in await t.ok("check_input_queue", limit=2)] == ids[:2]
        assert [m["id"] for m in await t.ok("check_input_queue", source="webhook")] == [hook]
        assert [m["id"] for m in await t.ok("check_input_queue", peek=True)] == ids[2:]

    run(aw, body)


def test_expired_messages_are_never_returned(sessions: AwEnv) -> None:
    aw = sessions
    send(aw, "me", "soon stale", "--ttl", "0.2")
    time.sleep(0.4)

    async def body(t: Tools) -> None:
        assert await t.ok("check_input_queue", peek=True) == []
        assert await t.ok("check_input_queue") == []
        assert await t.ok("wait_for_input", timeout=0) == []

    run(aw, body)
    assert [r["status"] for r in history(aw, "me").values()] == ["expired"]


def test_wait_for_input_wakes_on_a_send_from_another_process(sessions: AwEnv) -> None:
    aw = sessions
    timeout = 60.0
    got: list[Any] = []
    elapsed: list[float] = []

    async def body(t: Tools) -> None:
        async def wait() -> None:
            start = time.monotonic()
            got.extend(await t.ok("wait_for_input", timeout=timeout))
            elapsed.append(time.monotonic() - start)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.sleep(0.5)  # the wait is under way
            await anyio.to_thread.run_sync(
                lambda: send(aw, "me", "build green", "--source", "scheduler"))

    run(aw, body)
    assert [m["formatted"] for m in got] == ["[scheduler] build green"]
    assert elapsed[0] < timeout / 4  # returned well before its timeout: woken, not timed out
    assert [r["status"] for r in history(aw, "me").values()] == ["delivered"]


def test_wait_for_input_filter_and_what_is_queued_already(sessions: AwEnv) -> None:
    aw = sessions
    queued = send(aw, "me", "already here", "--source", "webhook", "--source-id", "ci")

    async def body(t: Tools) -> None:
        start = time.monotonic()
        assert [m["id"] for m in await t.ok("wait_for_input", timeout=60)] == [queued]
        assert time.monotonic() - start < 15  # at once: it was queued

        got: list[Any] = []

        async def wait() -> None:
            got.extend(await t.ok("wait_for_input", timeout=60, filter="DEPLOY"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.sleep(0.3)
            other = await anyio.to_thread.run_sync(lambda: send(aw, "me", "lint passed"))
            await anyio.sleep(0.5)
            assert not got  # not a match: still waiting
            await anyio.to_thread.run_sync(lambda: send(aw, "me", "deploy finished"))
        assert [m["formatted"] for m in got] == ["[user] deploy finished"]
        # the label counts too; what did not match stayed queued
        assert [m["id"] for m in await t.ok("check_input_queue", peek=True)] == [other]
        assert [m["id"] for m in await t.ok("wait_for_input", timeout=5, filter="user")] == [other]

    run(aw, body)


def test_wait_for_input_times_out_with_an_empty_list(sessions: AwEnv) -> None:
    aw = sessions
    send(aw, "me", "from a person")

    async def body(t: Tools) -> None:
        start = time.monotonic()
        assert await t.ok("wait_for_input", timeout=1, source="webhook") == []
        assert time.monotonic() - start >= 0.9
        assert len(await t.ok("check_input_queue", peek=True)) == 1  # not taken

    run(aw, body)


def test_send_message_is_from_the_agent_and_carries_its_flow(sessions: AwEnv) -> None:
    aw = sessions
    incoming = send(aw, "me", "please ask other", "--correlation-id", "flow-1", "--depth", "2")
    flows: list[str] = []

    async def body(t: Tools) -> None:
        fresh = await t.ok("send_message", target="third", content="hello", priority="high",
                           metadata={"k": "v"})
        assert (fresh["target"], fresh["depth"], fresh["status"]) == ("third", 1, "pending")
        assert fresh["correlationId"] not in (None, "flow-1")  # a new flow
        flows.append(fresh["correlationId"])
        await t.ok("check_input_queue")  # the agent got `incoming`
        sent = await t.ok("send_message", target="other", content="what does other think?")
        assert (sent["correlationId"], sent["depth"]) == ("flow-1", 3)
        assert await t.error("send_message", target="me", content="me?")  # not to itself

    run(aw, body)
    store = aw.store()
    try:
        [m] = store.history("other")
        assert (m.source, m.source_id, m.content) == (Source.AGENT, "me", "what does other think?")
        [f] = store.history("third")
        assert (f.priority, f.metadata, f.correlation_id) == (Priority.HIGH, {"k": "v"}, flows[0])
    finally:
        store.close()
    assert history(aw, "me")[incoming]["status"] == "delivered"


def test_send_message_refuses_deep_flows(sessions: AwEnv) -> None:
    aw = sessions
    send(aw, "me", "hop five", "--source", "agent", "--source-id", "other", "--depth", "5",
         "--correlation-id", "loop")

    async def body(t: Tools) -> None:
        await t.ok("check_input_queue")
        text = await t.error("send_message", target="other", content="and back")
        assert "hop 6" in text and "5 hops" in text and "hint:" in text

    run(aw, body)
    assert len(history(aw, "other")) == 0


def test_send_message_refuses_old_flows(sessions: AwEnv) -> None:
    aw = sessions
    then = time.time() - 400  # the flow's first message, 6 2/3 minutes ago
    old = SQLiteMessageStore(aw.paths.db_path, clock=lambda: then)
    try:
        old.enqueue(NewMessage(session="other", content="start", correlation_id="slow-loop"))
    finally:
        old.close()
    send(aw, "me", "still going", "--correlation-id", "slow-loop", "--depth", "1")

    async def body(t: Tools) -> None:
        await t.ok("check_input_queue")
        text = await t.error("send_message", target="other", content="again")
        assert "flow slow-loop began 4" in text and "300 s" in text

    run(aw, body)


def test_send_message_rate_per_caller(sessions: AwEnv) -> None:
    aw = sessions

    async def body(t: Tools) -> None:
        for i in range(AGENT_SENDS):  # 10 to each: within the store's limit per target
            await t.ok("send_message", target=("other", "third")[i % 2], content=f"n{i}")
        text = await t.error("send_message", target="other", content="one more")
        assert f"limit {AGENT_SENDS}" in text and "to other agents" in text

    run(aw, body)
    assert len(history(aw, "other")) + len(history(aw, "third")) == AGENT_SENDS


def test_acknowledge_once(sessions: AwEnv) -> None:
    aw = sessions
    mine = send(aw, "me", "please confirm", "--ack")
    waiting = send(aw, "me", "not taken yet", "--priority", "low")
    theirs = send(aw, "other", "someone else's")

    async def body(t: Tools) -> None:
        [got] = await t.ok("check_input_queue", limit=1)
        assert got["id"] == mine and got["ackRequested"] is True
        done = await t.ok("acknowledge", id=mine, status="done", note="fixed\nin abc123")
        assert done["status"] == "acknowledged"
        assert done["detail"] == "acknowledged (done) through mcp: fixed in abc123"
        assert "already acknowledged" in await t.error("acknowledge", id=mine, status="seen")
        assert "only a message delivered" in await t.error("acknowledge", id=waiting)
        assert "not sent to session 'me'" in await t.error("acknowledge", id=theirs)
        assert "no message" in await t.error("acknowledge", id="ffffffff-0000")

    run(aw, body)
    rows = history(aw, "me")
    assert rows[mine]["status"] == "acknowledged"
    assert rows[waiting]["status"] == "pending"
    store = aw.store()
    try:
        ended = [e.data["status"] for e in store.events(0, subject=mine, kinds=["message.ended"])]
    finally:
        store.close()
    assert ended == ["delivered", "acknowledged"]


def test_list_sessions(sessions: AwEnv) -> None:
    aw = sessions
    send(aw, "other", "waiting")

    async def body(t: Tools) -> None:
        listed = {s["name"]: s for s in await t.ok("list_sessions")}
        assert set(listed) == {"me", "other", "third"}
        assert [n for n, s in listed.items() if s["you"]] == ["me"]
        assert listed["other"]["pending"] == 1 and listed["other"]["profile"] == "standin"
        assert listed["me"]["running"] is False  # a record without a supervisor
        assert listed["other"]["host"] == host
        # HOST/NAME names a session too (several hosts share a store)
        sent = await t.ok("send_message", target=f"{host}/other", content="by address")
        assert sent["target"] == "other"
        assert "no session 'other' on host 'elsewhere'" in await t.error(
            "send_message", target="elsewhere/other", content="x")

    reg = aw.registry()
    host = reg.get("other").host
    reg.close()
    run(aw, body)


def test_bad_input_is_a_tool_error_and_the_server_lives_on(sessions: AwEnv) -> None:
    aw = sessions
    send(aw, "me", "still here")

    async def body(t: Tools) -> None:
        assert "less than or equal to 50" in await t.error("check_input_queue", limit=51)
        assert await t.error("check_input_queue", limit=0)
        assert "unknown source 'nope'" in await t.error("check_input_queue", source="nope")
        assert await t.error("wait_for_input", timeout=181)
        assert await t.error("send_message", target="other", content="x", priority="startup")
        assert "no session" in (await t.error("send_message", target="ghost", content="x")).lower()
        assert await t.error("send_message", target="other", content="x", metadata={"a": [[[[[[[[[]]]]]]]]]})
        assert "status" in await t.error("acknowledge", id="abcd-1234", status="maybe")
        assert await t.error("no_such_tool")
        assert len(await t.ok("check_input_queue", peek=True)) == 1  # nothing was taken

    run(aw, body)


@pytest.mark.parametrize("session", [None, "ghost"])
def test_session_unset_or_unknown(sessions: AwEnv, session: str | None) -> None:
    async def body(t: Tools) -> None:
        for tool in ("check_input_queue", "wait_for_input", "send_message", "acknowledge"):
            args: dict[str, Any] = {"send_message": {"target": "other", "content": "x"},
                                    "acknowledge": {"id": "abcd-1234"}}.get(tool, {})
            text = await t.error(tool, **args)
            assert ("AGENTWRAP_SESSION is not set" if session is None else "ghost") in text
        assert {s["name"] for s in await t.ok("list_sessions")} == {"me", "other", "third"}

    run(sessions, body, session=session)


# --- the config an agent launches it with ------------------------------------------------------


def test_server_config_round_trips_the_paths(aw: AwEnv) -> None:
    env = server_env("api", aw.paths)
    assert env["AGENTWRAP_SESSION"] == "api"
    assert Paths.from_env({**env, "HOME": "/nowhere"}) == aw.paths
    fallback = Paths(aw.paths.config_dir, aw.paths.state_dir, aw.paths.runtime_dir.parent / "x")
    assert "XDG_RUNTIME_DIR" not in server_env("api", fallback)
    cfg = json.loads(config_json("api", aw.paths))
    assert cfg["mcpServers"]["agentwrap"]["args"] == ["-m", "agentwrap", "mcp"]
    printed = json.loads(aw.cli("mcp", "--print-config", "api", check=True).stdout)
    assert printed["mcpServers"]["agentwrap"]["env"] == env
    assert aw.cli("mcp", "--print-config", "bad name!").returncode == 65


def test_server_started_from_its_config(sessions: AwEnv) -> None:
    """What an agent given the rendered entry would start, and the tools answer."""
    aw = sessions
    spec = server_spec("other", aw.paths)
    env = {"PATH": aw.env["PATH"], "PYTHONPATH": aw.env["PYTHONPATH"], **spec["env"]}
    params = StdioServerParameters(command=spec["command"], args=spec["args"], env=env)
    send(aw, "other", "for other")

    async def main() -> None:
        async with server(aw, params=params) as t:
            assert [m["formatted"] for m in await t.ok("check_input_queue")] == ["[user] for other"]

    anyio.run(main)


def test_service_acknowledges_a_submitted_block_once(sessions: AwEnv) -> None:
    """A typed block awaiting its ACK can be acknowledged through the tool; the
    supervisor's later finish is then a no-op."""
    aw = sessions
    svc = Service.open(aw.paths)
    try:
        m = svc.send(NewMessage(session="me", content="typed", require_ack=True)).message
        svc.store.claim_batch("me", "b1", 1000)
        with pytest.raises(InvalidMessage, match="only a message delivered"):
            svc.acknowledge("me", m.id, "done", channel="mcp")
        svc.store.set_phase("b1", Phase.SUBMITTED)
        assert svc.acknowledge("me", m.id, "seen", channel="mcp").status is Status.ACKNOWLEDGED
        assert svc.store.finish(Status.DELIVERED, "late", batch_id="b1") == 0
        assert svc.store.get(m.id).attempts == 1
    finally:
        svc.close()


def _race_agent_sends(env: dict[str, str], start: Any, n: int, out: Any) -> None:
    """One `agentwrap mcp` process's worth of send_message calls (a child process)."""
    from agentwrap.errors import RateLimited
    from agentwrap.paths import Paths

    with Service.open(Paths.from_env(env)) as svc:
        start.wait()
        for i in range(n):
            try:
                svc.send_as_agent("me", ("other", "third")[i % 2], f"{os.getpid()}-{i}")
                out.put("stored")
            except RateLimited:
                out.put("refused")


def test_send_message_rate_holds_across_processes(sessions: AwEnv) -> None:
    """Each `agentwrap mcp` is a process of its own: 4 of one session stored 22
    in a minute, 8 stored 24 (issue 26). The limit is counted by the store in
    the transaction that stores the message, so racing processes share it."""
    import multiprocessing

    aw = sessions
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text("[limits]\nrate_per_minute = 100\n")  # only the agent limit
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_race_agent_sends, args=(aw.env, start, AGENT_SENDS // 2, out))
             for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    results = [out.get(timeout=10) for _ in range(6 * (AGENT_SENDS // 2))]
    assert results.count("stored") == AGENT_SENDS, results.count("stored")
    assert len(history(aw, "other")) + len(history(aw, "third")) == AGENT_SENDS


def test_send_message_on_a_shared_store_is_from_this_hosts_session(pg_url: str) -> None:
    """Two hosts of one store each run ``dev``: alpha's agent sends to beta's
    ``x``, whose agent reads it as from ``alpha/dev`` (its sourceId and its
    label), a sender it can answer; beta's ``dev`` is another sender."""
    with hosts_kit.two_hosts(pg_url) as (alpha, beta):
        for host, aw, names in (("alpha", alpha, ("dev",)), ("beta", beta, ("dev", "x"))):
            reg = Registry(aw.paths.db_path, url=pg_url, host=host)
            try:
                for name in names:
                    reg.register(record(name, cwd=str(aw.project)))
            finally:
                reg.close()

        async def main() -> None:
            async with server(alpha, "dev") as a, server(beta, "dev") as b, \
                    server(beta, "x") as x:
                sent = await a.ok("send_message", target="beta/x", content="from alpha's dev")
                assert (sent["target"], sent["depth"]) == ("beta/x", 1)
                await b.ok("send_message", target="beta/x", content="from beta's dev")
                got = await x.ok("check_input_queue")
                assert [(m["sourceId"], m["formatted"]) for m in got] == [
                    ("alpha/dev", "[agent:alpha/dev] from alpha's dev"),
                    ("beta/dev", "[agent:beta/dev] from beta's dev")]
                answer = await x.ok("send_message", target=got[0]["sourceId"], content="got it")
                assert answer["target"] == "alpha/dev"

        anyio.run(main)
