"""``[container] engine = "docker"`` (issue 39) with the real Docker CLI, against
two daemons: a real dockerd the suite starts (Debian's docker.io: dockerd with its
own containerd, :class:`support.container.Dockerd`) and Podman's Docker-compatible
API (``podman system service``). What this proves: every command agentwrap gives
the engine is one the Docker CLI accepts and each daemon carries out (``run -d
--init`` with the mounts, ``exec -it`` in the pane with the agent's exit code,
``inspect``'s mounts and state, ``rm``), a ``docker kill`` ends the session with
the container's reason, and the daemon dying under a session ends it with a reason
and no message in flight.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from conftest import AwEnv
from support import container as box
from support.waiting import wait_for
from test_containers_podman import ended, engine_of, logs, record, state

from agentwrap.containers.box import HOOK_SOCKET, INSIDE, box_dir, hooks_reach
from agentwrap.containers.engine import Engine
from agentwrap.containers.mounts import Mounts


@dataclass
class Daemon:
    """The daemon a test's Docker CLI talks to (``DOCKER_HOST``)."""

    host: str
    image: str  # the agent image, as this daemon names it


@pytest.fixture(scope="module", params=["dockerd", "podman-api"])
def daemon(request: pytest.FixtureRequest, container: None,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    if shutil.which("docker") is None:
        pytest.skip("no Docker CLI on PATH (scripts/setup.sh installs Debian's docker.io)")
    image = box.build_images().agent
    if request.param == "dockerd":
        why = box.dockerd_missing()
        if why is not None:
            pytest.skip(why)
        with box.dockerd() as d:
            d.load(image)
            yield Daemon(d.host, image)
    else:
        with box.docker_api(tmp_path_factory.mktemp("docker-api")) as host:
            yield Daemon(host, image)


@pytest.fixture
def docked(aw: AwEnv, daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> Iterator[AwEnv]:
    aw.env["DOCKER_HOST"] = daemon.host
    monkeypatch.setenv("DOCKER_HOST", daemon.host)  # the test's own docker commands
    yield from engine_of(aw, "docker")


def docker(aw: AwEnv) -> Engine:
    program = shutil.which("docker")
    assert program
    return Engine(program, "docker")


def test_the_docker_cli_runs_execs_inspects_and_removes_the_sessions_container(
        docked: AwEnv, daemon: Daemon) -> None:
    aw = docked
    image = daemon.image
    flag, go = aw.project / "seen-inside", aw.project / "go"
    res = aw.cli("run", "--detach", "--name", "dk", "--image", image, "--", "sh", "-c",
                 f"while [ ! -e {go} ]; do sleep 0.1; done; touch {flag}; exit 7")
    assert res.returncode == 0, res.stderr
    # its inspect reports the session's mounts
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


def test_docker_kill_ends_the_session_with_the_containers_reason(
        docked: AwEnv, daemon: Daemon) -> None:
    aw = docked
    image = daemon.image
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


def _the_daemon_dies_under_a_session(aw: AwEnv, host: str, image: str, kill: Callable[[], None],
                                     monkeypatch: pytest.MonkeyPatch,
                                     outlived: Callable[[], bool] | None = None) -> None:
    """A session in a container of the daemon at ``host``; ``kill()`` ends that daemon
    (SIGKILL: no goodbye to its clients). The ``docker exec`` client loses it and ends,
    and the engine cannot say what became of the container: the session ends with that
    reason (before: a failed ``inspect`` read as "container is gone", which it is not:
    the container still runs), and no message is left ``delivering``. ``outlived``:
    whether the container still runs (asked before the test's containers are removed)."""
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
        kill()
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
        assert outlived is None or outlived()  # the engine's container outlived its daemon
    finally:
        with contextlib.suppress(StopIteration):
            next(gen)


def test_podmans_docker_api_gone_ends_the_session_with_a_reason(
        container: None, aw: AwEnv, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("docker") is None:
        pytest.skip("no Docker CLI on PATH (scripts/setup.sh installs Debian's docker.io)")
    image = box.build_images().agent
    with box.docker_service(tmp_path_factory.mktemp("docker-api-dies")) as (host, service):
        def kill() -> None:
            service.kill()
            service.wait()

        try:
            _the_daemon_dies_under_a_session(aw, host, image, kill, monkeypatch,
                                             lambda: box.running("agentwrap-dd"))
        finally:
            box.remove("agentwrap-dd")


def test_dockerd_killed_ends_the_session_with_a_reason(
        container: None, aw: AwEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real daemon killed under a session: its containerd dies with it, the container
    goes on under its shim; the session ends with the reason all the same (the agent's
    terminal was the daemon's ``exec`` stream), nothing left in flight."""
    why = box.dockerd_missing()
    if why is not None:
        pytest.skip(why)
    image = box.build_images().agent
    with box.dockerd() as d:
        d.load(image)
        _the_daemon_dies_under_a_session(aw, d.host, image, d.kill, monkeypatch,
                                         lambda: bool(d.shims()))
