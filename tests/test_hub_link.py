"""The host link (issue 38): one link per host process, the hub's push-wake,
and the link cut in every write-ahead phase, with real processes (a hub
started by ``agentwrap hub``, hosts with their own state, a supervisor host
and a tmux stand-in agent)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, AwEnv, make_aw
from support import netns as ns
from support.hub_kit import (  # the fixtures by their names: hub, alpha, beta, _stop_hosts
    HOSTS,
    Hub,
    PlainHub,
    alpha_fixture,  # noqa: F401
    beta_fixture,  # noqa: F401
    host_client,
    hub_fixture,  # noqa: F401
    make_cert,
    send_on_hub,
    settled_on_slow_poll,
    start_session,
    status_on_hub,
    stop_hosts,  # noqa: F401
)
from support.link_cutter import PHASE_CALLS, LinkCutter, call_is
from support.waiting import wait_for

from agentwrap.hub.server import open_hub_store
from agentwrap.message import Phase, Status
from agentwrap.queue import link_protocol as wire
from agentwrap.queue.backend import linked_store
from agentwrap.queue.link import HubLink, HubStore, LinkClient, load_link, save_link
from agentwrap.service import Service

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
    settled_on_slow_poll(hub, alpha)
    sent = send_on_hub(hub, "alpha/api", "pushed, not polled")
    wait_for(lambda: "pushed, not polled" in " ".join(alpha.received()), 60,
             "the message typed (the idle poll is an hour away)", on_timeout=hub.log)
    wait_for(lambda: status_on_hub(hub, sent).terminal, 60, "recorded on the hub")
    assert status_on_hub(hub, sent) in (Status.DELIVERED, Status.ACKNOWLEDGED)
    assert " ".join(alpha.received()).count("pushed, not polled") == 1


# --- the link cut in every write-ahead phase ------------------------------------------


@pytest.fixture(name="plain_hub")
def plain_hub_fixture(tmp_path: Path) -> Iterator[PlainHub]:
    with make_aw() as aw:
        h = PlainHub(aw, make_cert(tmp_path / "tls")).start()
        try:
            yield h
        finally:
            h.kill()


def through(cutter: LinkCutter, aw: AwEnv) -> None:
    """``aw``'s link file names the relay instead of the hub."""
    link = load_link(aw.paths.state_dir)
    assert link is not None
    save_link(aw.paths.state_dir, replace(link, url=f"http://127.0.0.1:{cutter.port}"))


@pytest.mark.parametrize("phase", list(PHASE_CALLS))
def test_the_link_cut_after_each_write_ahead_call_types_once(
        plain_hub: PlainHub, alpha: AwEnv, phase: str) -> None:
    plain_hub.join(alpha, "alpha")
    cutter = LinkCutter(plain_hub.port).start()
    try:
        through(cutter, alpha)
        start_session(alpha)
        alpha.wait_state("api", "ready", timeout=60)
        cutter.arm(PHASE_CALLS[phase])
        sent = send_on_hub(plain_hub, "alpha/api", f"cut at {phase}, typed once")
        wait_for(lambda: cutter.cuts, 60, f"the link cut after the {phase} call",
                 on_timeout=plain_hub.log)
        wait_for(lambda: status_on_hub(plain_hub, sent).terminal, 120,
                 "the message ended on the hub", on_timeout=plain_hub.log)
        assert status_on_hub(plain_hub, sent) in (Status.DELIVERED, Status.ACKNOWLEDGED)
        assert " ".join(alpha.received()).count(f"cut at {phase}, typed once") == 1, \
            alpha.received()
        wait_for(lambda: cutter.connections >= 2, 60, "the host linked again after the cut")
    finally:
        cutter.close()


# --- a stalled link: the cable pulled, no FIN ----------------------------------------


@pytest.fixture
def partition(netns: None) -> Iterator[ns.Partition]:
    part = ns.Partition.make()
    try:
        yield part
    finally:
        part.close()


