"""The hub soak, small (issue 38): scripts/soak_hub.py with 120 messages.

Two hosts linked to a real ``agentwrap hub`` (SQLite) through a relay, four
stand-in agents under real supervisor hosts and tmux; two producers send 120
tagged messages to ``HOST/NAME`` over their hosts' links while every link is
cut, one host's supervisor is ``kill -9``ed (and adopted again) and the hub
is ``kill -9``ed and started again. Nothing may be lost or doubled: every
accepted tag one message in one terminal state, every delivered tag typed
into its own agent exactly once. The full size (10,000 messages, 50
sessions on 10 hosts, cuts and kills every 20 s, two hub restarts) is the
script's default.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def soak_module() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("soak_hub", ROOT / "scripts" / "soak_hub.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["soak_hub"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(900)  # the soak, its drain and its teardown of 4 agents under load
@pytest.mark.usefixtures("tmux")
def test_a_small_hub_soak_loses_and_doubles_nothing_through_cuts_kills_and_a_hub_restart(
        ) -> None:
    soak = soak_module()
    cfg = soak.HubSoakConfig(messages=120, hosts=2, sessions=4, producers=2, send_s=30.0,
                             cut_every_s=12.0, kill_every_s=20.0, hub_restarts=1,
                             drain_timeout_s=240.0)
    said: list[str] = []
    res = soak.run_soak(cfg, say=said.append)
    report = "\n".join([*said, *res.notes, *res.problems])
    assert res.cuts >= 2 and res.links_cut >= 2, report
    assert res.kills == 1 and res.hub_restarts == 1, report
    assert res.accepted == 120, report
    assert sum(res.statuses.values()) == 120, report
    assert not res.problems, report
    assert res.ok
