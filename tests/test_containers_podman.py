"""Agents in containers (issue 39) on a real Podman, the lifecycle without an agent CLI:
``run --image`` starts a container for the session (``--init``, the project at its own
path) and removes it at the end, the agent's exit code inside is the session's, ``stop``
ends the agent's process group inside (not only the ``exec`` client), the container
killed ends the session with a reason, and a message waiting for it is never left
``delivering``. The image is the test cache's (tests/support/container.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import AwEnv
from support import container as box
from support.waiting import wait_for


@pytest.fixture(scope="session")
def image(container: None) -> str:
    return box.build_images().agent


def engine_of(aw: AwEnv, kind: str) -> Iterator[AwEnv]:
    """``aw`` with ``[container] engine = KIND``; after the test, the containers of its
    sessions removed."""
    aw.env["CONTAINERS_CONF"] = str(box.containers_conf())
    cfg = aw.paths.config_file
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f'[container]\nengine = "{kind}"\n')
    yield aw
    for rec in json.loads(aw.cli("ls", "--all", "--json").stdout or "[]"):
        box.remove(f"agentwrap-{rec['name']}")


@pytest.fixture
def boxed(aw: AwEnv, image: str) -> Iterator[AwEnv]:
    yield from engine_of(aw, "podman")


def logs(aw: AwEnv) -> str:
    return "\n".join(p.read_text()[-3000:] for p in aw.paths.logs_dir.glob("*.log"))


def record(aw: AwEnv, name: str) -> dict[str, object]:
    recs = {r["name"]: r for r in json.loads(aw.cli("ls", "--all", "--json").stdout)}
    return recs[name]


def ended(aw: AwEnv, name: str) -> dict[str, object]:
    return wait_for(lambda: (r := record(aw, name))["liveness"] != "running" and r,
                    120, f"{name} ended")


def state(aw: AwEnv, name: str) -> dict[str, object]:
    out = aw.cli("state", name, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_agents_exit_code_inside_is_the_sessions_and_the_container_goes(
        boxed: AwEnv, image: str) -> None:
    aw = boxed
    flag, go = aw.project / "seen-inside", aw.project / "go"
    res = aw.cli("run", "--detach", "--name", "ex", "--image", image, "--", "sh", "-c",
                 f"while [ ! -e {go} ]; do sleep 0.1; done; touch {flag}; exit 7")
    assert res.returncode == 0, res.stderr
    assert box.running("agentwrap-ex")
    go.touch()  # (the project is mounted at its own path) once the supervisor runs
    rec = ended(aw, "ex")
    assert rec["exit_code"] == 7, (rec, logs(aw))
    assert flag.exists()  # the project is mounted at its own path, writable
    wait_for(lambda: not box.running("agentwrap-ex") and box.podman(
        "container", "exists", "agentwrap-ex", check=False).returncode != 0, 60,
        "the session's container removed", on_timeout=lambda: logs(aw))


def test_stop_ends_the_agents_process_tree_inside(boxed: AwEnv, image: str) -> None:
    aw = boxed
    res = aw.cli("run", "--detach", "--keep", "--name", "st", "--image", image, "--",
                 "sh", "-c", "sleep 4242 & sleep 4343; wait")
    assert res.returncode == 0, res.stderr

    def sleeps() -> list[str]:
        out = box.podman("exec", "agentwrap-st", "ps", "-eo", "args", check=False).stdout
        return [line for line in out.splitlines() if line.strip().startswith("sleep 4")]

    wait_for(lambda: len(sleeps()) == 2, 60, "the agent's tree running inside")
    assert aw.cli("stop", "st").returncode == 0
    assert record(aw, "st")["liveness"] != "running"
    assert box.running("agentwrap-st")  # --keep: the container stays ...
    assert sleeps() == []  # ... and nothing of the agent runs in it


def test_the_container_killed_ends_the_session_with_a_reason(boxed: AwEnv, image: str) -> None:
    aw = boxed
    res = aw.cli("run", "--detach", "--name", "k", "--image", image, "--", "sh", "-c",
                 "cat >/dev/null")
    assert res.returncode == 0, res.stderr
    wait_for(lambda: state(aw, "k")["state"] != "starting", 60, "the shell seen")
    sent = aw.cli("send", "k", "echo hello", "--raw")
    assert sent.returncode == 0, sent.stderr
    box.podman("kill", "agentwrap-k")
    ended(aw, "k")
    st = state(aw, "k")
    assert "container agentwrap-k" in str(st.get("reason") or st), st

    def in_flight() -> list[dict[str, object]]:
        hist = json.loads(aw.cli("history", "k", "--json").stdout or "[]")
        return [m for m in hist if m.get("status") == "delivering"]

    # the supervisor ends its messages as it records the end (the container's
    # removal, seconds at load, comes after): none is left delivering
    wait_for(lambda: not in_flight(), 30, "no message left delivering", on_timeout=lambda: str(
        in_flight()))


def test_run_container_refuses_one_that_is_not_running(boxed: AwEnv) -> None:
    res = boxed.cli("run", "--detach", "--container", "no-such-box", "--", "sh")
    assert res.returncode == 69, res.stderr
    assert "no-such-box" in res.stderr and "hint" in res.stderr
    assert json.loads(boxed.cli("ls", "--all", "--json").stdout or "[]") == []
