"""A team hub on PostgreSQL (issue 38): a fixed pool of connections however many
hosts link, two hub processes on one database that are one hub to every host
(keys and roster there too, a host's link trying each hub in turn), the hub's
expiry sweeper, and ``enqueue_many`` as one call and one transaction over the link.

Real hub processes, the real link client, real PostgreSQL (tests/support/pg.py);
the two-hub case runs real supervisor hosts with stand-in sessions."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import AwEnv, make_aw
from support import pg
from support.hub_kit import (  # the fixtures by their names: hub, alpha, beta, _stop_hosts
    Hub,
    alpha_fixture,  # noqa: F401
    beta_fixture,  # noqa: F401
    host_client,
    hub_fixture,  # noqa: F401
    make_cert,
    start_session,
    stop_hosts,  # noqa: F401
)
from support.waiting import wait_for

from agentwrap.errors import QueueError
from agentwrap.hub.scope import HostCalls
from agentwrap.hub.server import cert_pin, hub_keys, open_hub_store
from agentwrap.message import Kind, NewMessage, Status
from agentwrap.queue import link_protocol as wire
from agentwrap.queue.link import HubLink, HubStore, LinkClient
from agentwrap.queue.pgpool import HUB_APPLICATION, POOL_SIZE


def hub_connections(server: pg.PgServer) -> int:
    got = server.psql("SELECT count(*) FROM pg_stat_activity"
                      f" WHERE application_name = '{HUB_APPLICATION}'")
    return int(got.strip("[](),"))


def joined_links(hub: Hub, names: list[str]) -> list[HubLink]:
    """Hosts joined in-process on the hub's own keys (a join per host through the
    CLI would cost a process each); each a real link to the real hub process."""
    store = open_hub_store(hub.aw.paths.state_dir, hub.store_url, pool_size=1)
    try:
        keys = hub_keys(hub.aw.paths.state_dir, store)
        pin = cert_pin(hub.cert.cert)
        creds = {n: keys.join(keys.invite(pin, n), n) for n in names}
    finally:
        store.close()
    pem = hub.cert.cert.read_text()
    return [HubLink(hub.url, n, creds[n], pem) for n in names]


def test_a_postgresql_hub_holds_at_most_its_pool_however_many_hosts_link(
        pg_server: pg.PgServer, pg_url: str, tmp_path: Path) -> None:
    hosts, sessions = 12, 6
    with make_aw() as aw:
        hub = Hub(aw, make_cert(tmp_path / "tls"), store_url=pg_url).start()
        clients: list[LinkClient] = []
        try:
            links = joined_links(hub, [f"h{i}" for i in range(hosts)])
            clients = [LinkClient(link).start() for link in links]
            for c in clients:
                assert c.wait_up(60)
            peak, done = [0], threading.Event()

            def sample() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], hub_connections(pg_server))
                    done.wait(0.05)

            def work(client: LinkClient) -> None:
                store = HubStore(client)
                names = [f"s{j}" for j in range(sessions)]
                for _ in range(3):
                    store.register([{"name": n, "state": "idle"} for n in names], 5.0)
                    for n in names:
                        store.enqueue(NewMessage(session=n, content=f"to {n}"))
                        store.peek(n)

            sampler = threading.Thread(target=sample)
            sampler.start()
            workers = [threading.Thread(target=work, args=(c,)) for c in clients]
            for w in workers:
                w.start()
            for w in workers:
                w.join(300)
            done.set()
            sampler.join()
            assert 1 <= peak[0] <= POOL_SIZE, peak
            assert 1 <= hub_connections(pg_server) <= POOL_SIZE
            # every host's sessions are on the hub, seen from any one link
            seen = HubStore(clients[0]).sessions()
            assert sum(len(h["sessions"]) for h in seen["hosts"]) == hosts * sessions
            assert HubStore(clients[-1]).pending_count("h0/s0") == 3
        finally:
            for c in clients:
                c.close()
            hub.kill()


def test_the_hubs_sweeper_expires_an_unreachable_hosts_message_once(hub: Hub) -> None:
    store = open_hub_store(hub.aw.paths.state_dir, hub.store_url)
    try:
        msg, _ = store.enqueue(NewMessage(session="ghost/api", content="never linked",
                                          ttl_s=1.0))
        wait_for(lambda: store.get(msg.id).status is Status.EXPIRED, 60,
                 "the hub's sweep", on_timeout=hub.log)
        ended = store.events(0, kinds=["message.ended"], subject=msg.id)
        assert [e.data["status"] for e in ended] == ["expired"]
    finally:
        store.close()


class InProcessLink:
    """A link client that hands each call to the hub's :class:`HostCalls` as
    the wire would (frames and all), counting the calls."""

    def __init__(self, calls: HostCalls) -> None:
        self.calls, self.made = calls, []  # type: ignore[var-annotated]
        self.link = HubLink("http://127.0.0.1:1", calls.host, "unused")

    def call(self, method: str, **params: Any) -> Any:
        self.made.append(method)
        out = json.loads(self.calls.answer(wire.request(1, method, params)))
        if "error" in out:
            raise wire.error_from_wire(out["error"])
        return out["result"]


def test_enqueue_many_over_the_link_is_one_call_and_one_transaction(tmp_path: Path) -> None:
    store = open_hub_store(tmp_path)
    try:
        link = InProcessLink(HostCalls(store, "alpha"))
        before = store.last_event_id()
        got = HubStore(link).enqueue_many([  # type: ignore[arg-type]
            (NewMessage(session="api", content="one"), Kind.CONTENT),
            (NewMessage(session="api", content="x" * 10_000_000), Kind.CONTENT),  # refused
            (NewMessage(session="beta/api", content="two"), Kind.CONTENT),
        ])
        assert link.made == ["enqueue_many"]
        assert isinstance(got[1], QueueError)
        ok = [g for g in got if not isinstance(g, QueueError)]
        assert [(m.session, m.content) for m, _ in ok] == [("alpha/api", "one"),
                                                             ("beta/api", "two")]
        queued = store.events(before, kinds=["message.queued"])
        assert len(queued) == 2
    finally:
        store.close()


@pytest.mark.usefixtures("tmux")
def test_two_hubs_on_one_postgresql_are_one_hub_and_killing_one_loses_nothing(
        pg_url: str, alpha: AwEnv, beta: AwEnv, tmp_path: Path) -> None:
    cert = make_cert(tmp_path / "tls")  # one service: both hubs show its certificate
    with make_aw() as aw_a, make_aw() as aw_b:
        hub_a = Hub(aw_a, cert, store_url=pg_url).start()
        hub_b = Hub(aw_b, cert, store_url=pg_url).start()
        try:
            hub_a.join(alpha, "alpha", also=(hub_b,))  # a code made by hub A's command
            hub_b.join(beta, "beta")  # ... and one by B's: the keys are the database's
            start_session(alpha)
            start_session(beta)
            wait_for(lambda: hub_a.links() == 1 and hub_b.links() == 1, 90, "both links",
                     on_timeout=lambda: hub_a.log() + hub_b.log())
            # through hub B, beta's link sees alpha's session, which reports to hub A
            client = host_client(beta)
            try:
                wait_for(lambda: {h["host"] for h in HubStore(client).sessions()["hosts"]}
                         == {"alpha", "beta"}, 60, "both hosts in the roster")
            finally:
                client.close()
            store = open_hub_store(aw_b.paths.state_dir, pg_url)
            try:
                sent = [store.enqueue(NewMessage(session="alpha/api", content=f"tag-{i}"))[0].id
                        for i in range(6)]
                ghost = store.enqueue(NewMessage(session="ghost/api", content="nobody",
                                                 ttl_s=2.0))[0].id
                wait_for(lambda: any(store.get(m).status is not Status.PENDING for m in sent),
                         90, "a delivery under way", on_timeout=hub_a.log)
                hub_a.kill()  # kill -9, mid-delivery: alpha's link goes to hub B
                wait_for(lambda: hub_b.links() == 2, 90, "alpha relinked to hub B",
                         on_timeout=hub_b.log)
                wait_for(lambda: all(store.get(m).status.terminal for m in sent), 120,
                         "every message ended", on_timeout=hub_b.log)
                assert {store.get(m).status for m in sent} <= {Status.DELIVERED,
                                                              Status.ACKNOWLEDGED}
                wait_for(lambda: store.get(ghost).status is Status.EXPIRED, 60, "ghost expired")
                for m in [*sent, ghost]:
                    assert len(store.events(0, kinds=["message.ended"], subject=m)) == 1
            finally:
                store.close()
            got = re.findall(r"\btag-(\d+)\b", "\n".join(alpha.received()))
            assert sorted(got) == [str(i) for i in range(6)], got  # each typed once
        finally:
            hub_a.kill()
            hub_b.kill()
