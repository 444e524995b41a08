"""Issue 23's "Done when": three simulated hosts share one PostgreSQL (separate
state/runtime dirs and host names, real supervisors, real tmux, the stand-in
agent). One ``ls`` (and ``ls --json``, and ``GET /api/sessions`` of any
``serve``) shows every host's sessions with their host, from any host; a
send to ``HOST/NAME`` from any host, or to a session through any ``serve``,
is typed once, by the owning host only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from conftest import AwEnv, make_aw
from support.hosts_kit import as_host, ls
from support.http_kit import body, serve

HOSTS = ("alpha", "beta", "gamma")
SESSIONS = {"alpha": "a1", "beta": "b1", "gamma": "c1"}


@pytest.fixture
def three_hosts(pg_url: str) -> Iterator[dict[str, AwEnv]]:
    with make_aw() as alpha, make_aw() as beta, make_aw() as gamma:
        envs = dict(zip(HOSTS, (alpha, beta, gamma), strict=True))
        for name, aw in envs.items():
            as_host(aw, name, pg_url)
        yield envs


def test_three_hosts_one_list_and_every_send_typed_once_by_its_owner(
    three_hosts: dict[str, AwEnv],
) -> None:
    for host, aw in three_hosts.items():
        aw.start_standin(SESSIONS[host])
    alpha = three_hosts["alpha"]
    alpha.wait_for(lambda: all(ls(alpha).get(s, {}).get("state") == "ready"
                               for s in SESSIONS.values()),
                   timeout=90, what="every host's session ready in alpha's ls")
    for aw in three_hosts.values():  # one list, from any host
        seen = ls(aw)
        assert {name: (d["host"], d["host_liveness"], d["liveness"]) for name, d in seen.items()} \
            == {s: (h, "up", "running") for h, s in SESSIONS.items()}
        table = aw.cli("ls", check=True).stdout
        for host, session in SESSIONS.items():
            line = next(x for x in table.splitlines() if x.startswith(session))
            assert host in line
    # from every host to every host's session, by HOST/NAME
    expected: dict[str, list[str]] = {h: [] for h in HOSTS}
    for src, aw in three_hosts.items():
        for dst, session in SESSIONS.items():
            tag = f"tag-{src}-to-{dst}"
            aw.cli("send", f"{dst}/{session}", tag, check=True)
            expected[dst].append(tag)
    # and through one host's `serve` (HTTP: a session by its name or HOST/NAME)
    gamma = three_hosts["gamma"]
    with contextmanager(serve)(gamma) as api, api.client() as http:
        listed = {s["name"]: s for s in http.get("/api/sessions").json()["sessions"]}
        assert {n: (s["host"], s["hostLiveness"]) for n, s in listed.items()} == {
            s: (h, "up") for h, s in SESSIONS.items()}
        for dst, session in SESSIONS.items():  # by name, HOST%2FNAME and the host's path
            for form, path in (("name", f"/api/sessions/{session}/input"),
                               ("encoded", f"/api/sessions/{dst}%2F{session}/input"),
                               ("path", f"/api/hosts/{dst}/sessions/{session}/input")):
                tag = f"tag-serve-{form}-to-{dst}"
                res = http.post(path, json=body(tag))
                assert res.status_code == 201, res.text
                expected[dst].append(tag)

    def typed(host: str) -> str:
        return "".join(three_hosts[host].received())

    for host, tags in expected.items():
        three_hosts[host].wait_for(lambda h=host, t=tags: all(x in typed(h) for x in t),
                                   timeout=90, what=f"every message typed on {host}")
    for host, tags in expected.items():
        text = typed(host)
        assert all(text.count(t) == 1 for t in tags), (host, text)
        others = [t for h, ts in expected.items() if h != host for t in ts]
        assert not any(t in text for t in others), (host, text)
    for host, aw in three_hosts.items():
        aw.cli("stop", SESSIONS[host], check=True)
