"""``agentwrap hosts`` and ``hosts forget`` (issue 23): the machines of a
shared store with their liveness, and dropping one gone for good: its
sessions end, each message pending for them ends failed exactly once (naming
the host), its row goes, all in one transaction; a host still up, this host
and an unknown one are refused with nothing changed. Hosts are simulated on
one real PostgreSQL (:mod:`support.hosts_kit`), with real supervisors."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import AwEnv
from support import hosts_kit
from support.hosts_kit import history, ls
from support.records import record

from agentwrap.errors import HostNotFound, HostStillUp
from agentwrap.message import NewMessage, Source, Status
from agentwrap.queue.backend import open_store
from agentwrap.sessions import hosts
from agentwrap.sessions.hosts import Forgotten
from agentwrap.sessions.registry import Registry, exit_reason


@pytest.fixture
def two_hosts(pg_url: str) -> Iterator[tuple[AwEnv, AwEnv]]:
    with hosts_kit.two_hosts(pg_url) as both:
        yield both


def listed(aw: AwEnv) -> dict[str, dict[str, Any]]:
    """``hosts --json`` on this host, by host name."""
    return {h["name"]: h for h in json.loads(aw.cli("hosts", "--json", check=True).stdout)}


def ended_events(aw: AwEnv, session: str) -> Counter[str]:
    """How many ``message.ended`` events each message of ``session`` has."""
    lines = aw.cli("events", session, "--json", check=True).stdout.splitlines()
    return Counter(e["subject"] for e in map(json.loads, lines) if e["kind"] == "message.ended")


def test_hosts_lists_both_and_forget_takes_only_a_silent_other_host(
    two_hosts: tuple[AwEnv, AwEnv],
) -> None:
    alpha, beta = two_hosts
    alpha.start_standin("a1")
    beta.start_standin("b1")
    alpha.wait_for(lambda: (got := ls(alpha)).get("a1", {}).get("state") == "ready"
                   and got.get("b1", {}).get("state") == "ready",
                   timeout=40, what="both sessions ready")
    seen = listed(alpha)
    assert list(seen) == ["alpha", "beta"]  # this host first
    assert (seen["alpha"]["here"], seen["alpha"]["liveness"], seen["alpha"]["sessions"]) == (
        True, "up", ["a1"])
    assert (seen["beta"]["here"], seen["beta"]["liveness"], seen["beta"]["sessions"]) == (
        False, "up", ["b1"])
    assert seen["beta"]["lastBeat"] and seen["beta"]["unreachableSince"] is None
    # one message reaches beta's session while beta is up: it stays delivered
    alpha.cli("send", "beta/b1", "before", check=True)
    beta.wait_for(lambda: "before" in "".join(beta.received()), timeout=30, what="delivered")

    # refused while beta beats, for this host, for an unknown host: nothing changes
    up = alpha.cli("hosts", "forget", "beta")
    assert up.returncode == 75 and "host 'beta' is up" in up.stderr
    assert "stop agentwrap on that host first" in up.stderr
    own = alpha.cli("hosts", "forget", "alpha")
    assert own.returncode == 75 and "is this host" in own.stderr
    unknown = alpha.cli("hosts", "forget", "gamma", "--json")
    assert unknown.returncode == 3 and json.loads(unknown.stdout)["error"] == "HostNotFound"
    bad = alpha.cli("hosts", "forget", "[bold]x")
    assert bad.returncode == 65 and "invalid host name" in bad.stderr
    assert set(ls(alpha)) == {"a1", "b1"} and set(listed(alpha)) == {"alpha", "beta"}

    # beta falls silent (its supervisor dies); messages for it wait
    sup = beta.registry().get("b1").supervisor_pid
    assert sup
    os.kill(sup, signal.SIGKILL)
    alpha.wait_for(lambda: listed(alpha)["beta"]["liveness"] == "unreachable", timeout=30,
                   what="beta unreachable in `hosts`")
    alpha.cli("send", "beta/b1", "stranded one", check=True)
    alpha.cli("send", "beta/b1", "stranded two", check=True)
    silent = listed(alpha)["beta"]
    assert silent["pending"] == 2 and silent["unreachableSince"] == silent["lastBeat"]
    text = alpha.cli("hosts", check=True).stdout
    line = next(x for x in text.splitlines() if x.startswith("beta"))
    assert "unreachable since" in line and "b1" in line

    done = json.loads(alpha.cli("hosts", "forget", "beta", "--json", check=True).stdout)
    assert done == {"host": "beta", "sessions": ["beta/b1"], "failed": 2}
    assert set(ls(alpha)) == {"a1"} and set(listed(alpha)) == {"alpha"}
    got = history(alpha, "beta/b1")
    assert got["before"]["status"] == "delivered"
    for content in ("stranded one", "stranded two"):
        assert got[content]["status"] == "failed"
        assert "host 'beta' was forgotten" in got[content]["detail"]
    assert set(ended_events(alpha, "beta/b1").values()) == {1}  # one end each, 3 messages
    assert len(ended_events(alpha, "beta/b1")) == 3
    audit = [json.loads(x) for x in alpha.paths.audit_log.read_text().splitlines()]
    assert any(a.get("event") == "host_forgotten" and a.get("host") == "beta"
               and a.get("failed") == 2 for a in audit)
    again = alpha.cli("hosts", "forget", "beta")  # forgotten: unknown now, nothing ends twice
    assert again.returncode == 3 and "no host named 'beta'" in again.stderr
    assert len(ended_events(alpha, "beta/b1")) == 3
    alpha.cli("stop", "a1", check=True)


def test_a_refused_forget_changes_nothing(tmp_path: Path, pg_url: str) -> None:
    alpha = Registry(tmp_path / "a.db", url=pg_url, host="alpha", heartbeat_s=1.0)
    beta = Registry(tmp_path / "b.db", url=pg_url, host="beta", heartbeat_s=1.0)
    open_store(tmp_path / "q.db", url=pg_url).close()  # the queue's tables, as a service has
    try:
        beta.register(record("b1"))  # beats beta now
        beta.register(record("b0"))
        beta.mark_ended("b0", 7)  # an end already recorded stays as it was
        with pytest.raises(HostStillUp):
            alpha.forget_host("beta")
        with pytest.raises(HostStillUp):
            alpha.forget_host("alpha")
        with pytest.raises(HostNotFound):
            alpha.forget_host("gamma")
        assert set(alpha.hosts()) == {"beta"}  # alpha never beat: nothing runs there
        assert alpha.get("beta/b1").ended is None
        hosts.beat(beta.db, "beta", 1.0, now=1_700_000_000.0)  # silent since then
        assert alpha.forget_host("beta").sessions == ["beta/b1"]
        assert alpha.hosts() == {} and alpha.get("beta/b1").ended is not None
        b0 = alpha.get("beta/b0")
        assert b0.exit_code == 7 and b0.state_reason == exit_reason(7)  # as it was
    finally:
        alpha.close()
        beta.close()


def test_two_hosts_forgetting_one_at_once_end_each_message_once(
    tmp_path: Path, pg_url: str,
) -> None:
    store = open_store(tmp_path / "q.db", url=pg_url)
    beta = Registry(tmp_path / "b.db", url=pg_url, host="beta", heartbeat_s=1.0)
    forgetters = [Registry(tmp_path / f"{h}.db", url=pg_url, host=h) for h in ("alpha", "gamma")]
    try:
        beta.register(record("b1"))
        ids = [store.enqueue(NewMessage(session="beta/b1", content=f"m{i}", source=Source.USER,
                                        source_id="t"))[0].id for i in range(5)]
        hosts.beat(beta.db, "beta", 1.0, now=1_700_000_000.0)  # silent since then
        outcomes: list[object] = []

        def forget(reg: Registry) -> None:
            try:
                outcomes.append(reg.forget_host("beta"))
            except HostNotFound as exc:
                outcomes.append(exc)

        threads = [threading.Thread(target=forget, args=(r,)) for r in forgetters]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        done = [o for o in outcomes if isinstance(o, Forgotten)]
        assert len(outcomes) == 2 and len(done) == 1  # one forgets, the other finds nothing
        assert (done[0].sessions, done[0].failed) == (["beta/b1"], 5)
        assert {store.get(i).status for i in ids} == {Status.FAILED}
        rows = beta.db.read(
            "SELECT subject, count(*) AS n FROM events WHERE kind = 'message.ended'"
            " GROUP BY subject")
        assert {r["subject"]: int(r["n"]) for r in rows} == dict.fromkeys(ids, 1)
        assert len(rows) == 5
        ended = beta.db.read("SELECT count(*) AS n FROM events WHERE kind = 'session.ended'")
        assert int(ended[0]["n"]) == 1
    finally:
        for reg in (beta, *forgetters):
            reg.close()
        store.close()


def test_hosts_on_sqlite_shows_this_host_only(aw: AwEnv) -> None:
    reg = aw.registry()
    try:
        reg.register(record("s1"))
    finally:
        reg.close()
    res = aw.cli("hosts", "--json", check=True)
    (only,) = json.loads(res.stdout)
    assert (only["here"], only["liveness"], only["sessions"], only["lastBeat"]) == (
        True, "up", ["s1"], None)
    text = aw.cli("hosts", check=True)
    assert "SQLite" in text.stderr and "[store] url" in text.stderr
    gone = aw.cli("hosts", "forget", "elsewhere")
    assert gone.returncode == 3 and "SQLite" in gone.stderr
    before = aw.cli("hosts", "--json", "forget", "elsewhere")  # --json before the verb too
    assert before.returncode == 3 and json.loads(before.stdout)["error"] == "HostNotFound"


def test_the_api_lists_the_hosts(aw: AwEnv, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    got = hosts_kit.api_seen_from_alpha(aw, monkeypatch, pg_url, "/api/hosts")
    assert got["shared"] is True
    by = {h["name"]: h for h in got["hosts"]}
    assert (by["alpha"]["here"], by["alpha"]["liveness"], by["alpha"]["sessions"]) == (
        True, "up", ["a1"])
    assert (by["beta"]["liveness"], by["beta"]["unreachableSince"], by["beta"]["sessions"]) == (
        "unreachable", 1_700_000_000.0, ["b1"])


@pytest.mark.parametrize("args", [("hosts", "--help"), ("hosts", "forget", "--help")])
def test_hosts_help_teaches(aw: AwEnv, args: tuple[str, ...]) -> None:
    res = aw.cli(*args, check=True)
    assert "examples:" in res.stdout and "agentwrap hosts" in res.stdout
    assert "unreachable" in res.stdout
