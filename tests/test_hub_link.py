"""The host link (issue 38): one link per host process, the hub's push-wake,
and the link cut in every write-ahead phase, with real processes (a hub
started by ``agentwrap hub``, hosts with their own state, a supervisor host
and a tmux stand-in agent)."""

from __future__ import annotations

import time

import pytest
from conftest import AwEnv
from support.hub_kit import (  # the fixtures by their names: hub, alpha, beta, _stop_hosts
    Hub,
    alpha_fixture,  # noqa: F401
    beta_fixture,  # noqa: F401
    host_client,
    hub_fixture,  # noqa: F401
    send_on_hub,
    start_session,
    status_on_hub,
    stop_hosts,  # noqa: F401
)
from support.waiting import wait_for

from agentwrap.message import Status
from agentwrap.queue import link_protocol as wire
from agentwrap.queue.backend import linked_store
from agentwrap.queue.link import HubStore

pytestmark = pytest.mark.usefixtures("tmux")


def test_the_hub_pushes_a_wake_to_the_owning_host_only(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    hub.join(alpha, "alpha")
    hub.join(beta, "beta")
    woke: dict[str, list[str]] = {"alpha": [], "beta": []}
    stores = {name: HubStore(host_client(aw)) for name, aw in (("alpha", alpha), ("beta", beta))}
    try:
        for name, store in stores.items():
            store.listen(woke[name].append)
        send_on_hub(hub, "alpha/api", "stored by the hub itself")  # a writer beside the hub
        wait_for(lambda: woke["alpha"] == ["api"], 30, "alpha woken for api", on_timeout=hub.log)
        stores["beta"].enqueue(wire.new_message_from_wire(  # a host's send on its link
            {"session": "alpha/web", "content": "from beta"}))
        wait_for(lambda: "web" in woke["alpha"], 30, "alpha woken for web")
        assert woke["beta"] == []  # beta's link hears nothing of alpha's sessions
    finally:
        for store in stores.values():
            store.close()


def test_every_store_of_a_process_shares_its_one_link(hub: Hub, alpha: AwEnv) -> None:
    hub.join(alpha, "alpha")
    first = linked_store(alpha.paths.state_dir, wait_s=30, required=True)
    second = linked_store(alpha.paths.state_dir, wait_s=30, required=True)
    assert first is not None and second is not None
    try:
        assert first.client is second.client
        assert first.pending_count("api") == second.pending_count("api") == 0
        assert hub.healthy() == {**(hub.healthy() or {}), "links": 1, "sockets": 1}
        first.close()
        assert second.client.up and second.pending_count("api") == 0  # still the other's
    finally:
        first.close()
        second.close()
    wait_for(lambda: hub.healthy() == {**(hub.healthy() or {}), "links": 0, "sockets": 0}, 30,
             "the last user closed the link")


def test_a_settled_session_is_woken_by_the_hub_not_its_poll(hub: Hub, alpha: AwEnv) -> None:
    # alpha's safety poll of the queue is an hour away: only a push delivers soon
    alpha.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    alpha.paths.config_file.write_text("[run]\nidle_tick_s = 3600\n")
    hub.join(alpha, "alpha")
    start_session(alpha)
    alpha.wait_state("api", "ready", timeout=60)
    sent = send_on_hub(hub, "alpha/api", "warm-up")
    wait_for(lambda: status_on_hub(hub, sent).terminal, 60, "the warm-up delivered")
    time.sleep(8)  # the screen still for longer than the supervisor's settle_s (6 s): idle polling
    sent = send_on_hub(hub, "alpha/api", "pushed, not polled")
    wait_for(lambda: "pushed, not polled" in " ".join(alpha.received()), 60,
             "the message typed (the idle poll is an hour away)", on_timeout=hub.log)
    wait_for(lambda: status_on_hub(hub, sent).terminal, 60, "recorded on the hub")
    assert status_on_hub(hub, sent) in (Status.DELIVERED, Status.ACKNOWLEDGED)
    assert " ".join(alpha.received()).count("pushed, not polled") == 1
