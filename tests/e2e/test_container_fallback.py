"""The instruction-file fallback for a real agent in a real container (issue 39).

Claude Code runs in a Podman container of the test image, the project mounted at its
own path (``tests/e2e/test_container_claude.py``'s set-up). A message that is never
acknowledged escalates; agentwrap writes its section into the project's CLAUDE.md
through the container's mounts (the write is guarded by what ``inspect`` reports),
types the notice, and Claude, inside, reads the file with its Read tool and finds the
section there; its ACK of the notice removes the section and leaves the person's text
as it was. The scripted model server is ``test_fallback_real``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from support import container as box

from .conftest import AgentSession
from .test_container_claude import PASSED, container_name, into_a_box
from .test_fallback_real import BEGIN, MINE, notice_reading

pytestmark = [pytest.mark.e2e, pytest.mark.container]
Make = Callable[..., AgentSession]


@pytest.fixture(scope="module")
def image(container: None) -> str:
    return box.build_images().agent


def test_the_fallback_section_is_written_into_the_mounted_project_and_read_inside(
        make_session: Make, image: str) -> None:
    s = make_session("claude")
    claude_md, server = notice_reading(s)
    into_a_box(s, image, PASSED, config="[delivery]\nfallback_after = 1\nack_timeout_s = 2.0\n"
               "notify_on_failure = false\n")
    try:
        s.start()
        s.wait_state("ready", timeout=120)
        assert box.running(container_name(s))  # the agent is the container's
        res = s.send("deploy frozen until 5pm", "--source", "webhook", "--source-id", "ci",
                     "--ack", "--wait", "--timeout", "150", timeout=180)
        assert res.returncode == 10 and res.stdout.startswith("escalated"), (res.stdout, res.stderr)
        # read inside, through the mount: the section was there when the agent looked
        s.wait_until(lambda: server.on_disk is not None, 120, "the Read of CLAUDE.md inside")
        assert server.on_disk is not None and BEGIN in server.on_disk, server.on_disk
        assert "deploy frozen until 5pm" in server.on_disk
        # and what the agent's Read inside returned went to the model: the section's text
        sent = json.dumps(server.after_read["messages"], ensure_ascii=False)
        assert BEGIN in sent and "deploy frozen until 5pm" in sent, sent[-3000:]
        s.wait_until(lambda: claude_md.read_text() == MINE, 90, "the section removed after the ACK")
        notice = next(m for m in s.history() if m["source_id"] == "fallback")
        assert notice["status"] == "acknowledged", notice
    finally:
        box.remove(container_name(s))
