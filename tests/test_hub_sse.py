"""A host's state change reaches the hub's event stream at once (issue 38):
the hub's store announces each commit a link made on the hub's own event bus,
so ``GET /api/events`` (and the dashboard, and ``events -f`` through the hub)
is woken by it, not by its keep-alive recheck every 15 s.

A real hub process (SQLite, and PostgreSQL on its pool), a host joined with a
one-time code and its real link client reporting a state change, a real SSE
client on the hub's API. No clock threshold: the event must come before the
stream's first keep-alive comment (what an unwoken stream sends first)."""

from __future__ import annotations

import json
import ssl
import threading
from pathlib import Path

import httpx
import pytest
from conftest import AwEnv, make_aw
from support.hub_kit import Hub, alpha_fixture, host_client, make_cert  # noqa: F401
from support.waiting import wait_for

from agentwrap.queue.link import HubStore


def read_stream(hub: Hub, lines: list[str], up: threading.Event) -> None:
    token = (hub.aw.paths.state_dir / "api-token").read_text().strip()
    ctx = ssl.create_default_context(cafile=str(hub.cert.ca))
    ctx.check_hostname = False
    try:
        with httpx.stream("GET", hub.url + "/api/events", verify=ctx,
                          headers={"Authorization": f"Bearer {token}"},
                          timeout=httpx.Timeout(10, read=60)) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                up.set()
                lines.append(line)
                if line.startswith(": keepalive") or '"state": "busy"' in line:
                    return
    except httpx.HTTPError as exc:
        lines.append(f"! {exc!r}")


# the PostgreSQL case reaches its fixture by name at run time, so its layer
# marker is given here (the fast layer starts no database server)
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_a_hosts_state_change_wakes_the_hubs_event_stream(
        backend: str, alpha: AwEnv, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else ""
    with make_aw() as aw:
        hub = Hub(aw, make_cert(tmp_path / "tls"), store_url=url).start()
        try:
            hub.join(alpha, "alpha")
            client = host_client(alpha)
            try:
                store = HubStore(client)
                store.register([{"name": "api", "state": "idle"}], 5.0)
                lines: list[str] = []
                up = threading.Event()
                reader = threading.Thread(target=read_stream, args=(hub, lines, up))
                reader.start()
                wait_for(up.is_set, 30, "the stream open")
                store.register([{"name": "api", "state": "busy"}], 5.0)
                reader.join(60)
            finally:
                client.close()
            events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
            assert [(e["type"], e["session"], e["data"]["state"]) for e in events] == [
                ("session.state", "alpha/api", "busy")], lines
            assert not any(line.startswith(": keepalive") for line in lines), lines
        finally:
            hub.kill()


def test_a_hosts_reporter_reports_a_change_on_its_bus_at_once_not_at_its_period(
        alpha: AwEnv, tmp_path: Path) -> None:
    """The host's reporter (``report_every`` with the host's event bus, as a
    supervisor starts it) reports when the host's registry announces a commit:
    with a 600 s period, the new state still reaches the hub's stream before
    its first keep-alive."""
    from agentwrap import events

    with make_aw() as aw:
        hub = Hub(aw, make_cert(tmp_path / "tls"), store_url="").start()
        try:
            hub.join(alpha, "alpha")
            client = host_client(alpha)
            try:
                store = HubStore(client)
                state = {"api": "idle"}
                alpha.paths.events_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                store.report_every(600.0, lambda: [{"name": "api", "state": state["api"]}],
                                   events_dir=alpha.paths.events_dir)

                def reported() -> bool:
                    hosts = store.sessions()["hosts"]
                    return any(h["host"] == "alpha" and h["sessions"] for h in hosts)

                wait_for(reported, 30, "the reporter's first report")
                lines: list[str] = []
                up = threading.Event()
                reader = threading.Thread(target=read_stream, args=(hub, lines, up))
                reader.start()
                wait_for(up.is_set, 30, "the stream open")
                state["api"] = "busy"
                events.announce(alpha.paths.events_dir)  # as the registry does at a commit
                reader.join(60)
            finally:
                store.close()
                client.close()
            states = [json.loads(line[6:])["data"]["state"] for line in lines
                      if line.startswith("data: ")]
            assert states == ["busy"], lines
            assert not any(line.startswith(": keepalive") for line in lines), lines
        finally:
            hub.kill()
