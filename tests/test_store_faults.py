"""Faults between a host and the PostgreSQL store (issue 23): nothing lost,
nothing typed twice, and nobody needed to get going again.

Real parts only: a real PostgreSQL (the suite's, or one of the test's own
for a restart), real supervisors of a stand-in agent under tmux, and real
cuts: a TCP proxy between the host and the server that the test cuts, and
a trigger that holds the supervisor's transaction at the commit of one
write-ahead phase so the cut lands exactly there (tests/support/pg_faults.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import AwEnv, make_aw
from support import pg
from support.pg_faults import FaultPoint, Proxy
from support.records import record
from support.waiting import wait_for

from agentwrap.answers.store import AnswerStore
from agentwrap.message import Kind, NewMessage, Status
from agentwrap.queue.backend import ENV as STORE_ENV
from agentwrap.queue.backend import open_database
from agentwrap.queue.postgres import PostgresMessageStore
from agentwrap.service.moving import Place, migrate
from agentwrap.sessions import hosts
from agentwrap.sessions.hosts import ENV as HOST_ENV
from agentwrap.sessions.registry import Registry


def host_env(aw: AwEnv, url: str, name: str, heartbeat_s: float = 0.3) -> None:
    aw.env.update({STORE_ENV: url, HOST_ENV: name})
    aw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    aw.paths.config_file.write_text(f"[host]\nheartbeat_s = {heartbeat_s}\n")


def send(aw: AwEnv, name: str, text: str, *extra: str, ack: bool = False) -> str:
    """Queue ``text`` (no ACK asked unless ``ack``); its id."""
    out = aw.cli("send", name, text, "--ack" if ack else "--no-ack", "--json", *extra,
                 check=True).stdout
    return str(json.loads(out)["id"])


def ended(store: PostgresMessageStore, message_id: str) -> list[str]:
    """The terminal states the event log recorded for the message (one, ever)."""
    return [str(e.data["status"]) for e in
            store.events(0, subject=message_id, kinds=["message.ended"])]


def supervisor_pid(aw: AwEnv, name: str) -> int | None:
    reg = aw.registry()
    try:
        return reg.get(name).supervisor_pid
    finally:
        reg.close()


def supervisor_log(aw: AwEnv, name: str) -> str:
    path = aw.paths.logs_dir / f"{name}.log"
    return path.read_text() if path.exists() else ""


@pytest.fixture
def faulty(pg_server: pg.PgServer) -> Iterator[tuple[AwEnv, Proxy, FaultPoint, PostgresMessageStore]]:
    """Host alpha, reaching the suite's PostgreSQL only through a proxy the
    test cuts; the fault point and a store straight to the server, for looking."""
    schema, direct = pg_server.new_schema()
    with ExitStack() as stack:
        stack.callback(pg_server.drop_schema, schema)
        store = PostgresMessageStore(direct)  # the tables, before the trigger on them
        stack.callback(store.close)
        proxy = Proxy(("127.0.0.1", pg_server.port))
        stack.callback(proxy.close)
        point = FaultPoint(direct)
        stack.callback(point.close)
        aw = stack.enter_context(make_aw())
        stack.callback(proxy.up)  # the teardown stops supervisors through it
        host_env(aw, proxy.url(pg_server.user, schema), "alpha")
        yield aw, proxy, point, store


POINTS = [
    ("delivering", "claimed"),
    ("delivering", "pasting"),
    ("delivering", "submitting"),
    ("delivering", "submitted"),
    ("delivered", "submitted"),  # the batch's end
    ("acknowledged", "submitted"),  # the end of a batch that asked for an ACK
]


@pytest.mark.parametrize("committed", [False, True], ids=["lost", "committed"])
@pytest.mark.parametrize(("status", "phase"), POINTS,
                         ids=[f"{s}-{p}" for s, p in POINTS])
def test_a_connection_cut_at_each_write_ahead_phase_types_the_message_once(
    faulty: tuple[AwEnv, Proxy, FaultPoint, PostgresMessageStore],
    status: str, phase: str, committed: bool,
) -> None:
    """The supervisor's connection is cut at the commit that moves the batch
    into ``(status, phase)``: before it (``lost``: the phase is not written)
    or after it (``committed``: written, and the supervisor never hears so).
    Either way the batch is resolved from the phase and the screen once the
    supervisor has reconnected by itself: typed once, one terminal state."""
    aw, proxy, point, store = faulty
    aw.start_standin("a1")
    aw.wait_state("a1", "ready", timeout=40)
    point.arm(status, phase)
    text = f"cut at {status}/{phase}"
    acked = status == "acknowledged"
    mid = send(aw, "a1", text, ack=acked)
    pid, port = point.writer()
    if committed:
        proxy.mute(port)  # the server's answer to the COMMIT never reaches the host
        point.release()
        wait_for(lambda: point.row(mid) == (status, phase), 30, "the held commit made")
        proxy.cut(port)
    else:
        point.terminate(pid)  # rolled back: the row keeps its earlier phase
        point.release()
    wait_for(lambda: store.get(mid).status.terminal, 60, f"{mid} ended")
    # a second message typed after it: whatever the first was going to do, it has done
    send(aw, "a1", "after the cut")
    wait_for(lambda: "after the cut" in "".join(aw.received()), 60, "the next message typed")
    typed = "".join(aw.received())
    assert typed.count(text) == 1, aw.received()
    final = "acknowledged" if acked else "delivered"
    assert store.get(mid).status is Status(final)
    assert ended(store, mid) == [final]
    sup = supervisor_pid(aw, "a1")
    assert sup and os.path.exists(f"/proc/{sup}")  # the same supervisor went on
    assert "cannot use the store" in supervisor_log(aw, "a1")  # the cut did hit it


def ls(aw: AwEnv, **env: str) -> dict[str, dict[str, object]]:
    out = aw.cli("ls", "--json", check=True, env=env or None).stdout
    return {d["name"]: d for d in json.loads(out)}


def test_a_host_without_its_store_keeps_its_agent_types_nothing_and_resumes(
    faulty: tuple[AwEnv, Proxy, FaultPoint, PostgresMessageStore],
) -> None:
    """Alpha loses the store (every connection closed, new ones refused): its
    agent runs on, nothing is typed into it, and another host sees alpha
    unreachable; a message another host queues meanwhile waits, and is
    typed once when the store is back, by the same supervisor, unprompted."""
    aw, proxy, _, store = faulty
    direct = {STORE_ENV: store.url, HOST_ENV: "beta"}  # another host, on the server itself
    aw.start_standin("a1")
    rec = aw.wait_state("a1", "ready", timeout=40)
    sup, agent = rec.supervisor_pid, rec.agent_pid
    assert sup and agent
    before = len(aw.received())
    proxy.down()
    mid = aw.cli("send", "a1", "queued while alpha is away", "--no-ack", "--json", check=True,
                 env=direct).stdout
    mid = str(json.loads(mid)["id"])
    wait_for(lambda: ls(aw, **direct)["a1"]["liveness"] == "unreachable", 30,
             "alpha unreachable to beta")
    wait_for(lambda: "the store is unavailable" in supervisor_log(aw, "a1"), 30,
             "alpha's supervisor finding the store gone")
    # away: the agent and its supervisor run on, nothing new typed, the message waits
    assert os.path.exists(f"/proc/{sup}") and os.path.exists(f"/proc/{agent}")
    assert len(aw.received()) == before
    assert store.get(mid).status is Status.PENDING
    proxy.up()
    wait_for(lambda: store.get(mid).status.terminal, 60, "the waiting message delivered")
    assert store.get(mid).status is Status.DELIVERED and ended(store, mid) == ["delivered"]
    wait_for(lambda: ls(aw, **direct)["a1"]["liveness"] == "running", 30, "alpha up again")
    assert "".join(aw.received()).count("queued while alpha is away") == 1
    assert supervisor_pid(aw, "a1") == sup  # no person restarted anything
    # said once each way, in a line: not a traceback every few tenths of a second
    said = supervisor_log(aw, "a1")
    assert said.count("the store is unavailable") == 1 and said.count("the store is back") == 1
    assert "Traceback" not in said and "supervisor loop error" not in said
    # and it goes on as before
    mid = send(aw, "a1", "after the store came back")
    wait_for(lambda: store.get(mid).status is Status.DELIVERED, 60, "delivered after")


@pytest.fixture
def own_server(postgres: None) -> Iterator[pg.PgServer]:
    """A PostgreSQL of this test's own: it is restarted, the suite's is not."""
    try:
        server = pg.start()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


def test_a_postgresql_restart_mid_delivery_is_survived_by_every_host(
    own_server: pg.PgServer,
) -> None:
    """The server restarts while alpha's supervisor is in the middle of typing
    a batch (held at its paste's commit) and beta's has messages queued: both
    hosts reconnect by themselves, and every message is typed once and ends once."""
    url = own_server.url()
    store = PostgresMessageStore(url)
    point = FaultPoint(url, at_commit=False)  # mid-transaction: others may enqueue meanwhile
    with ExitStack() as stack:
        stack.callback(store.close)
        stack.callback(point.close)
        alpha = stack.enter_context(make_aw())
        beta = stack.enter_context(make_aw())
        host_env(alpha, url, "alpha")
        host_env(beta, url, "beta")
        alpha.start_standin("a1")
        beta.start_standin("b1")
        alpha.wait_state("a1", "ready", timeout=40)
        beta.wait_state("b1", "ready", timeout=40)
        sups = {"a1": supervisor_pid(alpha, "a1"), "b1": supervisor_pid(beta, "b1")}
        point.arm("delivering", "pasting")
        held = send(alpha, "a1", "a1: typed during the restart")
        point.writer()  # alpha's supervisor waits at the paste's commit
        sent = {held: (alpha, "a1: typed during the restart")}
        for i in range(4):
            text = f"b1: {i} around the restart"
            sent[send(alpha, "beta/b1", text)] = (beta, text)
        beats = {h.name: h.heartbeat for h in _hosts(url).values()}
        own_server.restart()  # every connection cut; the held transaction rolled back
        for i in range(2):  # sent once the server is back, from either host
            text = f"a1: {i} after the restart"
            sent[send(beta, "alpha/a1", text)] = (alpha, text)
        wait_for(lambda: all(store.get(m).status.terminal for m in sent), 90,
                 "every message ended")
        for mid, (aw, text) in sent.items():
            assert store.get(mid).status is Status.DELIVERED, store.get(mid)
            assert ended(store, mid) == ["delivered"]
            assert "".join(aw.received()).count(text) == 1, (text, aw.received())
        # both hosts beat again, through the same supervisors
        wait_for(lambda: all(h.heartbeat > beats[h.name] for h in _hosts(url).values()), 30,
                 "both hosts beating after the restart")
        assert sups == {"a1": supervisor_pid(alpha, "a1"), "b1": supervisor_pid(beta, "b1")}
        said = supervisor_log(alpha, "a1")  # the restart cut alpha's batch, and it said so
        assert "the store is unavailable" in said and "the store is back" in said


def _hosts(url: str) -> dict[str, hosts.HostSeen]:
    db = open_database(Path(os.devnull), url)
    try:
        return hosts.seen(db)
    finally:
        db.close()


def test_a_message_for_an_unreachable_host_waits_and_expires_on_its_ttl(
    faulty: tuple[AwEnv, Proxy, FaultPoint, PostgresMessageStore],
) -> None:
    """Alpha is cut off from the store; beta (reaching it) queues for alpha's
    session: the message waits, no other host types it, and it ends expired
    at its TTL while alpha is still away. Back, alpha types it never."""
    alpha, proxy, _, store = faulty
    with make_aw() as beta:
        host_env(beta, store.url, "beta")
        alpha.start_standin("a1")
        beta.start_standin("b1")
        alpha.wait_state("a1", "ready", timeout=40)
        beta.wait_state("b1", "ready", timeout=40)
        proxy.down()
        wait_for(lambda: ls(beta)["a1"]["liveness"] == "unreachable", 30, "alpha unreachable")
        mid = send(beta, "alpha/a1", "too late for alpha", "--ttl", "2")
        assert store.get(mid).status is Status.PENDING
        wait_for(lambda: store.get(mid).status.terminal, 60, "the message ended while alpha is away")
        assert store.get(mid).status is Status.EXPIRED and ended(store, mid) == ["expired"]
        assert ls(beta)["a1"]["liveness"] == "unreachable"  # it did not wait for alpha
        proxy.up()
        after = send(beta, "alpha/a1", "alpha is back")
        wait_for(lambda: store.get(after).status is Status.DELIVERED, 60, "delivered on alpha")
        typed = "".join(alpha.received())
        assert "too late for alpha" not in typed and typed.count("alpha is back") == 1
        assert "too late" not in "".join(beta.received())
        beta.cli("stop", "b1", check=True)


def test_a_host_cut_off_mid_transaction_holds_no_other_host_up(
    faulty: tuple[AwEnv, Proxy, FaultPoint, PostgresMessageStore],
) -> None:
    """Alpha goes silent in the middle of storing a message, holding the
    queue's admission lock, its connection open (nothing gets through the
    proxy, nothing is closed, TCP stays up: a frozen host, which no network
    timeout notices): the server ends alpha's transaction by itself, so
    beta's sends go on; alpha's message was not stored, and alpha is told so."""
    alpha, proxy, _, store = faulty
    point = FaultPoint(store.url, at_commit=False)  # held in the transaction, before its commit
    reg = Registry(alpha.paths.db_path, url=store.url, host="beta")
    try:
        reg.register(record("nobody"))  # a session of beta's, no supervisor needed
    finally:
        reg.close()
    point.arm("pending", None)  # a message being stored
    cut_off = subprocess.Popen(
        [sys.executable, "-m", "agentwrap", "send", "nobody", "from a host cut off"],
        env=alpha.env, cwd=alpha.project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        _, port = point.writer()
        proxy.stall(port)
        point.release()  # alpha's insert is done; its transaction now waits for alpha
        with make_aw() as beta:
            host_env(beta, store.url, "beta")
            done = beta.cli("send", "nobody", "from beta", "--json", timeout=120)
        assert done.returncode == 0, done.stderr
        assert store.get(json.loads(done.stdout)["id"]).status is Status.PENDING
        _, err = cut_off.communicate(timeout=60)  # its connection ended by the server
        assert cut_off.returncode != 0 and "cannot use the store" in err
        assert [m.content for m in store.peek("beta/nobody")] == ["from beta"]
    finally:
        cut_off.kill()
        cut_off.wait()
        point.close()


def test_a_move_out_of_postgresql_is_not_taken_for_a_vanished_host(
    tmp_path: Path, pg_server: pg.PgServer,
) -> None:
    """The idle-in-transaction timeout that frees a vanished host's locks
    does not end ``store migrate``, whose source transaction waits on purpose
    while the target is written: here the URL makes that timeout 50 ms, less
    than writing the source's rows into the target takes."""
    schema, url = pg_server.new_schema()
    strict = pg_server.url() + "&options=" + quote(
        f"-csearch_path={schema} -c idle_in_transaction_session_timeout=50", safe="")
    try:
        store = PostgresMessageStore(url)
        for n in range(0, 1000, 500):
            store.enqueue_many([(NewMessage(session=f"s{i}", content=f"message {i}"), Kind.CONTENT)
                                for i in range(n, n + 500)])
        store.close()
        for opened in (Registry(Path(os.devnull), url=url, host="h"),
                       AnswerStore(Path(os.devnull), url=url)):
            opened.close()
        report = migrate(Place(Path(os.devnull), strict), Place(tmp_path / "back.db"))
        assert report.rows["messages"] == 1000
    finally:
        pg_server.drop_schema(schema)
