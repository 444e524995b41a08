"""A message stored by another host wakes the owning host's supervisor (issue 23).

A local ``send`` nudges the supervisor through its wake socket; another host
has no way to that socket, so without a wake-up over the store the owner
found the message at its idle poll (``[run] idle_tick_s``, 10 s:
scripts/bench_store.py measured ~20 s from a send on one host to the first
byte at the agent on another). The store's NOTIFY names the sessions that
got work, and each host's supervisors are woken for theirs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import AwEnv
from support import hosts_kit
from support.waiting import wait_for

from agentwrap.message import NewMessage
from agentwrap.queue.postgres import NOTIFY_BYTES, PostgresMessageStore, wake_payloads


def test_notify_payloads_name_each_session_once_and_fit() -> None:
    assert wake_payloads([]) == [""]
    assert wake_payloads({"b", "a"}) == ["a\nb"]
    many = [f"session-{i:04d}-" + "x" * 50 for i in range(400)]
    payloads = wake_payloads(many)
    assert len(payloads) > 1 and all(len(p.encode()) <= NOTIFY_BYTES for p in payloads)
    assert sorted(n for p in payloads for n in p.split("\n")) == sorted(many)


def test_another_hosts_enqueue_calls_this_hosts_wake_with_the_session(
    tmp_path: Path, pg_url: str,
) -> None:
    woken: list[str] = []
    got = threading.Event()

    def wake(name: str) -> bool:
        woken.append(name)
        got.set()
        return True

    (tmp_path / "b").mkdir()
    beta = PostgresMessageStore(pg_url, events_dir=tmp_path / "b")
    alpha = PostgresMessageStore(pg_url)
    try:
        beta.listen(wake=wake)
        from agentwrap.queue.postgres import NotifyBridge

        bridge = NotifyBridge.start(pg_url, tmp_path / "b")
        assert bridge.listening.wait(30)
        alpha.enqueue(NewMessage(session="b1", content="from alpha"))
        assert got.wait(30), "beta was not woken"
        assert woken == ["b1"]
        # a commit without new work (a claim, a state change) names nobody
        batch = alpha.claim_batch("b1", "batch-1", max_bytes=10_000)
        assert batch
        alpha.enqueue(NewMessage(session="b2", content="second"))
        wait_for(lambda: "b2" in woken, 30, "b2 woken")
        assert woken == ["b1", "b2"]
    finally:
        alpha.close()
        beta.close()


@pytest.fixture
def two_hosts(pg_url: str) -> Iterator[tuple[AwEnv, AwEnv]]:
    # beta's safety poll of the queue is far off: only a wake-up delivers soon
    with hosts_kit.two_hosts(pg_url, None, "[run]\nidle_tick_s = 600\n") as hosts:
        yield hosts


def test_a_send_from_another_host_wakes_the_settled_owner(
    two_hosts: tuple[AwEnv, AwEnv],
) -> None:
    alpha, beta = two_hosts
    beta.start_standin("b1")
    beta.wait_state("b1", "ready", timeout=40)
    time.sleep(8)  # the screen still for longer than the supervisor's settle_s (6 s): idle polling
    alpha.cli("send", "b1", "woken from alpha", check=True)
    beta.wait_for(lambda: "woken from alpha" in "".join(beta.received()), timeout=60,
                  what="the message typed on beta (its idle poll is 600 s away)")
    assert "".join(beta.received()).count("woken from alpha") == 1
    beta.cli("stop", "b1", check=True)