class Probe:
    """tests/support/link_probe.py in the namespace: the host's link as it sees it."""

    def __init__(self, part: ns.Partition, aw: AwEnv) -> None:
        self.proc = subprocess.Popen(
            [*part.prefix, sys.executable, str(ROOT / "tests" / "support" / "link_probe.py"),
             str(aw.paths.state_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**aw.env, "PYTHONPATH": str(ROOT)})
        self.seen: list[tuple[str, float]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            word, at = line.split()
            self.seen.append((word, float(at)))

    def last(self) -> str:
        return self.seen[-1][0] if self.seen else ""

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def test_a_stalled_link_is_detected_in_time_types_nothing_and_resumes(
        partition: ns.Partition, beta: AwEnv, tmp_path: Path) -> None:
    with make_aw() as aw:
        hub = Hub(aw, make_cert(tmp_path / "tls"))
        hub.start_on(partition.outer_ip)
        try:
            beta.wrap = tuple(partition.prefix)
            hub.join(beta, "beta")
            start_session(beta, wrap=partition.prefix)
            beta.wait_state("api", "ready", timeout=60)
            first = send_on_hub(hub, "beta/api", "before the cut")
            wait_for(lambda: status_on_hub(hub, first).terminal, 60, "delivered before the cut")
            probe = Probe(partition, beta)
            try:
                wait_for(lambda: probe.last() == "up", 60, "the probe's link up")
                partition.cut()
                cut_at = time.monotonic()
                during = send_on_hub(hub, "beta/api", "stored during the cut")
                deadline = LinkClient.STALL_DEADLINE_S
                wait_for(lambda: probe.last() == "down", deadline + 5,
                         "the stalled link detected within its deadline")
                detected = probe.seen[-1][1] - cut_at
                print(f"stalled link detected after {detected:.1f} s (deadline {deadline} s)")
                refused = beta.cli("send", "api", "nothing to record this")
                assert refused.returncode == 75, refused.stderr
                assert "during the cut" not in " ".join(beta.received())
                assert status_on_hub(hub, during) is Status.PENDING
                partition.mend()
                wait_for(lambda: probe.last() == "up", 60, "the link back after the mend")
                wait_for(lambda: status_on_hub(hub, during).terminal, 120,
                         "the message stored during the cut delivered", on_timeout=hub.log)
                got = " ".join(beta.received())
                assert got.count("stored during the cut") == 1 and "nothing to record" not in got
            finally:
                probe.close()
        finally:
            partition.mend()
            hub.kill()


# --- a hostile hub, and a revoke mid-delivery -----------------------------------------

#: what a hostile hub sends a host, one per link: none of it is agentwrap.link/1's answer
GARBAGE = [
    "{not json",
    "[1, 2, 3]",
    "[" * 100_000 + "]" * 100_000,
    json.dumps({"jsonrpc": "2.0", "method": "wake", "params": {"session": "../../etc"}}),
    json.dumps({"jsonrpc": "2.0", "method": "wake", "params": {"session": "other/api"}}),
    json.dumps({"jsonrpc": "2.0", "method": "type_this", "params": {"text": "rm -rf /"}}),
    json.dumps({"jsonrpc": "2.0", "id": 1, "result": [{"id": "forged", "session": "api"}]}),
    json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "data": {"error": "Exit"}}}),
    json.dumps({"jsonrpc": "1.0", "id": 1, "result": []}),
]


def test_a_hostile_hub_crashes_nothing_and_gets_nothing_typed(alpha: AwEnv) -> None:
    from websockets.sync.server import ServerConnection, serve

    served: list[str] = []

    def handler(ws: ServerConnection) -> None:
        if len(served) >= len(GARBAGE):
            ws.close()
            return
        frame = GARBAGE[len(served)]
        served.append(frame)
        with contextlib.suppress(Exception):
            ws.recv(timeout=5)  # the host's first call, answered with garbage
        with contextlib.suppress(Exception):
            ws.send(frame)
            ws.recv(timeout=5)

    with serve(handler, "127.0.0.1", 0, subprotocols=[wire.SUBPROTOCOL],  # type: ignore[list-item]
               max_size=None) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.socket.getsockname()[1]
        save_link(alpha.paths.state_dir, HubLink(f"http://127.0.0.1:{port}", "alpha", "c" * 40))
        start_session(alpha)
        wait_for(lambda: len(served) == len(GARBAGE), 180, "every garbage frame sent")
        host = HOSTS[-1]
        assert host.poll() is None, "the supervisor host died"
        rec = alpha.registry().get("api")
        assert rec.ended is None and rec.agent_pid is not None
        os.kill(rec.agent_pid, 0)  # the agent runs on
        assert alpha.received() == []
        server.shutdown()


def test_revoking_a_host_mid_delivery_types_nothing_more_and_ends_the_batch(
        plain_hub: PlainHub, alpha: AwEnv) -> None:
    plain_hub.join(alpha, "alpha")
    cutter = LinkCutter(plain_hub.port).start()
    pasting = call_is("set_phase", phase=Phase.PASTING.value)

    def revoke_at_pasting(data: dict[str, Any]) -> bool:
        if not pasting(data):
            return False
        plain_hub.aw.cli("hub", "revoke", "alpha", check=True)
        return True

    try:
        through(cutter, alpha)
        start_session(alpha)
        alpha.wait_state("api", "ready", timeout=60)
        cutter.arm(revoke_at_pasting)
        sent = send_on_hub(plain_hub, "alpha/api", "revoked mid-delivery")
        later = send_on_hub(plain_hub, "alpha/api", "never after the revoke")
        wait_for(lambda: cutter.cuts, 60, "the revoke at pasting", on_timeout=plain_hub.log)
        msg = open_hub_store(plain_hub.aw.paths.state_dir).get(sent)
        assert msg.status is Status.FAILED and "alpha" in msg.detail
        assert status_on_hub(plain_hub, later) is Status.FAILED
        wait_for(lambda: cutter.connections >= 2, 60, "the host's try to link again")
        got = " ".join(alpha.received())
        assert got.count("revoked mid-delivery") <= 1 and "never after" not in got
        assert status_on_hub(plain_hub, sent) is Status.FAILED  # nothing recorded over it
    finally:
        cutter.close()


# --- send --wait and a message's status across the hub --------------------------------


def test_send_wait_and_status_of_a_message_to_another_hosts_session(
        hub: Hub, alpha: AwEnv, beta: AwEnv) -> None:
    hub.join(alpha, "alpha")
    hub.join(beta, "beta")
    start_session(beta)
    beta.wait_state("api", "ready", timeout=60)
    wait_for(lambda: alpha.cli("state", "beta/api").returncode == 0, 60,
             "beta's session known on alpha")
    got = alpha.cli("send", "beta/api", "from alpha, awaited", "--wait", "--timeout", "120",
                    "--json")
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    assert out["status"] in ("delivered", "acknowledged") and out["session"] == "beta/api"
    assert " ".join(beta.received()).count("from alpha, awaited") == 1
    with Service.open(alpha.paths) as svc:  # the status, read on the sender through the hub
        entry = svc.message(out["id"][:12])
    assert entry.message.status.terminal and entry.attempts
    assert status_on_hub(hub, out["id"]) is entry.message.status
