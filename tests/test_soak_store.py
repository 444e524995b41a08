"""The store soak, small (issue 23): scripts/soak_store.py with 300 messages.

Two simulated hosts share one PostgreSQL (the soak's own, so restarting it
disturbs no other test); two producers, one per host, send 300 tagged
messages into 3 stand-in agents while one host's supervisor is ``kill -9``ed
(and adopted again) and the server is restarted once. Nothing may be lost or
doubled: every accepted tag one message in one terminal state, every
delivered tag typed into its own agent exactly once. The full size (10,000
messages, 10 sessions, a kill every 20 s, two restarts) is the script's
default; its figures are in README.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def soak_module() -> ModuleType:
    # the script imports its neighbours (bench_against, benchlib) as a script does:
    # from its own folder, whatever else this process imported before
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("soak_store", ROOT / "scripts" / "soak_store.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["soak_store"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.usefixtures("tmux")
def test_a_small_soak_loses_and_doubles_nothing_through_kills_and_a_restart() -> None:
    soak = soak_module()
    cfg = soak.SoakConfig(messages=300, sessions=3, producers=2, send_s=30.0, kill_every_s=20.0,
                          pg_restarts=1, drain_timeout_s=240.0)
    said: list[str] = []
    res = soak.run_soak(cfg, say=said.append)
    report = "\n".join([*said, *res.notes, *res.problems])
    assert res.kills == 1 and res.restarts == 1, report
    assert res.accepted == 300, report
    assert sum(res.statuses.values()) == 300, report
    assert not res.problems, report
    assert res.ok
