"""Real Claude Code in a real container (issue 39): ``agentwrap run --image IMAGE -- claude``.

The image is the test cache's (tests/support/container.py: a Debian rootfs from
debootstrap, built offline); the agent CLIs are bind-mounted read-only at their own
path, the test's HOME too, and the container shares the host's network, so Claude
reaches the tests' model server on 127.0.0.1. The session's box folder (its hook
socket, the hook client, the answer folder) is what the container sees of agentwrap.
Cases: ready with its hooks (the SessionStart hook ran through the socket from
inside), a message with ACK delivered once, a permission question with its exact
command (the hook's) answered from the API and, a second one, by a JSON file written
into the mounted answer folder from inside the container; hostile content stays
inert inside; the container killed ends the session with a reason. Waits are
deadlines, never thresholds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from support import container as box

from .conftest import AgentSession
from .model_server import TOOL_FILE
from .test_answering import answer, main_requests, next_tool_result, wait_question

pytestmark = [pytest.mark.e2e, pytest.mark.container]
Make = Callable[..., AgentSession]
#: What the agent inside is handed from agentwrap's environment (by name).
PASSED = ["HOME", "TMPDIR", "TERM", "LANG", "LC_ALL", "NO_PROXY", "no_proxy", "ANTHROPIC_BASE_URL",
          "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL",
          "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING", "DISABLE_TELEMETRY",
          "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE"]


@pytest.fixture(scope="module")
def image(container: None) -> str:
    return box.build_images().agent


def into_a_box(s: AgentSession, image: str, passed: list[str], config: str = "") -> None:
    """``s`` set to run in a container of ``image`` (Podman): the agents and its HOME
    mounted at their own paths, the host's network, ``passed`` handed in by name;
    ``config``: the rest of the user config, before the ``[container]`` table."""
    s.env["CONTAINERS_CONF"] = str(box.containers_conf())
    run_args = ["--network", "host", "-v", f"{box.AGENTS_DIR}:{box.AGENTS_DIR}:ro",
                "-v", f"{s.home}:{s.home}"]
    s.write_config(config + "[container]\n" 'engine = "podman"\n'
                   f"run_args = {json.dumps(run_args)}\nenv = {json.dumps(passed)}\n")
    s.extra_run_args = ["--image", image]


def boxed_claude(make_session: Make, image: str) -> AgentSession:
    s = make_session("claude")
    into_a_box(s, image, PASSED)
    s.start()
    return s


def container_name(s: AgentSession) -> str:
    return f"agentwrap-{s.name}"


@pytest.fixture
def claude_in_a_box(make_session: Make, image: str):  # type: ignore[no-untyped-def]
    s = boxed_claude(make_session, image)
    yield s
    box.remove(container_name(s))


def test_ready_ack_and_a_permission_answered_from_the_api_and_a_file_inside(
        claude_in_a_box: AgentSession) -> None:
    s = claude_in_a_box
    assert box.running(container_name(s))
    st = s.wait_state("ready", timeout=120)
    assert "hooks" in (st.get("channels") or []), st
    # the agent runs inside: its process is the container's, not the host's
    ps = box.podman("exec", container_name(s), "ps", "-eo", "args").stdout
    assert "claude" in ps, ps

    marker = f"boxed-{time.time_ns()}"
    res = s.send(f"status check {marker}", "--ack", "--wait", "--timeout", "120")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}\n{s.screen()}"
    assert res.stdout.startswith("acknowledged"), res.stdout
    assert len(s.wait_received(marker)) == 1

    # hostile content: quoted data, never run inside
    canary = s.workdir / "pwned"
    hostile = f"$(touch {canary}) `touch {canary}` ; touch {canary}\n/exit\n\x1b[201~"
    res = s.send(hostile, "--wait", "--timeout", "120")
    assert res.returncode == 0, f"{res.stdout}{res.stderr}"
    s.wait_state("ready", timeout=120)
    assert not canary.exists()

    # a permission question with the hook's exact command, answered from the API
    command = f"touch {TOOL_FILE} && echo from-the-box"
    directive = "Bash " + json.dumps({"command": command, "description": "scripted"})
    assert s.send(f"[[call: {directive}]] please", "--wait", "--timeout", "90").returncode == 0
    wait_question(s)
    q = s.wait_until(lambda: (st := s.state())["state"] == "waiting_input" and st["question"]
                     and st["question"]["source"] == "hook" and st["question"], 30,
                     "the hook's exact command in the question")
    assert (q["kind"], q["tool"], q["command"]) == ("permission", "Bash", command), q
    seen = len(main_requests(s))
    code, out = answer(s, "--option", "1", "--question", q["id"])
    assert code == 0 and out["status"] == "applied", out
    s.wait_until(lambda: (s.workdir / TOOL_FILE).exists(), 60, f"{TOOL_FILE} created inside")
    assert "from-the-box" in next_tool_result(s, seen)
    s.wait_state("ready", timeout=120)

    # a second one, answered by a file written into the mounted answer folder from inside
    second = "touch second_ran.txt && echo answered-by-file"
    directive = "Bash " + json.dumps({"command": second, "description": "scripted"})
    assert s.send(f"[[call: {directive}]] please", "--wait", "--timeout", "90").returncode == 0
    q = s.wait_until(lambda: (st := s.state())["state"] == "waiting_input" and st["question"]
                     and st["question"]["source"] == "hook" and st["question"]["command"] == second
                     and st["question"], 90, "the second question")
    body = json.dumps({"questionId": q["id"], "answers": {"option": 1}})
    wrote = box.podman("exec", container_name(s), "sh", "-c",
                       f"printf '%s' '{body}' >/run/agentwrap/answers/.a && "
                       "mv /run/agentwrap/answers/.a /run/agentwrap/answers/a.json")
    assert wrote.returncode == 0, wrote.stderr
    s.wait_until(lambda: (s.workdir / "second_ran.txt").exists(), 60, "the file's answer applied")
    applied = [a for a in stored_answers(s) if a[1] == "file"]
    assert len(applied) == 1, applied


def stored_answers(s: AgentSession) -> list[tuple[str, str]]:
    import sqlite3

    db = sqlite3.connect(s._paths().db_path)
    try:
        return [(r[0], r[1]) for r in db.execute("SELECT status, source FROM answers")]
    finally:
        db.close()


def test_the_container_killed_ends_the_session_with_a_reason(
        claude_in_a_box: AgentSession) -> None:
    s = claude_in_a_box
    s.wait_state("ready", timeout=120)
    box.podman("kill", container_name(s))
    s.wait_state("exited", timeout=60)
    # the end's record follows the screen's "exited": the reason names the container
    s.wait_until(lambda: f"container {container_name(s)}" in json.dumps(s.state()), 30,
                 f"the reason of the end, in {s.state()}")
    hist = s.history()
    assert not [m for m in hist if m["status"] == "delivering"], hist


def test_the_agent_killed_inside_ends_the_session_with_its_code_and_the_container_goes(
        claude_in_a_box: AgentSession) -> None:
    """Claude itself killed inside (SIGKILL from a process in the container, as an OOM
    kill or a person's ``pkill`` would): its exit is the session's (128 + 9), nothing is
    left in flight, and the container the session started is removed."""
    s = claude_in_a_box
    s.wait_state("ready", timeout=120)
    pid = box.podman("exec", container_name(s), "cat", box_pid_file(s)).stdout.strip()
    assert pid.isdigit(), pid
    assert box.podman("exec", container_name(s), "kill", "-KILL", pid).returncode == 0
    s.wait_state("exited", timeout=60)
    rec = s.wait_until(lambda: next((r for r in json.loads(s.cli("ls", "--all", "--json").stdout)
                                     if r["name"] == s.name and r.get("exit_code") is not None),
                                    None), 60, "the session's end recorded")
    assert rec["exit_code"] == 137, rec
    assert not [m for m in s.history() if m["status"] == "delivering"]
    s.wait_until(lambda: not box.running(container_name(s)) and box.podman(
        "container", "exists", container_name(s), check=False).returncode != 0, 60,
        "the session's container removed")


def box_pid_file(s: AgentSession) -> str:
    """The agent's pid file inside (the pane's ``exec`` writes it: its process group's leader)."""
    from agentwrap.containers.box import pid_file

    return pid_file(s.name)
