"""Two hubs on one PostgreSQL, the hub serving a host ``kill -9``ed in every
write-ahead phase of a delivery (issue 38): the host's link moves to the other
hub and the message is typed exactly once, with one ``message.ended``.

Real hub processes (plain HTTP on loopback, so a relay reads the link's frames),
real PostgreSQL, a real supervisor host with a tmux stand-in agent. The relay
(tests/support/link_cutter.py) kills hub A at the chosen call: either as the
call reaches it (``sent``: whether A recorded it is a race, as with a real
crash) or once A has answered it and the answer is held back from the host
(``answered``: A recorded it, the host cannot know). The host's link file names
the relay first and hub B as its ``also``."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import AwEnv, make_aw
from support.hub_kit import (  # the fixtures by their names: alpha, _stop_hosts
    PlainHub,
    alpha_fixture,  # noqa: F401
    make_cert,
    start_session,
    stop_hosts,  # noqa: F401
)
from support.link_cutter import PHASE_CALLS, LinkCutter
from support.waiting import wait_for

from agentwrap.hub.server import open_hub_store
from agentwrap.message import NewMessage, Status
from agentwrap.queue.link import load_link, save_link

pytestmark = pytest.mark.usefixtures("tmux")


@pytest.mark.parametrize("when", ["sent", "answered"])
@pytest.mark.parametrize("phase", list(PHASE_CALLS))
def test_the_serving_hub_killed_in_each_phase_delivers_once_through_the_other(
        pg_url: str, alpha: AwEnv, tmp_path: Path, phase: str, when: str) -> None:
    cert = make_cert(tmp_path / "tls")
    with make_aw() as aw_a, make_aw() as aw_b:
        hub_a = PlainHub(aw_a, cert, store_url=pg_url).start()
        hub_b = PlainHub(aw_b, cert, store_url=pg_url).start()
        cutter = LinkCutter(hub_a.port, on_cut=hub_a.kill, hold_reply=when == "answered")
        cutter.start()
        try:
            hub_a.join(alpha, "alpha")
            link = load_link(alpha.paths.state_dir)
            assert link is not None
            save_link(alpha.paths.state_dir, replace(
                link, url=f"http://127.0.0.1:{cutter.port}", also=((hub_b.url, ""),)))
            start_session(alpha)
            alpha.wait_state("api", "ready", timeout=60)
            wait_for(lambda: hub_a.links() == 1, 60, "alpha linked to hub A",
                     on_timeout=hub_a.log)
            cutter.arm(PHASE_CALLS[phase])
            tag = f"tag-{phase}-{when}"
            store = open_hub_store(aw_b.paths.state_dir, pg_url, pool_size=1)
            try:
                sent = store.enqueue(NewMessage(session="alpha/api", content=tag))[0].id
                wait_for(lambda: cutter.cuts and hub_a.proc is None, 90,
                         f"hub A killed at the {phase} call", on_timeout=hub_a.log)
                wait_for(lambda: hub_b.links() == 1, 90, "alpha moved to hub B",
                         on_timeout=hub_b.log)
                wait_for(lambda: store.get(sent).status.terminal, 120, "the message ended",
                         on_timeout=hub_b.log)
                assert store.get(sent).status in (Status.DELIVERED, Status.ACKNOWLEDGED), \
                    store.get(sent)
                assert len(store.events(0, kinds=["message.ended"], subject=sent)) == 1
            finally:
                store.close()
            got = re.findall(rf"\b{tag}\b", "\n".join(alpha.received()))
            assert got == [tag], alpha.received()  # typed exactly once
        finally:
            cutter.close()
            hub_a.kill()
            hub_b.kill()
