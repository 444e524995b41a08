"""Real Codex in a real container (issue 39): the second agent with hooks inside.

Codex's CLI is a statically linked (musl) binary, so it runs in the test image as
it is, bind-mounted read-only from /opt/agentwrap-agents (its npm wrapper needs a
node the image has not: the pane runs the binary itself). Its hooks run the hook
client in the mounted box folder and reach the supervisor's socket there; it talks
to the tests' model server on the host (``--network host``). Cases: ready with its
hooks, a message with ACK acknowledged once, a permission question with the hook's
exact command answered from the API, the command run inside.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import container as box

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import answer, main_requests, next_tool_result
from .test_container_claude import container_name, into_a_box
from .test_hook_questions import CODEX_TRUST, call_bash, hook_question

pytestmark = [pytest.mark.e2e, pytest.mark.container]
Make = Callable[..., AgentSession]
#: Codex's own binary (its npm package's, for this machine's architecture).
CODEX = box.AGENTS_DIR / "npm/node_modules/@openai/codex-linux-x64/vendor" \
    / "x86_64-unknown-linux-musl/bin/codex"


@pytest.fixture(scope="module")
def image(container: None) -> str:
    return box.build_images().agent


@pytest.fixture
def codex_in_a_box(make_session: Make, image: str) -> Iterator[AgentSession]:
    if not CODEX.is_file():
        pytest.skip(f"no Codex binary at {CODEX} (scripts/install_agents.sh)")
    s = make_session("codex")
    s.argv = [str(CODEX), *s.argv[1:]]
    # the agent's environment, by name (values from agentwrap's, never argv); not the host's PATH
    passed = sorted(k for k in s.env if k not in ("PATH", "PYTHONPATH", "CONTAINERS_CONF")
                    and not k.startswith(("XDG_", "AGENTWRAP_SESSION")))
    into_a_box(s, image, passed, CODEX_TRUST)
    try:
        yield s
    finally:
        box.remove(container_name(s))


def test_codex_inside_ready_ack_and_a_permission_answered_from_the_api(
        codex_in_a_box: AgentSession) -> None:
    s = codex_in_a_box
    s.start()
    st = s.wait_state("ready", timeout=120)
    assert "hooks" in (st.get("channels") or []), (st, s.screen())
    ps = box.podman("exec", container_name(s), "ps", "-eo", "args").stdout
    assert str(CODEX) in ps, ps  # the agent is the container's process

    marker = f"boxed-{time.time_ns()}"
    res = s.send(f"status check {marker}", "--ack", "--wait", "--timeout", "120")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    assert res.stdout.startswith("acknowledged"), res.stdout
    assert len(s.wait_received(marker)) == 1

    command = f"touch {TOOL_FILE} && echo from-the-codex-box"
    call_bash(s, command)
    q = hook_question(s)
    assert q["kind"] == "permission" and command in (q.get("command") or ""), q
    seen = len(main_requests(s))
    code, out = answer(s, "--option", "1", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out
    s.wait_until(lambda: (Path(s.workdir) / TOOL_FILE).exists(), 90, f"{TOOL_FILE} created inside")
    assert "from-the-codex-box" in next_tool_result(s, seen)
    s.wait_state("ready", timeout=120)
