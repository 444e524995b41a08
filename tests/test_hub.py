"""The hub and hosts that dial out (issue 38), with real processes: a hub
(``agentwrap hub``, TLS from a test CA, SQLite) and hosts with their own
state and runtime dirs, joined with one-time codes, each supervising a
tmux stand-in session whose store is the hub's, over the real link."""

from __future__ import annotations

import json
import os
import ssl
from pathlib import Path

import pytest
from conftest import AwEnv, make_aw
from support.hub_kit import (  # the fixtures by their names: hub, alpha, beta, _stop_hosts
    Hub,
    alpha_fixture,  # noqa: F401
    beta_fixture,  # noqa: F401
    host_client,
    hub_fixture,  # noqa: F401
    make_cert,
    send_on_hub,
    start_session,
    status_on_hub,
    stop_hosts,  # noqa: F401
)
from support.waiting import wait_for

from agentwrap.errors import ForeignSession, HubUnreachable
from agentwrap.hub.server import open_hub_store
from agentwrap.message import Phase, Status
from agentwrap.queue.link import HubStore, link_path, load_link

pytestmark = pytest.mark.usefixtures("tmux")


def test_two_joined_hosts_each_get_the_hubs_message_typed_once(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    hub.join(alpha, "alpha")
    hub.join(beta, "beta")
    link = link_path(alpha.paths.state_dir)
    assert link.stat().st_mode & 0o777 == 0o600
    start_session(alpha)
    start_session(beta)
    wait_for(lambda: hub.links() == 2, 60, "both hosts' links", on_timeout=hub.log)
    to_alpha = send_on_hub(hub, "alpha/api", "for alpha, once")
    to_beta = send_on_hub(hub, "beta/api", "for beta, once")
    wait_for(lambda: "for alpha, once" in " ".join(alpha.received()), 60, "alpha's delivery")
    wait_for(lambda: "for beta, once" in " ".join(beta.received()), 60, "beta's delivery")
    wait_for(lambda: status_on_hub(hub, to_alpha).terminal
             and status_on_hub(hub, to_beta).terminal, 60, "both recorded on the hub")
    assert status_on_hub(hub, to_alpha) in (Status.DELIVERED, Status.ACKNOWLEDGED)
    assert [r for r in alpha.received() if "for alpha" in r].__len__() == 1
    assert [r for r in beta.received() if "for beta" in r].__len__() == 1
    assert not any("for beta" in r for r in alpha.received())
    credential = json.loads(link.read_text())["credential"]
    assert credential not in hub.log()
    assert credential not in (hub.aw.paths.state_dir / "hub-keys.db").read_bytes().decode(
        "latin-1")


def test_a_join_code_reused_expired_or_for_another_hub_is_refused(
        hub: Hub, alpha: AwEnv, beta: AwEnv, tmp_path: Path) -> None:
    code = hub.invite()
    hub.join(alpha, "alpha", code)
    reused = beta.cli("join", hub.url, code, "--host", "beta")
    assert reused.returncode == 77 and "already used" in reused.stderr
    expired = beta.cli("join", hub.url, hub.invite(ttl=0), "--host", "beta")
    assert expired.returncode == 77 and "expired" in expired.stderr
    other = make_cert(tmp_path / "other", cn="another hub")
    wrong = hub.aw.cli("hub", "invite", "--tls-cert", str(other.cert), check=True).stdout.strip()
    refused = beta.cli("join", hub.url, wrong, "--host", "beta")
    assert refused.returncode == 77 and "nothing was sent" in refused.stderr
    assert not link_path(beta.paths.state_dir).exists()
    secret = wrong.split(".")[1]
    assert secret not in refused.stderr + refused.stdout


def test_a_host_acting_for_another_hosts_session_is_refused_and_nothing_is_typed(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    hub.join(alpha, "alpha")
    hub.join(beta, "beta")
    waiting = send_on_hub(hub, "beta/api", "only beta may take this")
    store = HubStore(host_client(alpha))
    try:
        with pytest.raises(ForeignSession):
            store.claim_batch("beta/api", "b-stolen", 10_000)
        with pytest.raises(ForeignSession):
            store.get(waiting)
        with pytest.raises(ForeignSession):
            store.finish(Status.DELIVERED, "stolen", message_ids=[waiting])
        assert store.claim_batch("api", "b-own", 10_000) == []  # its own: nothing waits
    finally:
        store.close()
    assert status_on_hub(hub, waiting) is Status.PENDING
    beta_store = HubStore(host_client(beta))
    try:  # beta's own claim takes it, and a repeat of that claim is the same batch
        first = beta_store.claim_batch("api", "b-1", 10_000)
        again = beta_store.claim_batch("api", "b-1", 10_000)
        assert [m.id for m in first] == [m.id for m in again] == [waiting]
        with pytest.raises(ForeignSession):
            HubStore(host_client(alpha)).set_phase("b-1", Phase.PASTING)
    finally:
        beta_store.close()


def test_a_garbage_frame_closes_that_link_only(hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    hub.join(alpha, "alpha")
    hub.join(beta, "beta")
    link = load_link(alpha.paths.state_dir)
    assert link is not None
    ctx = link.ssl_context()
    assert isinstance(ctx, ssl.SSLContext)
    good = HubStore(host_client(beta))
    try:
        with connect(link.link_url, ssl=ctx, subprotocols=["agentwrap.link.v1"],  # type: ignore[list-item]
                     additional_headers={"Authorization": f"Bearer {link.credential}",
                                         "Agentwrap-Host": "alpha"}) as ws:
            ws.send("{not json at all")
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=30)
                ws.recv(timeout=30)
        assert hub.healthy() is not None
        assert good.pending_count("api") == 0  # beta's link still answers
    finally:
        good.close()


def test_the_hub_killed_and_restarted_mid_delivery_types_each_message_once(
        hub: Hub, alpha: AwEnv) -> None:
    hub.join(alpha, "alpha")
    start_session(alpha)
    wait_for(lambda: hub.links() == 1, 60, "alpha's link", on_timeout=hub.log)
    tags = [f"tag-{i:02d}" for i in range(8)]
    ids = [send_on_hub(hub, "alpha/api", f"message {t}") for t in tags]
    wait_for(lambda: any(t in " ".join(alpha.received()) for t in tags), 60, "a first delivery")
    hub.kill()  # kill -9, mid-delivery: the rest wait in the hub's store
    hub.start()
    wait_for(lambda: all(status_on_hub(hub, i).terminal for i in ids), 120,
             "every message ended on the hub", on_timeout=hub.log)
    got = " ".join(alpha.received())
    for t in tags:
        assert got.count(t) == 1, (t, alpha.received())
    assert all(status_on_hub(hub, i) in (Status.DELIVERED, Status.ACKNOWLEDGED) for i in ids)


def test_while_the_hub_is_down_store_calls_raise_store_unavailable(
        hub: Hub, alpha: AwEnv) -> None:
    hub.join(alpha, "alpha")
    client = host_client(alpha)
    store = HubStore(client)
    try:
        hub.kill()
        wait_for(lambda: not client.up, 30, "the link to notice")
        with pytest.raises(HubUnreachable) as exc:
            store.claim_batch("api", "b-down", 10_000)
        assert exc.value.exit_code == 75
        hub.start()
        assert client.wait_up(60)
        assert store.claim_batch("api", "b-up", 10_000) == []
    finally:
        store.close()


def test_revoking_a_host_cuts_its_link_and_fails_its_pending_messages(
        hub: Hub, alpha: AwEnv) -> None:
    hub.join(alpha, "alpha")
    client = host_client(alpha)
    waiting = send_on_hub(hub, "alpha/api", "never to be typed")
    try:
        hub.aw.cli("hub", "revoke", "alpha", check=True)
        wait_for(lambda: not client.up, 30, "the revoked link to close")
        store = open_hub_store(hub.aw.paths.state_dir)
        try:
            msg = store.get(waiting)
        finally:
            store.close()
        assert msg.status is Status.FAILED and "alpha" in msg.detail
        wait_for(lambda: client.refused is not None, 30, "the credential refused on reconnect")
    finally:
        client.close()
    listed = json.loads(hub.aw.cli("hub", "hosts", "--json", check=True).stdout)
    assert [h["name"] for h in listed if h["revoked"]] == ["alpha"]


def test_plain_http_is_refused_off_loopback(alpha: AwEnv) -> None:
    got = alpha.cli("hub", "--listen", "0.0.0.0:0")
    assert got.returncode == 78 and "not loopback" in got.stderr
    assert os.environ.get("AGENTWRAP_NEVER") is None


def test_a_hub_on_postgresql_delivers_a_joined_hosts_message_once(
        pg_url: str, alpha: AwEnv, tmp_path: Path) -> None:
    with make_aw() as aw:
        hub = Hub(aw, make_cert(tmp_path / "tls"), store_url=pg_url).start()
        try:
            hub.join(alpha, "alpha")
            start_session(alpha)
            wait_for(lambda: hub.links() == 1, 60, "alpha's link", on_timeout=hub.log)
            sent = send_on_hub(hub, "alpha/api", "through the hub's PostgreSQL")
            wait_for(lambda: status_on_hub(hub, sent).terminal, 90, "delivered",
                     on_timeout=hub.log)
            assert status_on_hub(hub, sent) in (Status.DELIVERED, Status.ACKNOWLEDGED)
            assert [r for r in alpha.received() if "hub's PostgreSQL" in r].__len__() == 1
            assert not (aw.paths.state_dir / "hub.db").exists()
        finally:
            hub.kill()
