"""Sessions keyed by (host, name) (issue 23): a session ``dev`` may run on two
hosts of one shared store at once. Each host's ``dev`` has its own messages
(never claimed, typed or counted by the other's), its own idempotency keys
and rate window, its own events, state transitions and answers; a bare
``dev`` names this host's session inside a host (supervisors, hooks) and,
from a caller, fails listing ``alpha/dev`` and ``beta/dev``. The contract
runs on both backends: SQLite is one machine, where ``dev`` is one session
whatever the host is called. Real supervisors with stand-in agents type on
two simulated hosts of one PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import AwEnv
from support import hosts_kit
from support.http_kit import in_process
from support.records import record
from support.stores import StoreTarget

from agentwrap.answers.actions import OptionAnswer
from agentwrap.delivery.framing import entry
from agentwrap.errors import (
    IdempotencyConflict,
    RateLimited,
    SessionAmbiguous,
    SessionNameTaken,
    SessionNotFound,
    StoreNotEmpty,
)
from agentwrap.message import Kind, NewMessage, QueueLimits, Source
from agentwrap.queue.backend import ENV as STORE_ENV
from agentwrap.service import Service
from agentwrap.service.moving import Place, migrate
from agentwrap.service.sending import AGENT_SENDS
from agentwrap.sessions import hosts
from agentwrap.sessions.hosts import ENV as HOST_ENV
from agentwrap.terminal.proctree import start_time


def new(session: str, content: str, key: str | None = None) -> NewMessage:
    return NewMessage(session=session, content=content, source=Source.USER, source_id="t",
                      idempotency_key=key)


def test_each_hosts_dev_has_its_own_queue_keys_rate_and_events(store_target: StoreTarget) -> None:
    shared = store_target.backend == "postgres"
    limits = QueueLimits(rate_per_minute=2)
    alpha = store_target.open(limits, host="alpha")
    beta = store_target.open(limits, host="beta")
    try:
        a1, created = alpha.enqueue(new("dev", "for alpha", key="k"))
        assert created and a1.session == ("alpha/dev" if shared else "dev")
        if not shared:  # one machine: one `dev`, one key, one rate window
            with pytest.raises(IdempotencyConflict):
                beta.enqueue(new("dev", "for beta", key="k"))
            alpha.enqueue(new("dev", "second"))
            with pytest.raises(RateLimited):
                beta.enqueue(new("dev", "third"))
            assert [m.content for m in beta.claim_batch("dev", "b", 10_000)] == [
                "for alpha", "second"]
            return
        b1, created = beta.enqueue(new("dev", "for beta", key="k"))  # the same key: beta's dev
        assert created and b1.id != a1.id and b1.session == "beta/dev"
        # the same key again is the first message of that host's dev, from either host
        again, created = beta.enqueue(new("alpha/dev", "for alpha", key="k"))
        assert (again.id, again.session, created) == (a1.id, "alpha/dev", False)
        with pytest.raises(IdempotencyConflict):
            beta.enqueue(new("alpha/dev", "other content", key="k"))
        # rate window per (host, name): alpha's dev is full, beta's has room
        alpha.enqueue(new("dev", "second for alpha"))
        with pytest.raises(RateLimited):
            beta.enqueue(new("alpha/dev", "third for alpha"))
        beta.enqueue(new("dev", "second for beta"))
        # a row names its session by its key, the same on every host
        assert alpha.get(b1.id).session == beta.get(b1.id).session == "beta/dev"
        assert [m.content for m in alpha.peek("beta/dev")] == ["for beta", "second for beta"]
        assert alpha.pending_count("dev") == beta.pending_count("dev") == 2
        assert alpha.pending_count() == 4
        # claims: each host's dev takes its own messages only
        got_b = beta.claim_batch("dev", "batch-b", 10_000)
        assert [m.content for m in got_b] == ["for beta", "second for beta"]
        assert {m.session for m in got_b} == {"beta/dev"}
        assert beta.claim_batch("dev", "batch-b2", 10_000) == []
        got_a = alpha.claim_batch("dev", "batch-a", 10_000)
        assert [m.content for m in got_a] == ["for alpha", "second for alpha"]
        assert [m.id for m in beta.in_flight("alpha/dev")] == [m.id for m in got_a]
        # events: per host
        mine = alpha.events(0, session="dev")
        assert mine and {e.session for e in mine} == {"alpha/dev"}
        assert {e.subject for e in mine} >= {a1.id} and b1.id not in {e.subject for e in mine}
        theirs = alpha.events(0, session="beta/dev")
        assert theirs and {e.session for e in theirs} == {"beta/dev"}
        assert {e.session for e in beta.events(0)} == {"beta/dev", "alpha/dev"}
        assert alpha.metrics("dev").total == beta.metrics("dev").total == 2
        assert {m.session for m in alpha.history(None)} == {"alpha/dev", "beta/dev"}
    finally:
        alpha.close()
        beta.close()


def test_registry_and_answers_keep_each_hosts_dev(
    store_target: StoreTarget, sleeper: subprocess.Popen[bytes],
) -> None:
    shared = store_target.backend == "postgres"
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    alpha, beta = store_target.registry(host="alpha"), store_target.registry(host="beta")
    ans_a, ans_b = store_target.answers(host="alpha"), store_target.answers(host="beta")
    try:
        alpha.register(record("dev", **live))
        if not shared:  # one machine: the name is taken
            with pytest.raises(SessionNameTaken):
                beta.register(record("dev", **live))
            assert alpha.resolve("dev") == "dev" == beta.resolve("alpha/dev")
            return
        beta.register(record("dev", **live))
        beta.register(record("solo", **live))
        # a bare name: this host's session when it has one (issue 35); a host
        # that has none cannot tell which of the others' is meant
        assert (alpha.resolve("dev"), beta.resolve("dev")) == ("alpha/dev", "beta/dev")
        gamma = store_target.registry(host="gamma")
        try:
            with pytest.raises(SessionAmbiguous) as info:
                gamma.resolve("dev")
        finally:
            gamma.close()
        assert info.value.candidates == ["alpha/dev", "beta/dev"]
        assert "alpha/dev" in str(info.value) and "beta/dev" in str(info.value)
        assert info.value.to_json()["candidates"] == ["alpha/dev", "beta/dev"]
        for reg in (alpha, beta):  # a key, the same from every host; resolved again: itself
            assert reg.resolve("alpha/dev") == "alpha/dev" == reg.resolve(reg.resolve("alpha/dev"))
            assert (reg.resolve("beta/dev"), reg.resolve("solo")) == ("beta/dev", "beta/solo")
        assert alpha.local("alpha/dev") == "dev" and alpha.local("beta/dev") is None
        with pytest.raises(SessionNotFound):
            alpha.resolve("gamma/dev")
        assert (alpha.get("dev").host, alpha.get("beta/dev").host) == ("alpha", "beta")
        assert alpha.get("beta/dev").name == "dev"
        assert sorted((r.host, r.name) for r in alpha.list()) == [
            ("alpha", "dev"), ("beta", "dev"), ("beta", "solo")]
        # state: each host's supervisor updates its own dev
        from agentwrap.detect.states import State

        beta.set_state("dev", State.BUSY, signal="s", rule="r", reason="working", evidence="",
                       quiet_ms=0, draft=False, changed=True)
        assert alpha.get("beta/dev").state is State.BUSY
        assert alpha.get("dev").state is State.STARTING
        assert [t.state for t in alpha.transitions("dev")] == ["starting"]
        assert [t.state for t in alpha.transitions("beta/dev")] == ["starting", "busy"]
        assert {t.session for t in alpha.transitions("beta/dev")} == {"beta/dev"}
        # answers: per host
        ans_a.request("dev", "q1", OptionAnswer(1, 1, "Yes"), source="user")
        assert [a.question_id for a in ans_a.pending("dev")] == ["q1"]
        assert ans_b.pending("dev") == []
        assert [a.session for a in ans_b.pending("alpha/dev")] == ["alpha/dev"]
        assert ans_b.pending("beta/dev") == []
        # ending alpha's dev leaves beta's running; a bare dev is then beta's
        alpha.mark_ended("dev", 0)
        assert alpha.get("beta/dev").ended is None and alpha.resolve("dev") == "beta/dev"
    finally:
        for c in (alpha, beta, ans_a, ans_b):
            c.close()


def test_a_store_of_the_previous_version_is_keyed_by_host_on_open(pg_url: str) -> None:
    """Rows written before keys (bare names, unique across hosts then) are
    renamed HOST/NAME by the registry's host when a new agentwrap opens the store."""
    target = StoreTarget("postgres", pg_url)
    reg = target.registry(host="beta")
    store = target.open(host="beta")
    try:
        reg.register(record("old"))
        msg, _ = store.enqueue(new("old", "queued before the upgrade"))
    finally:
        reg.close()
        store.close()
    for table, column in (("messages", "session"), ("events", "session"),
                          ("state_transitions", "session"), ("sessions", "name")):
        target.execute(f"UPDATE {table} SET {column} = 'old' WHERE {column} = 'beta/old'")
    target.execute("DROP TABLE session_keys")
    alpha, beta = target.open(host="alpha"), target.open(host="beta")
    reg = target.registry(host="alpha")
    try:
        assert alpha.peek("old") == []
        assert [m.id for m in beta.peek("old")] == [msg.id]
        assert [m.id for m in alpha.peek("beta/old")] == [msg.id]
        assert reg.get("beta/old").name == "old" and reg.resolve("old") == "beta/old"
        assert {e.session for e in beta.events(0)} == {"beta/old"}
    finally:
        for c in (alpha, beta, reg):
            c.close()


