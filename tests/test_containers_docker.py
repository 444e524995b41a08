"""``[container] engine = "docker"`` (issue 39) with the real Docker CLI.

There is no dockerd on these machines: the Docker CLI (``docker``, the static
build at /usr/local/bin or Debian's docker.io) talks to Podman's Docker-compatible
API (``podman system service``, its socket in ``DOCKER_HOST``). What this proves:
every command agentwrap gives the engine is one the Docker CLI accepts and its
API carries out (``run -d --init`` with the mounts, ``exec -it`` in the pane with
the agent's exit code, ``inspect``'s mounts and state, ``rm``), and a ``docker
kill`` ends the session with the container's reason. What it does not: a real
dockerd's own behaviour behind that API (its exec monitor, its state words).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator

import pytest
from conftest import AwEnv
from support import container as box
from support.waiting import wait_for
from test_containers_podman import ended, engine_of, logs, record, state

from agentwrap.containers.box import HOOK_SOCKET, INSIDE, box_dir, hooks_reach
from agentwrap.containers.engine import Engine
from agentwrap.containers.mounts import Mounts


@pytest.fixture(scope="module")
def docker_host(container: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("docker") is None:
        pytest.skip("no Docker CLI on PATH (scripts/setup.sh installs Debian's docker.io)")
    box.build_images()
    with box.docker_api(tmp_path_factory.mktemp("docker-api")) as host:
        yield host


@pytest.fixture
def docked(aw: AwEnv, docker_host: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwEnv]:
    aw.env["DOCKER_HOST"] = docker_host
    monkeypatch.setenv("DOCKER_HOST", docker_host)  # the test's own docker commands
    yield from engine_of(aw, "docker")


def docker(aw: AwEnv) -> Engine:
    program = shutil.which("docker")
    assert program
    return Engine(program, "docker")


def test_the_docker_cli_runs_execs_inspects_and_removes_the_sessions_container(
        docked: AwEnv) -> None:
    aw = docked
    image = box.build_images().agent
    flag, go = aw.project / "seen-inside", aw.project / "go"
    res = aw.cli("run", "--detach", "--name", "dk", "--image", image, "--", "sh", "-c",
                 f"while [ ! -e {go} ]; do sleep 0.1; done; touch {flag}; exit 7")
    assert res.returncode == 0, res.stderr
    # its inspect, through Podman's Docker API, reports the session's mounts
    info = docker(aw).inspect("agentwrap-dk")
    assert info is not None and info["State"]["Running"], info
    mounts = Mounts.from_inspect("agentwrap-dk", info)
    assert mounts.to_container(aw.project / "x") == str(aw.project / "x")
    assert hooks_reach(mounts, aw.paths, "dk")
    assert mounts.to_host(INSIDE / HOOK_SOCKET) == str(box_dir(aw.paths, "dk") / HOOK_SOCKET)
    go.touch()
    rec = ended(aw, "dk")
    assert rec["exit_code"] == 7, (rec, logs(aw))  # docker exec -it gave the agent's own code
    assert flag.exists()
    # docker rm: the container the session started is gone (podman's `rm -t 0` is no
    # flag of docker's: with it the Docker CLI refused and the container stayed)
    wait_for(lambda: docker(aw).inspect("agentwrap-dk") is None, 60,
             "the session's container removed", on_timeout=lambda: logs(aw))


def test_docker_kill_ends_the_session_with_the_containers_reason(docked: AwEnv) -> None:
    aw = docked
    image = box.build_images().agent
    res = aw.cli("run", "--detach", "--name", "dkk", "--image", image, "--", "sh", "-c",
                 "cat >/dev/null")
    assert res.returncode == 0, res.stderr
    wait_for(lambda: state(aw, "dkk")["state"] != "starting", 60, "the shell seen")
    assert docker(aw).run(["kill", "agentwrap-dkk"]).returncode == 0
    ended(aw, "dkk")
    st = state(aw, "dkk")
    assert "container agentwrap-dkk" in str(st.get("reason") or st), st
    assert record(aw, "dkk")["liveness"] != "running"
    wait_for(lambda: docker(aw).inspect("agentwrap-dkk") is None, 60, "the killed one removed")


def test_the_engines_daemon_gone_ends_the_session_with_a_reason(
        container: None, aw: AwEnv, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's daemon stops under a session (here Podman's Docker API service,
    the test's own, killed): the ``docker exec`` client loses it and ends, the engine
    cannot say what became of the container. The session ends with that reason (before:
    a failed ``inspect`` read as "container is gone", which it is not: the container
    still runs), and no message is left ``delivering``."""
    if shutil.which("docker") is None:
        pytest.skip("no Docker CLI on PATH (scripts/setup.sh installs Debian's docker.io)")
    image = box.build_images().agent
    with box.docker_service(tmp_path_factory.mktemp("docker-api-dies")) as (host, service):
        aw.env["DOCKER_HOST"] = host
        monkeypatch.setenv("DOCKER_HOST", host)
        gen = engine_of(aw, "docker")
        next(gen)
        try:
            res = aw.cli("run", "--detach", "--name", "dd", "--image", image, "--", "sh", "-c",
                         "cat >/dev/null")
            assert res.returncode == 0, res.stderr
            wait_for(lambda: state(aw, "dd")["state"] != "starting", 60, "the shell seen")
            sent = aw.cli("send", "dd", "echo hello", "--raw")
            assert sent.returncode == 0, sent.stderr
            service.kill()  # the daemon gone (SIGKILL: no goodbye to its clients)
            service.wait()
            ended(aw, "dd")
            st = state(aw, "dd")
            reason = str(st.get("reason") or st)
            assert "container agentwrap-dd" in reason and "engine did not answer" in reason, st
            assert "is gone" not in reason, st

            # a message ended mid-typing keeps the phase it reached (the record of how far it
            # got, e.g. failed at ``submitting``); only one still ``delivering`` is in flight
            def in_flight() -> list[dict[str, object]]:
                hist = json.loads(aw.cli("history", "dd", "--json").stdout or "[]")
                return [m for m in hist if m.get("status") == "delivering"]

            wait_for(lambda: not in_flight(), 30, "no message left delivering",
                     on_timeout=lambda: str(in_flight()))
            assert box.running("agentwrap-dd")  # the engine's container outlived its API
        finally:
            box.remove("agentwrap-dd")
            with contextlib.suppress(StopIteration):
                next(gen)
