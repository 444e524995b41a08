"""Ending a session ends what waits for it (issue 35), also when its supervisor
is dead: a message queued while nobody supervises the session, then
``agentwrap stop``, gets its terminal state instead of staying ``pending``
forever (nobody sweeps its TTL: only a running supervisor does). On SQLite and
PostgreSQL, with a real supervisor process killed with SIGKILL."""

from __future__ import annotations

import time

import pytest
from conftest import AwEnv
from support.delivery_kit import kill9, send, supervisor_pid, write_config
from support.stores import BACKENDS, StoreTarget

from agentwrap.message import UNACKNOWLEDGED, Status


def _target(aw: AwEnv, backend: str, request: pytest.FixtureRequest) -> StoreTarget:
    if backend == "postgres":
        url = request.getfixturevalue("pg_url")
        aw.env["AGENTWRAP_STORE_URL"] = url
        return StoreTarget("postgres", url)
    return StoreTarget("sqlite", str(aw.paths.db_path))


@pytest.mark.parametrize("backend", [pytest.param(b, marks=[pytest.mark.postgres] if b == "postgres" else [])
                                     for b in BACKENDS])
def test_stop_with_a_dead_supervisor_ends_the_queue(
    aw: AwEnv, backend: str, request: pytest.FixtureRequest,
) -> None:
    target = _target(aw, backend, request)
    write_config(aw)
    aw.start_standin("sa")
    aw.wait_state("sa", "ready")
    kill9(supervisor_pid(aw, "sa"))
    waiting = send(aw, "sa", "queued while nobody supervises", "--ttl", "300")
    overdue = send(aw, "sa", "queued, its TTL passes before the stop", "--ttl", "1")
    store = target.open()
    try:
        assert store.get(waiting).status is Status.PENDING
        aw.wait_for(lambda: store.get(overdue).expires <= time.time(), 10,
                    "the short TTL to pass")
        aw.cli("stop", "sa", check=True)
        ended = store.get(waiting)
        assert ended.status is Status.FAILED, ended
        assert "session ended" in (ended.detail or ""), ended.detail
        assert store.get(overdue).status is Status.EXPIRED
        assert not store.peek("sa") and not store.in_flight("sa")
        assert not [a for a in store.attempts(waiting) if a.outcome == UNACKNOWLEDGED]
    finally:
        store.close()
    assert aw.received() == []  # nothing typed: there was no supervisor to type it
