"""The CLI end to end with the stand-in agent in a real, isolated tmux server."""

from __future__ import annotations

from conftest import AwEnv


def test_send_reaches_agent_once_and_is_acknowledged(aw: AwEnv) -> None:
    aw.start_standin()
    aw.wait_state("sa", "ready")
    res = aw.cli("send", "sa", "hello $(rm -rf /) Enter C-c", "--ack", "--wait", "--timeout", "30")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("acknowledged")
    got = aw.received()
    assert len(got) == 1
    assert "\nhello $(rm -rf /) Enter C-c" in got[0]