def test_two_hosts_dev_cannot_move_into_one_machines_store(pg_url: str, tmp_path: Path) -> None:
    target = StoreTarget("postgres", pg_url)
    for host in ("alpha", "beta"):
        reg = target.registry(host=host)
        try:
            reg.register(record("dev"))
            reg.mark_ended("dev", 0)  # no supervisor runs: nothing holds the move back
        finally:
            reg.close()
    with pytest.raises(StoreNotEmpty, match="alpha/dev, beta/dev") as info:
        migrate(Place(Path("/nonexistent"), pg_url), Place(tmp_path / "one.db"))
    assert "nothing was copied" in str(info.value)


def test_http_and_cli_refuse_a_bare_name_only_other_hosts_have(
    aw: AwEnv, pg_url: str, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """This host alpha and beta each have a ``dev`` (a bare ``dev`` is alpha's,
    tests/test_host_addresses.py); beta and gamma each have a ``web``, which
    a bare name cannot pick between."""
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    hosts_kit.be_host(aw, monkeypatch, pg_url, "alpha")
    for host, name in (("alpha", "dev"), ("beta", "dev"), ("beta", "web"), ("gamma", "web")):
        reg = StoreTarget("postgres", pg_url).registry(host=host)
        try:
            reg.register(record(name, **live))
            hosts.beat(reg.db, host, 3600.0)  # up for the whole test, however slow the machine
        finally:
            reg.close()
    api = in_process(aw)
    body = {"content": "x", "source": "webhook", "sourceId": "ci"}
    try:
        for path in ("/api/sessions/web/input", "/api/sessions/web/input?wait=0"):
            r = api.post(path, json=body)
            assert r.status_code == 409, (path, r.text)
            assert r.json()["candidates"] == ["beta/web", "gamma/web"], r.text
        r = api.post("/api/hosts/beta/sessions/dev/input", json={**body, "content": "to beta"})
        assert r.status_code == 201, r.text
        assert r.json()["created"] and r.json()["supervised"], r.text
        assert api.get("/api/sessions/beta%2Fdev/input").json()["total"] == 1
        assert api.get("/api/hosts/alpha/sessions/dev/input").json()["total"] == 0
        assert api.get("/api/sessions/web/input").status_code == 409
        for host, pending in (("alpha", 0), ("beta", 1)):  # each host's dev, its own figures
            d = api.get(f"/api/sessions/{host}%2Fdev")
            assert d.status_code == 200, d.text
            assert (d.json()["host"], d.json()["name"], d.json()["pending"]) == (host, "dev", pending)
        queues = api.get("/api/debug/input-queue")
        assert queues.status_code == 200, queues.text
        assert sorted((q["session"], len(q["entries"])) for q in queues.json()["queues"]) == [
            ("alpha/dev", 0), ("beta/dev", 1), ("beta/web", 0), ("gamma/web", 0)]
    finally:
        api.app.state.pool.close()
    bare = aw.cli("queue", "web")
    assert bare.returncode == 64 and "beta/web, gamma/web" in bare.stderr
    assert aw.cli("send", "beta/dev", "two", check=True).returncode == 0
    queued = json.loads(aw.cli("queue", "beta/dev", "--json", check=True).stdout)
    assert [q["content"] for q in queued] == ["to beta", "two"]
    listed = json.loads(aw.cli("ls", "--json", check=True).stdout)
    assert sorted((d["host"], d["name"], d["pending"]) for d in listed) == [
        ("alpha", "dev", 0), ("beta", "dev", 2), ("beta", "web", 0), ("gamma", "web", 0)]
    table = aw.cli("ls", check=True).stdout.splitlines()
    at = table[0].index("PENDING")
    assert sorted(line.split()[1] + ":" + line[at:].split()[0] for line in table[1:]
                  if line.split()[0] == "dev") == ["alpha:0", "beta:2"], table
    # state says which host's dev it is, and reads that one only
    for host in ("alpha", "beta"):
        told = aw.cli("state", f"{host}/dev", "--explain", check=True).stdout
        assert f"\n  host:       {host}\n" in told, told
        state = json.loads(aw.cli("state", f"{host}/dev", "--json", check=True).stdout)
        assert (state["name"], state["host"], state["host_liveness"]) == ("dev", host, "up")
        # a file dropped here answers alpha's dev; beta's is answered on beta
        assert (state["answer_dir"] or "").endswith("/answers/dev") is (host == "alpha")
    screen = aw.cli("state", "alpha/dev", "--screen")  # alpha's, not "which dev?"
    assert screen.returncode == 3 and "no screen recorded for 'alpha/dev'" in screen.stderr
    reg = StoreTarget("postgres", pg_url).registry(host="beta")
    try:
        hosts.beat(reg.db, "beta", 1.0, now=1_700_000_000.0)  # silent since then
    finally:
        reg.close()
    told = aw.cli("state", "beta/dev", "--explain", check=True).stdout
    assert "\n  host:       beta (unreachable since 2023-11-1" in told, told
    state = json.loads(aw.cli("state", "beta/dev", "--json", check=True).stdout)
    assert (state["host_liveness"], state["unreachable_since"]) == ("unreachable", 1_700_000_000.0)


def test_an_answer_to_this_hosts_session_named_host_slash_name_wakes_its_supervisor(
    aw: AwEnv, pg_url: str, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answer is stored for alpha/dev (beta's dev has none) and alpha's
    supervisor of dev is woken through its socket here, as for a bare name."""
    from agentwrap.datagram import WakeSocket
    from agentwrap.detect.question import Item, Option, Question, question_id
    from agentwrap.detect.states import State
    from agentwrap.service import Service

    monkeypatch.setenv(STORE_ENV, pg_url)
    monkeypatch.setenv(HOST_ENV, "alpha")
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    item = Item(question="Proceed?", options=(Option("Yes", number=1), Option("No", number=2)))
    q = Question(id=question_id("permission", (item,), "Bash", "touch x"), kind="permission",
                 title="Bash command", questions=(item,), highlighted=1, tool="Bash",
                 command="touch x", dialog="permission")
    for host in ("alpha", "beta"):
        reg = StoreTarget("postgres", pg_url).registry(host=host)
        try:
            reg.register(record("dev", **live))
            reg.set_state("dev", State.WAITING_INPUT, signal="screen", rule="dialog:permission",
                          reason="permission dialog", evidence="", quiet_ms=0, draft=False,
                          changed=True, question=q.to_json())
        finally:
            reg.close()
    with WakeSocket(aw.paths.wake_socket("dev")) as inbox, Service.open(aw.paths) as svc:
        got = svc.answer("alpha/dev", option=1)
        assert got.answer.session == "alpha/dev"
        inbox.sock.settimeout(30)
        assert inbox.sock.recv(256) == b"wake"
        assert svc.answers.pending("beta/dev") == []
        assert [a.id for a in svc.answers.pending("dev")] == [got.answer.id]


def test_start_context_handed_over_for_host_slash_name_is_noted_here(
    aw: AwEnv, pg_url: str, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SessionStart hand-over named alpha/dev on alpha: the batch is noted in
    dev's file here (the key names no file: it raised after the claim)."""
    from agentwrap.message import Priority
    from agentwrap.service import Service

    monkeypatch.setenv(STORE_ENV, pg_url)
    monkeypatch.setenv(HOST_ENV, "alpha")
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    with Service.open(aw.paths) as svc:
        svc.registry.register(record("dev", **live))
        svc.store.enqueue(NewMessage(session="dev", content="start context", source=Source.SYSTEM,
                                     source_id="t", priority=Priority.STARTUP), internal=True)
        text = svc.hand_over("alpha/dev", channel="hook", limit_chars=4000, at_start=True)
        assert "start context" in text
        assert aw.paths.started_batches("dev").is_file()
        (entry,) = svc.peek("alpha/dev").entries
        assert "session start" in entry.waiting_because


def test_each_hosts_dev_is_its_own_sender_with_its_own_limit_and_flow(
    pg_url: str, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent's messages are from its session's key: alpha's ``dev`` and
    beta's ``dev`` each get the agent rate limit and their own flow, and a
    receiver reads (and can answer) ``[agent:alpha/dev]``. A user's config
    naming ``agent:dev`` means this host's ``dev``."""
    live = {"supervisor_pid": sleeper.pid, "supervisor_start": start_time(sleeper.pid)}
    config = ('[limits]\nrate_per_minute = 100\n'  # only the agent's own limit
              '[trust]\ninstruction_sources = ["user", "agent:dev"]\n')
    with hosts_kit.two_hosts(pg_url, config=config) as (alpha_aw, beta_aw):
        svcs: dict[str, Service] = {}
        try:
            for host, aw in (("alpha", alpha_aw), ("beta", beta_aw)):
                hosts_kit.be_host(aw, monkeypatch, pg_url, host)
                svc = svcs[host] = Service.open(aw.paths)
                for name in ("dev", "x"):
                    svc.registry.register(record(name, **live))
            alpha, beta = svcs["alpha"], svcs["beta"]
            # alpha's dev got a message of flow-a; beta's dev got nothing
            beta.send(NewMessage(session="alpha/dev", content="ask beta's x", source=Source.USER,
                                 source_id="t", correlation_id="flow-a", depth=2))
            assert [m.content for m in alpha.consume("dev", channel="mcp")] == ["ask beta's x"]
            a = alpha.send_as_agent("dev", "beta/x", "from alpha's dev").message
            b = beta.send_as_agent("dev", "alpha/x", "from beta's dev").message
            assert (a.session, a.source_id, a.correlation_id, a.depth) == (
                "beta/x", "alpha/dev", "flow-a", 3)
            assert (b.session, b.source_id, b.depth) == ("alpha/x", "beta/dev", 1)
            assert b.correlation_id != "flow-a"
            assert entry(beta.store.get(a.id)).startswith("[agent:alpha/dev] ")
            # each dev has its own AGENT_SENDS a window
            for i in range(AGENT_SENDS - 1):
                alpha.send_as_agent("dev", "alpha/x", f"alpha {i}")
            with pytest.raises(RateLimited, match="alpha/dev"):
                alpha.send_as_agent("dev", "alpha/x", "one too many")
            for i in range(AGENT_SENDS - 1):
                beta.send_as_agent("dev", "beta/x", f"beta {i}")
            with pytest.raises(RateLimited, match="beta/dev"):
                beta.send_as_agent("dev", "beta/x", "one too many")
            # config's agent:dev is the admitting host's dev only
            assert a.kind is b.kind is Kind.INSTRUCTION
            other = alpha.send(NewMessage(session="alpha/x", content="beta's, said on alpha",
                                          source=Source.AGENT, source_id="beta/dev"))
            assert other.message.kind is Kind.CONTENT
            sent = [m for m in alpha.store.history(None, limit=1000) if m.source is Source.AGENT]
            assert sorted(Counter(m.source_id for m in sent).items()) == [
                ("alpha/dev", AGENT_SENDS), ("beta/dev", AGENT_SENDS + 1)]
        finally:
            for svc in svcs.values():
                svc.close()


# --- real supervisors on two simulated hosts --------------------------------------------


@pytest.fixture
def two_hosts(pg_url: str) -> Iterator[tuple[AwEnv, AwEnv]]:
    with hosts_kit.two_hosts(pg_url) as hosts:
        yield hosts


def test_two_hosts_each_run_dev_and_get_only_their_own_messages(
    two_hosts: tuple[AwEnv, AwEnv], pg_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    alpha, beta = two_hosts
    alpha.start_standin("dev")
    beta.start_standin("dev")
    for aw in (alpha, beta):
        aw.wait_state("dev", "ready", timeout=40)
    bare = alpha.cli("send", "dev", "alpha to alpha", check=True)  # a bare name: this host's
    assert "for alpha/dev" in bare.stderr, bare.stderr
    alpha.cli("send", "beta/dev", "alpha to beta", check=True)
    beta.cli("send", "alpha/dev", "beta to alpha", check=True)
    beta.cli("send", "beta/dev", "beta to beta", check=True)
    for aw, host in ((alpha, "alpha"), (beta, "beta")):
        aw.wait_for(lambda aw=aw, host=host: all(
            f"to {host}" in t for t in ["".join(aw.received())]) and
            "".join(aw.received()).count(f"to {host}") == 2,
            timeout=40, what=f"both messages typed on {host}")
    for aw, host, other in ((alpha, "alpha", "beta"), (beta, "beta", "alpha")):
        typed = "".join(aw.received())
        assert typed.count(f"alpha to {host}") == 1 and typed.count(f"beta to {host}") == 1
        assert f"to {other}" not in typed
    # alpha's agent dev (its MCP server's call) to beta's: typed there from alpha/dev
    hosts_kit.be_host(alpha, monkeypatch, pg_url, "alpha")
    with Service.open(alpha.paths) as svc:
        svc.send_as_agent("dev", "beta/dev", "agent to agent")
    beta.wait_for(lambda: "[agent:alpha/dev] agent to agent" in "".join(beta.received()),
                  timeout=40, what="alpha's agent's message typed on beta with its sender")
    # a feedback schedule started on alpha for beta's dev reports there, once
    alpha.cli("schedule", "start", "beta/dev", "--every", "1h", "--run", "echo checked-it",
              "--now", "--times", "1", check=True)
    beta.wait_for(lambda: "checked-it" in "".join(beta.received()), timeout=40,
                  what="the schedule's report typed on beta")
    assert "checked-it" not in "".join(alpha.received())
    # each host's view, both delivered
    listed = json.loads(alpha.cli("ls", "--json", check=True).stdout)
    assert sorted((d["host"], d["name"]) for d in listed) == [("alpha", "dev"), ("beta", "dev")]
    hist = json.loads(alpha.cli("history", "beta/dev", "--json", check=True).stdout)
    assert sorted(h["content"] for h in hist if "checked-it" not in h["content"]) == [
        "agent to agent", "alpha to beta", "beta to beta"]
    assert alpha.cli("stop", "beta/dev").returncode != 0  # beta's to stop
    assert "stopped dev" in alpha.cli("stop", "dev", check=True).stderr  # this host's own
    assert {d["host"]: d["liveness"] for d in json.loads(
        beta.cli("ls", "--all", "--json", check=True).stdout)} == {
            "alpha": "ended", "beta": "running"}
    beta.cli("stop", "beta/dev", check=True)
