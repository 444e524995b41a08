"""Every per-session act through the hub (issue 38, s44-hubans): a question a
session on host beta shows is answered from host alpha's CLI and from the
hub's API, taken once by beta's own intake; beta's stop audited there with who
asked; the hub's page hears at once that a host went silent, and a joined host
reads it (``events``); a message queued while a host's link was down is
claimed as the link comes back, not at the next poll. Real hub and host
processes (support.hub_kit), the real link, tmux stand-in sessions."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest
from conftest import AwEnv
from support.hub_kit import (  # the fixtures by their names: hub, alpha, beta, _stop_hosts
    HOSTS,
    Hub,
    HubApi,
    alpha_fixture,  # noqa: F401
    beat_fast,
    beta_fixture,  # noqa: F401
    host_client,
    hub_fixture,  # noqa: F401
    send_on_hub,
    settled_on_slow_poll,
    start_session,
    status_on_hub,
    stop_hosts,  # noqa: F401
)
from support.waiting import wait_for

from agentwrap.errors import AgentwrapError, ForeignSession, LinkProtocolError
from agentwrap.message import Status

pytestmark = pytest.mark.usefixtures("tmux")


def choices(aw: AwEnv) -> list[dict[str, Any]]:
    """What the stand-in recorded for each dialog it closed, in order."""
    path = aw.log.with_name(aw.log.name + ".answers")
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def hosts_with_a_question(hub: Hub, alpha: AwEnv, beta: AwEnv) -> HubApi:
    hub.join(alpha, "alpha")
    hub.join(beta, "beta")
    beat_fast(alpha)
    beat_fast(beta)
    start_session(alpha, "api")
    start_session(beta, "web", extra=("--dialog-on", "OPENDIALOG"))
    api = HubApi(hub)
    wait_for(lambda: api.row("alpha", "api") and api.row("beta", "web"), 90,
             "both hosts' sessions listed by the hub's API", on_timeout=hub.log)
    beta.wait_state("web", "ready", timeout=60)
    return api


def open_dialog(hub: Hub, beta: AwEnv, n: int) -> dict[str, Any]:
    """beta's stand-in opens its dialog (a message through the hub); the question
    beta's registry then holds, once the hub knows it too."""
    sent = send_on_hub(hub, "beta/web", f"please OPENDIALOG {n}")
    wait_for(lambda: status_on_hub(hub, sent).terminal, 60, "the dialog's message delivered",
             on_timeout=hub.log)
    q = wait_for(lambda: beta.registry().get("web").question, 30, "beta's open question")
    return dict(q)


