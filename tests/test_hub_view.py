"""One view through the hub (issue 38): ``agentwrap hub`` serves the HTTP API and
the dashboard over its store and every host's sessions, and asks a host over
its link for what only that host can do (a screen, stop). Real hub and host
processes (support.hub_kit), the real link, tmux stand-in sessions."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
import pytest
from conftest import AwEnv
from support.hub_kit import (  # the fixtures by their names: hub, alpha, beta, _stop_hosts
    HOSTS,
    Hub,
    HubApi,
    alpha_fixture,  # noqa: F401
    beta_fixture,  # noqa: F401
    host_client,
    hub_fixture,  # noqa: F401
    spki_pin,
    start_session,
    status_on_hub,
    stop_hosts,  # noqa: F401
    two_hosts_on_the_hub,
)
from support.waiting import wait_for

from agentwrap.hub.server import open_hub_store
from agentwrap.message import Status
from agentwrap.queue import link_protocol as wire

pytestmark = pytest.mark.usefixtures("tmux")


def screen_text(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    return " ".join("".join(run["text"] for run in line) if isinstance(line, list)
                    else json.dumps(line) for line in r.json()["lines"])


def test_the_hubs_api_lists_every_host_shows_a_remote_screen_and_sends_once(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    api = two_hosts_on_the_hub(hub, alpha, beta)
    # a screen only beta holds, asked of beta over its link
    got = wait_for(lambda: (r := api.screen("beta/web")).status_code == 200 and r, 60,
                   "beta's screen through the hub", on_timeout=hub.log)
    assert got.json()["lines"], got.text
    # a send on the hub's API, typed once by alpha's supervisor
    r = api.client.post("/api/sessions/alpha%2Fapi/input",
                        json={"content": "from the hub's API, once",
                              "source": "webhook", "sourceId": "test"})
    assert r.status_code == 201, r.text
    message_id = r.json()["id"]
    wait_for(lambda: "from the hub's API, once" in " ".join(alpha.received()), 60,
             "alpha's delivery", on_timeout=hub.log)
    wait_for(lambda: status_on_hub(hub, message_id).terminal, 60, "recorded on the hub")
    assert status_on_hub(hub, message_id) in (Status.DELIVERED, Status.ACKNOWLEDGED)
    assert [x for x in alpha.received() if "from the hub's API" in x].__len__() == 1
    assert not any("from the hub's API" in x for x in beta.received())
    # the states hosts report reach the hub's event stream (its page, `events -f`)
    store = open_hub_store(hub.aw.paths.state_dir)
    try:
        states = store.events(0, session="beta/web", kinds=["session.state"])
    finally:
        store.close()
    assert states and states[0].data.get("state"), states
    # the dashboard's page is served by the hub too (the person's login as on `serve`)
    page = api.client.get("/")
    assert page.status_code == 200 and "<html" in page.text.lower()


def test_a_host_down_is_unreachable_since_on_the_hub_and_the_other_is_served(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    api = two_hosts_on_the_hub(hub, alpha, beta)
    HOSTS[1].kill()  # beta's supervisor host (started second), kill -9: its link and reports stop
    HOSTS[1].wait(30)
    row = wait_for(lambda: (r := api.row("beta", "web")) and r["hostLiveness"] == "unreachable"
                   and r, 90, "beta judged unreachable by the hub's API", on_timeout=hub.log)
    assert isinstance(row["unreachableSince"], float)
    down = api.screen("beta/web")
    assert down.status_code == 503, down.text
    assert down.json()["error"] == "Host unreachable" and "unreachable since" in down.text
    stop = api.client.post("/api/sessions/beta%2Fweb/stop")
    assert stop.status_code == 503 and stop.json()["error"] == "Host unreachable"
    # alpha is served as before: listed running, its screen read over its link
    assert (api.row("alpha", "api") or {}).get("hostLiveness") != "unreachable"
    assert screen_text(api.screen("alpha/api")) is not None


def test_a_host_refuses_a_hub_request_for_a_session_not_its_own(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    """Straight at the host's code that serves the link: a session of another host,
    or one this host does not run, is refused with nothing read or stopped."""
    from agentwrap.errors import ForeignSession, SessionNotFound
    from agentwrap.sessions.hub_requests import HostRequests
    from agentwrap.sessions.lifecycle import stop_many

    api = two_hosts_on_the_hub(hub, alpha, beta)
    stopped: list[list[str]] = []

    def stop(paths: Any, names: list[str]) -> Any:
        stopped.append(names)
        return stop_many(paths, names)

    served = HostRequests(alpha.paths, "alpha", stop=stop)
    with pytest.raises(ForeignSession):
        served("screen", {"session": "beta/web"})
    with pytest.raises(ForeignSession):
        served("stop", {"session": "beta/web"})
    with pytest.raises(SessionNotFound):
        served("stop", {"session": "web"})  # beta's name, not a session alpha runs
    with pytest.raises(TypeError):
        served("keys", {"session": "api"})
    assert stopped == []
    assert served("screen", {"session": "alpha/api"})["text"]
    # and through the hub: beta's session is beta's to stop, and stops there
    r = api.client.post("/api/sessions/beta%2Fweb/stop")
    assert r.status_code == 200, r.text
    assert r.json()["host"] == "beta" and r.json()["name"] == "web"
    assert (api.row("alpha", "api") or {}).get("ended") is None


def test_garbage_hub_frames_on_a_hosts_link_type_nothing_and_crash_nothing(
        hub: Hub, alpha: AwEnv) -> None:
    """A hostile hub's frames, fed to the host's link as they would arrive: a
    frame that is not a request closes the link (False), a request for a method
    or session the host does not serve is refused, and nothing is typed."""
    hub.join(alpha, "alpha")
    start_session(alpha, "api")
    from agentwrap.sessions.hub_requests import HostRequests
    from agentwrap.sessions.lifecycle import stop_many

    client = host_client(alpha)
    try:
        client.serve = HostRequests(alpha.paths, "alpha", stop=stop_many)
        garbage = ["not json", "[1,2]", '{"jsonrpc":"1.0","id":"hub-1","method":"screen"}',
                   '{"jsonrpc":"2.0","id":7,"method":"stop","params":{"session":"api"}}',
                   '{"jsonrpc":"2.0","id":"hub-2","method":"stop","params":["api"]}',
                   '{"jsonrpc":"2.0","id":"hub-3","method":5}', "[" * 100_000]
        for frame in garbage:
            assert client._answered(frame) is False, frame
        replies: list[str] = []

        class Socket:
            async def send(self, frame: str) -> None:
                replies.append(frame)

        import asyncio

        async def serve_each() -> None:
            for call_id, method, params in [
                    ("hub-4", "keys", {"session": "api", "keys": "rm -rf /\r"}),
                    ("hub-5", "stop", {"session": "beta/api"}),
                    ("hub-6", "stop", {"session": "../api"}),
                    ("hub-7", "screen", {"session": "api", "extra": "$(reboot)"})]:
                await client._serve_request(call_id, method, params)

        saved, client._ws = client._ws, Socket()
        try:
            asyncio.run(serve_each())
        finally:
            client._ws = saved
        answers = [json.loads(r) for r in replies]
        assert [a["id"] for a in answers] == ["hub-4", "hub-5", "hub-6", "hub-7"]
        assert all("error" in a for a in answers), answers
        assert answers[0]["error"]["code"] == wire.NO_METHOD
        assert answers[1]["error"]["data"]["error"] == "ForeignSession"
    finally:
        client.close()
    assert not any("rm -rf" in x or "reboot" in x for x in alpha.received())
    assert "api" in alpha.cli("ls", check=True).stdout  # still running


@pytest.mark.usefixtures("tmux")
def test_the_hubs_dashboard_shows_both_hosts_and_one_unreachable_since(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    """The hub's page in a real Chromium (TLS from the test CA, its key pinned):
    logged in as on `serve`, both hosts' sessions listed; beta's host killed, its
    session is shown unreachable since, alpha's as before."""
    from support.browser import chromium

    two_hosts_on_the_hub(hub, alpha, beta)
    link = hub.aw.cli("token", "--link", "--url", hub.url, check=True).stdout.strip()
    flags = (f"--ignore-certificate-errors-spki-list={spki_pin(hub.cert.cert)}",)
    with contextlib.contextmanager(chromium)("hub-two-hosts", flags=flags) as page:
        page.open(link)
        page.wait(lambda: page.shown("#main") and page.text("#conn") == "live",
                  "logged in on the hub's page, live")
        alpha_row = '#session-list li[data-host="alpha"][data-session="api"]'
        beta_row = '#session-list li[data-host="beta"][data-session="web"]'
        page.wait(lambda: page.one(alpha_row) and page.one(beta_row),
                  "both hosts' sessions on the hub's page")
        page.shot("hub-two-hosts")
        HOSTS[1].kill()  # beta's supervisor host (started second): its reports stop
        HOSTS[1].wait(30)
        api = HubApi(hub)
        wait_for(lambda: (api.row("beta", "web") or {}).get("hostLiveness") == "unreachable",
                 120, "beta judged unreachable by the hub")
        # a host's silence is judged when the list is read (no event says it): read again
        page.open(hub.url + "/")
        page.wait(lambda: page.one(beta_row) and "unreachable since" in page.text(beta_row),
                  "beta's session shown unreachable since on the hub's page")
        assert "unreachable" not in page.text(alpha_row)
        page.shot("hub-one-host-unreachable")
