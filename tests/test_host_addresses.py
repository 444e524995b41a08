"""Sessions addressed ``HOST/NAME`` everywhere a session is named (issue 23):
the service's calls (so every surface's), the HTTP routes in both forms
(``/api/hosts/HOST/sessions/NAME/...`` and ``/api/sessions/HOST%2FNAME/...``),
the CLI's commands, MCP's ``send_message``. Any host queues, peeks, reads
the history, the figures and the events of any host's session; stopping it
and its screen stay its own host's. Two hosts are simulated on one
PostgreSQL as in tests/test_hosts.py; one machine (SQLite) keeps every
session its own whatever the host was called when it started."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
import test_mcp
from conftest import AwEnv
from support import hosts_kit
from support.http_kit import in_process
from support.records import record

from agentwrap.detect.states import State
from agentwrap.errors import (
    NoOpenQuestion,
    SessionNotFound,
    SessionNotRunning,
)
from agentwrap.message import NewMessage, Source
from agentwrap.service import Service
from agentwrap.sessions import hosts
from agentwrap.sessions.hosts import ENV as HOST_ENV
from agentwrap.sessions.registry import Registry
from agentwrap.terminal.proctree import start_time


@pytest.fixture
def two_hosts(aw: AwEnv, pg_url: str, sleeper: subprocess.Popen[bytes],
              monkeypatch: pytest.MonkeyPatch) -> Iterator[AwEnv]:
    """This process (and ``aw``'s CLI) is host alpha with session a1; beta, up,
    has b1 with a state change logged. Both records name a live supervisor."""
    hosts_kit.be_host(aw, monkeypatch, pg_url, "alpha")
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    alpha = Registry(aw.paths.db_path, url=pg_url, host="alpha")
    beta = Registry(aw.paths.db_path, url=pg_url, host="beta")
    try:
        alpha.register(record("a1", **live))
        beta.register(record("b1", **live))
        beta.set_state("b1", State.READY, signal="s", rule="r", reason="prompt", evidence="",
                       quiet_ms=0, draft=False, changed=True)
        hosts.beat(beta.db, "beta", 3600.0)  # up for the whole test
    finally:
        alpha.close()
        beta.close()
    yield aw


def new(session: str, content: str) -> NewMessage:
    return NewMessage(session=session, content=content, source=Source.USER, source_id="t")


def test_every_service_call_takes_host_slash_name(two_hosts: AwEnv) -> None:
    with Service.open(two_hosts.paths) as svc:
        sent = svc.send(new("beta/b1", "one"))
        # on a shared store a row names its session HOST/NAME (its key, issue 23)
        assert sent.message.session == "beta/b1" and sent.supervised
        many = svc.send_many([new("beta/b1", "two"), new("alpha/b1", "lost"),
                              new("gamma/zz", "lost too")])
        assert not isinstance(many[0], Exception) and many[0].message.session == "beta/b1"
        assert isinstance(many[1], SessionNotFound) and "beta/b1" in many[1].hint
        assert isinstance(many[2], SessionNotFound)
        by_agent = svc.send_as_agent("a1", "beta/b1", "three")
        assert by_agent.message.session == "beta/b1"
        assert [w.message.content for w in svc.peek("beta/b1").entries] == ["one", "two", "three"]
        assert svc.peek("beta/b1").session.host == "beta"
        assert {e.message.content for e in svc.history("beta/b1")} == {"one", "two", "three"}
        assert svc.metrics("beta/b1").total == 3
        assert svc.events(0, "beta/b1") and {e.session for e in svc.events(0, "beta/b1")} == {
            "beta/b1"}
        assert [t.state for t in svc.transitions("beta/b1")][-1] == "ready"
        assert svc.state("beta/b1").name == "b1"
        with pytest.raises(NoOpenQuestion):  # the session was found: it asks nothing
            svc.answer("beta/b1", option=1)
        # its screen and its processes are beta's
        with pytest.raises(SessionNotRunning, match="kept on its host 'beta'"):
            svc.screen_view("beta/b1")
        with pytest.raises(SessionNotRunning, match="runs on host 'beta'"):
            svc.stop("beta/b1", by="test")
        with pytest.raises(SessionNotFound, match="no session 'b1' on host 'alpha'") as info:
            svc.peek("alpha/b1")
        assert info.value.hint and "beta/b1" in info.value.hint
        assert svc.peek("alpha/a1").session.name == "a1"


def test_the_http_api_takes_host_and_name_in_either_form(two_hosts: AwEnv) -> None:
    api = in_process(two_hosts)
    body = {"content": "x", "source": "webhook", "sourceId": "ci"}
    try:
        for path in ("/api/hosts/beta/sessions/b1/input",  # the hot path
                     "/api/hosts/beta/sessions/b1/input?wait=0",  # the route
                     "/api/sessions/beta%2Fb1/input", "/api/sessions/beta%2fb1/input?wait=0"):
            r = api.post(path, json={**body, "content": path})
            assert r.status_code == 201, (path, r.text)
        peek = api.get("/api/sessions/beta%2Fb1/input").json()
        assert peek["total"] == 4 and {i["session"] for i in peek["inputs"]} == {"beta/b1"}
        one = api.get("/api/hosts/beta/sessions/b1").json()
        assert (one["name"], one["host"], one["pending"]) == ("b1", "beta", 4)
        assert api.get("/api/messages", params={"session": "beta/b1"}).json()["total"] == 4
        for path in ("/api/hosts/alpha/sessions/b1", "/api/hosts/alpha/sessions/b1/input",
                     "/api/sessions/alpha%2Fb1/input"):
            r = api.post(path, json=body) if path.endswith("input") else api.get(path)
            assert r.status_code == 404, (path, r.text)
            got = r.json()
            assert got["sessionId"] == "alpha/b1" and "beta/b1" in got["hint"], got
        r = api.post("/api/hosts/beta/sessions/b1/stop")
        assert r.status_code == 409 and "runs on host 'beta'" in r.json()["detail"]
        r = api.get("/api/hosts/beta/sessions/b1/screen")
        assert r.status_code == 409 and "kept on its host" in r.json()["detail"]
        r = api.get("/api/events", params={"session": "alpha/b1"})
        assert r.status_code == 404  # before any stream starts
        # answering goes through to the session (which asks nothing)
        r = api.post("/api/sessions/beta%2Fb1/answer", json={"option": 1})
        assert r.status_code == 409 and r.json()["error"] == "No open question", r.text
    finally:
        api.app.state.pool.close()


def test_the_cli_takes_host_slash_name_and_stop_all_stops_this_hosts_only(
    two_hosts: AwEnv,
) -> None:
    aw = two_hosts
    aw.cli("send", "beta/b1", "from the cli", check=True)
    queued = json.loads(aw.cli("queue", "beta/b1", "--json", check=True).stdout)
    assert [q["content"] for q in queued] == ["from the cli"]
    history = json.loads(aw.cli("history", "beta/b1", "--json", check=True).stdout)
    assert [h["content"] for h in history] == ["from the cli"]
    figures = json.loads(aw.cli("metrics", "beta/b1", "--json", check=True).stdout)
    assert figures["total"] == 1
    events = [json.loads(line) for line in
              aw.cli("events", "beta/b1", "--json", check=True).stdout.splitlines()]
    assert events and {e["session"] for e in events} == {"beta/b1"}
    answered = aw.cli("answer", "beta/b1", "1")
    assert answered.returncode != 0 and "no session" not in answered.stderr.lower()
    assert "question" in answered.stderr.lower()
    scheduled = aw.cli("schedule", "start", "beta/b1", "--every", "1h", "--run", "echo checked",
                       "--now", "--times", "1", "--json", check=True)
    assert scheduled.returncode == 0
    queued = json.loads(aw.cli("queue", "beta/b1", "--json", check=True).stdout)
    assert queued[-1]["source"] == "scheduler" and "checked" in queued[-1]["content"], queued
    wrong = aw.cli("queue", "alpha/b1")
    assert wrong.returncode == 3 and "beta/b1" in wrong.stderr
    # --all: this host's sessions; beta's is beta's to stop
    stopped = aw.cli("stop", "--all", "--json", check=True)
    assert [r["name"] for r in json.loads(stopped.stdout)] == ["a1"]
    left = {d["name"]: d for d in json.loads(aw.cli("ls", "--all", "--json", check=True).stdout)}
    assert left["a1"]["liveness"] == "ended" and left["b1"]["liveness"] == "running"


def test_one_machine_keeps_its_sessions_whatever_its_host_was_called(
    aw: AwEnv, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQLite: the host renamed since the session started (hostname, config)
    still stops it and shows its screen; its address is the host it started on."""
    old = Registry(aw.paths.db_path, host="oldname")
    try:
        old.register(record("s1"))
    finally:
        old.close()
    monkeypatch.setenv(HOST_ENV, "newname")
    (aw.paths.runtime_dir / "s1.screen").write_text("the prompt\n", encoding="utf-8")
    with Service.open(aw.paths) as svc:
        assert svc.registry.host == "newname"
        assert svc.screen("oldname/s1") == "the prompt\n"
        with pytest.raises(SessionNotFound, match="on host 'newname'"):
            svc.peek("newname/s1")
        rec = svc.stop("s1", by="test")  # stale, no agent left: its end is recorded
        assert rec.ended is not None and rec.name == "s1"


def test_only_the_owning_host_hands_its_messages_over(two_hosts: AwEnv, pg_url: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Any host queues for b1; its messages are handed over (hooks, MCP) on beta only."""
    with Service.open(two_hosts.paths) as alpha:
        alpha.send(new("beta/b1", "for b1's agent"))
        for take in (lambda: alpha.consume("b1", channel="mcp"),
                     lambda: alpha.hand_over("b1", channel="hook", limit_chars=4000),
                     lambda: alpha.claim_hand_over("b1", channel="hook", limit_chars=4000)):
            with pytest.raises(SessionNotRunning, match="runs on host 'beta'"):
                take()
        assert [w.message.content for w in alpha.peek("b1").entries] == ["for b1's agent"]
    monkeypatch.setenv(HOST_ENV, "beta")
    with Service.open(two_hosts.paths) as beta:
        assert [m.content for m in beta.consume("b1", channel="mcp")] == ["for b1's agent"]


# --- a bare name: this host's session when it has one (issue 35) ---------------------------


@pytest.fixture
def both_have_api(aw: AwEnv, pg_url: str, sleeper: subprocess.Popen[bytes],
                  monkeypatch: pytest.MonkeyPatch) -> Iterator[AwEnv]:
    """This process (and ``aw``'s CLI) is host alpha; alpha and beta each run
    a session ``api``; beta and gamma each run ``web``, alpha none; alpha runs
    ``me`` (an agent whose MCP server sends)."""
    hosts_kit.be_host(aw, monkeypatch, pg_url, "alpha")
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    regs = {h: Registry(aw.paths.db_path, url=pg_url, host=h) for h in ("alpha", "beta", "gamma")}
    try:
        for host, name in (("alpha", "api"), ("alpha", "me"), ("beta", "api"), ("beta", "web"),
                           ("gamma", "web")):
            regs[host].register(record(name, **live))
        for host in ("beta", "gamma"):
            hosts.beat(regs[host].db, host, 3600.0)  # up for the whole test
    finally:
        for reg in regs.values():
            reg.close()
    yield aw


def test_a_bare_name_is_this_hosts_session_on_every_surface(both_have_api: AwEnv) -> None:
    """`events api` on alpha named "several hosts have a session named 'api'"
    although alpha has one: the CLI, the service under HTTP and MCP, and the
    page's API all take a bare name as this host's session when it has one;
    a name only other hosts have is still theirs, and ambiguous among several."""
    aw = both_have_api
    # CLI
    sent = json.loads(aw.cli("send", "api", "bare from the cli", "--json", check=True).stdout)
    assert sent["session"] == "alpha/api", sent
    events = [json.loads(line) for line in
              aw.cli("events", "api", "--json", check=True).stdout.splitlines()]
    assert events and {e["session"] for e in events} == {"alpha/api"}
    queued = json.loads(aw.cli("queue", "api", "--json", check=True).stdout)
    assert [q["content"] for q in queued] == ["bare from the cli"]
    assert json.loads(aw.cli("history", "api", "--json", check=True).stdout)
    beta_queue = json.loads(aw.cli("queue", "beta/api", "--json", check=True).stdout)
    assert beta_queue == []  # HOST/NAME still names beta's
    two = aw.cli("events", "web", "--json")  # beta's and gamma's, none here: which?
    assert two.returncode == 64 and "beta/web" in two.stderr and "gamma/web" in two.stderr
    # HTTP (the routes the page calls: the list names this host, a bare path is its session)
    api = in_process(aw)
    try:
        listed = api.get("/api/sessions").json()
        assert listed["host"] == "alpha"
        one = api.get("/api/sessions/api").json()
        assert (one["host"], one["name"], one["pending"]) == ("alpha", "api", 1)
        for path in ("/api/sessions/api/input", "/api/sessions/api/input?wait=0"):
            r = api.post(path, json={"content": path, "source": "webhook", "sourceId": "ci"})
            assert r.status_code == 201, r.text
        peek = api.get("/api/sessions/api/input").json()
        assert peek["total"] == 3 and {i["session"] for i in peek["inputs"]} == {"alpha/api"}
        assert api.get("/api/messages", params={"session": "api"}).json()["total"] == 3
        r = api.get("/api/sessions/web")
        assert r.status_code == 409 and r.json()["candidates"] == ["beta/web", "gamma/web"]
    finally:
        api.app.state.pool.close()

    # MCP: the real server of alpha's session `me`
    async def body(t: test_mcp.Tools) -> None:
        sent = await t.ok("send_message", target="api", content="bare from an agent")
        assert sent["target"] == "alpha/api", sent
        assert "several" in await t.error("send_message", target="web", content="which?")

    test_mcp.run(aw, body, session="me")
    assert [q["content"] for q in json.loads(
        aw.cli("queue", "api", "--json", check=True).stdout)][-1] == "bare from an agent"