def audit(aw: AwEnv) -> list[dict[str, Any]]:
    path = aw.paths.audit_log
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_question_on_beta_is_answered_from_alphas_cli_and_the_hubs_api_once_each(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    api = hosts_with_a_question(hub, alpha, beta)
    q = open_dialog(hub, beta, 1)
    # a stale question id is refused by beta's intake, through the hub: nothing typed
    res = alpha.cli("answer", "beta/web", "--option", "2", "--question", "0123456789ab")
    assert res.returncode == 5 and "asks something else now" in res.stderr, (res.stderr,
                                                                          hub.log())
    assert choices(beta) == []
    # from alpha's CLI: relayed by the hub to beta, whose intake takes it; the wait
    # for its outcome asks beta again (HOST/ID) until it is applied
    res = alpha.cli("answer", "beta/web", "--option", "2", "--question", q["id"], "--json",
                    "--timeout", "60")
    assert res.returncode == 0, (res.stdout, res.stderr, hub.log())
    got = json.loads(res.stdout)
    assert got["status"] == "applied" and got["id"].startswith("beta/"), got
    assert got["session"] == "beta/web" and got["questionId"] == q["id"]
    assert [c["choice"] for c in choices(beta)] == ["chose 2. No"]  # typed once, on beta
    assert not alpha.paths.db_path.exists() or not _answers(alpha)  # nothing kept on alpha
    (line,) = [a for a in audit(beta) if a["event"] == "answer_requested"]
    assert line["source"] == "hub:alpha:cli" and line["session"] == "web"
    # the status, read from alpha again afterwards: beta's record of it
    status = alpha.cli("answer", "beta/web", "--option", "1")  # no question open now
    assert status.returncode == 4 and "no open question" in status.stderr, status.stderr
    # from the hub's API (what its page posts): the same intake on beta
    q2 = open_dialog(hub, beta, 2)
    r = api.client.post("/api/sessions/beta%2Fweb/answer", params={"wait": 30},
                        json={"option": 1, "questionId": q2["id"]})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "applied" and r.json()["id"].startswith("beta/"), r.json()
    assert [c["choice"] for c in choices(beta)] == ["chose 2. No", "chose 1. Yes"]
    # the hub's API refuses the stale one as beta refused it: 409, nothing typed
    r = api.client.post("/api/sessions/beta%2Fweb/answer", json={"option": 1,
                                                                 "questionId": q2["id"]})
    assert r.status_code == 409, r.text
    assert len(choices(beta)) == 2
    hub_audit = [a for a in audit(hub.aw) if a["event"] == "answer_requested"]
    assert [a["session"] for a in hub_audit] == ["beta/web"] and hub_audit[0]["via"] == "hub"
    # alpha's own session is not touched by any of it
    assert choices(alpha) == []


def _answers(aw: AwEnv) -> list[Any]:
    import sqlite3

    with sqlite3.connect(aw.paths.db_path) as db:
        try:
            return db.execute("SELECT id FROM answers").fetchall()
        except sqlite3.OperationalError:  # no answers table: nothing kept
            return []


def test_a_stop_from_the_hub_is_audited_on_the_host_naming_who_asked(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    api = hosts_with_a_question(hub, alpha, beta)
    # what a host may not have the hub run on another: a stop; an act for a third
    # host's session; a method that is no relay's. Each refused, nothing done
    client = host_client(alpha)
    try:
        for host, request, params, refusal in [
                ("beta", "stop", {"session": "web"}, ForeignSession),
                ("beta", "answer", {"session": "alpha/api", "option": 1}, ForeignSession),
                ("beta", "keys", {"session": "web", "keys": "rm -rf /\r"}, ForeignSession),
                ("beta", "answer", {"session": "web", "option": [1, {"x": 2}]},
                 LinkProtocolError),
                ("../beta", "screen", {"session": "web"}, AgentwrapError)]:
            with pytest.raises(refusal):
                client.call("relay", host=host, request=request, params=params)
    finally:
        client.close()
    assert beta.registry().get("web").ended is None and choices(beta) == []
    assert not any("rm -rf" in x for x in beta.received())
    r = api.client.post("/api/sessions/beta%2Fweb/stop")
    assert r.status_code == 200, r.text
    (line,) = [a for a in audit(beta) if a["event"] == "stopped"]
    assert line["session"] == "web" and line["via"] == "hub"
    assert line["by"].startswith("hub:"), line


def sse_events(hub: Hub, api: HubApi, seen: list[tuple[float, dict[str, Any]]],
               ready: threading.Event, stop: threading.Event) -> None:
    """Read the hub's event stream (as its page does) into ``seen``, each with
    when; the hub's stopping at the test's end cuts the stream, which is its end."""
    with api.client.stream("GET", "/api/events", timeout=httpx.Timeout(30, read=None)) as r:
        ready.set()
        kind = ""
        try:
            for line in r.iter_lines():
                if stop.is_set():
                    return
                if line.startswith("event: "):
                    kind = line[len("event: "):]
                elif line.startswith("data: "):
                    seen.append((time.monotonic(), {"type": kind, **json.loads(line[6:])}))
        except httpx.RemoteProtocolError:
            if not stop.is_set():
                raise


def test_the_hubs_page_hears_at_once_that_a_host_went_silent_and_a_host_reads_it(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    api = hosts_with_a_question(hub, alpha, beta)
    seen: list[tuple[float, dict[str, Any]]] = []
    ready, stop = threading.Event(), threading.Event()
    reader = threading.Thread(target=sse_events, args=(hub, api, seen, ready, stop),
                              daemon=True)
    reader.start()
    assert ready.wait(30)
    time.sleep(1)  # the stream subscribed (its first read) before the host goes
    killed = time.monotonic()
    HOSTS[1].kill()  # beta's supervisor host, kill -9: its link closes with it
    HOSTS[1].wait(30)
    silent = wait_for(lambda: next((e for t, e in seen if e["type"] == "host.silent"), None),
                      60, "host.silent on the hub's event stream", on_timeout=hub.log)
    heard = next(t for t, e in seen if e["type"] == "host.silent")
    stop.set()
    assert silent["data"]["host"] == "beta" and "link" in silent["data"]["reason"], silent
    print(f"host killed -> host.silent on the hub's SSE: {heard - killed:.3f} s")
    # alpha reads every host's view events through its link (`events`, as -f follows)
    res = alpha.cli("events", "--json", check=True)
    kinds = [(json.loads(x)["kind"], json.loads(x)["data"].get("host"), json.loads(x)["session"])
             for x in res.stdout.splitlines() if x.strip()]
    assert ("host.silent", "beta", "") in kinds, kinds
    assert any(k == "session.state" and s == "beta/web" for k, _, s in kinds), kinds
    # ... but never another host's messages
    assert not any(s.startswith("beta/") and k.startswith("message.") for k, _, s in kinds)


def test_a_message_queued_while_the_link_was_down_is_claimed_as_it_comes_back(
        hub: Hub, alpha: AwEnv) -> None:
    # alpha's safety poll is an hour away: only a wake on the new link delivers soon
    settled_on_slow_poll(hub, alpha, "[host]\nheartbeat_s = 0.5\n")
    hub.kill()  # the link drops; a message is queued meanwhile (the hub's store, directly)
    sent = send_on_hub(hub, "alpha/api", "queued while the link was down")
    assert status_on_hub(hub, sent) is Status.PENDING
    hub.start()
    wait_for(lambda: hub.links() >= 1, 60, "alpha linked again", interval=0.05)
    linked = time.monotonic()
    wait_for(lambda: "queued while the link was down" in " ".join(alpha.received()), 120,
             "typed after the reconnect (the idle poll is an hour away)", on_timeout=hub.log,
             interval=0.05)
    took = time.monotonic() - linked
    wait_for(lambda: status_on_hub(hub, sent).terminal, 60, "recorded on the hub")
    assert status_on_hub(hub, sent) in (Status.DELIVERED, Status.ACKNOWLEDGED)
    assert " ".join(alpha.received()).count("queued while the link was down") == 1
    print(f"link back -> first byte at the stand-in: {took:.3f} s (idle poll 3600 s)")
