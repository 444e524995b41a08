"""A real Podman for the ``container`` layer: its config, and the images the tests build offline.

What runs on these machines is ``/work/shared/reference/containers.md``'s (rootful Podman 4.3 +
runc + cgroupfs, rlimits at or below the hard limits podman itself runs with, ``detach_keys``
empty): :func:`containers_conf` writes that config into the test cache and the tests point
``CONTAINERS_CONF`` at it, so nothing system-wide changes.

No registry is reachable: the base image is a Debian rootfs made with ``debootstrap --variant=
minbase`` and ``podman import``-ed; the agent image adds ``procps`` (``ps``/``pkill`` inside, for
``stop``) on top. Both are built once and cached, named by a hash of their recipe
(``localhost/agentwrap-test-base:<hash>``, ``localhost/agentwrap-test-agent:<hash>``), the rootfs
tarball under ``~/.cache/agentwrap-tests/``: a cold build is debootstrap's minute, a cached one a
``podman image exists``. The agent CLIs are not in the image: the tests bind-mount
``/opt/agentwrap-agents`` read-only at the same path (Claude Code's native ``claude.exe`` needs
only glibc, which bookworm has).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .waiting import wait_for

CACHE = Path(os.environ.get("AGENTWRAP_TEST_CACHE") or Path.home() / ".cache" / "agentwrap-tests")
SUITE = "bookworm"
AGENTS_DIR = Path("/opt/agentwrap-agents")
BASE_RECIPE = f"debootstrap --variant=minbase {SUITE}"
AGENT_CONTAINERFILE = """\
FROM {base}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends procps ca-certificates \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
CMD ["sleep", "infinity"]
"""


def _limits() -> tuple[int, int]:
    """nofile at or below this shell's hard limit, nproc at or below min(32768, its hard limit)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    big = 1 << 20
    nofile = min(20000, nofile if nofile != resource.RLIM_INFINITY else big)
    nproc = min(32768, nproc if nproc != resource.RLIM_INFINITY else big)
    return nofile, nproc


def containers_conf() -> Path:
    """The containers.conf the reference gives, in the cache (``CONTAINERS_CONF`` names it)."""
    nofile, nproc = _limits()
    text = (
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n\n'
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
        'detach_keys = ""\n'
    )
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / "containers.conf"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def engine_env() -> dict[str, str]:
    """The environment every ``podman`` the tests run gets."""
    return {**os.environ, "CONTAINERS_CONF": str(containers_conf())}


def podman(*args: str, check: bool = True, timeout: float = 600,
           input: bytes | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], env=engine_env(), capture_output=True, text=True,
                          timeout=timeout, check=False, input=input.decode() if input else None)
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {done.returncode}: {done.stderr[-2000:]}")
    return done


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _exists(image: str) -> bool:
    return podman("image", "exists", image, check=False).returncode == 0


@dataclass(frozen=True)
class Built:
    """The images, and what each build took this time (0.0: it was cached)."""

    base: str
    agent: str
    base_s: float
    agent_s: float


def build_images() -> Built:
    """The base and the agent image, built unless cached (one builder at a time: a lock)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "images.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        base = f"localhost/agentwrap-test-base:{_digest(BASE_RECIPE)}"
        t0, base_s = time.monotonic(), 0.0
        if not _exists(base):
            _build_base(base)
            base_s = time.monotonic() - t0
        containerfile = AGENT_CONTAINERFILE.format(base=base)
        agent = f"localhost/agentwrap-test-agent:{_digest(containerfile)}"
        t1, agent_s = time.monotonic(), 0.0
        if not _exists(agent):
            with tempfile.TemporaryDirectory(dir=CACHE) as ctx:
                (Path(ctx) / "Containerfile").write_text(containerfile)
                podman("build", "--network", "host", "-t", agent, ctx, timeout=900)
            agent_s = time.monotonic() - t1
        return Built(base, agent, base_s, agent_s)


def _build_base(image: str) -> None:
    """debootstrap's rootfs, tarred once into the cache, imported as ``image``."""
    tarball = CACHE / f"rootfs-{_digest(BASE_RECIPE)}.tar"
    if not tarball.exists():
        if shutil.which("debootstrap") is None:
            raise RuntimeError("debootstrap not installed: apt-get install -y debootstrap")
        with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
            root = Path(scratch) / "rootfs"
            subprocess.run(["debootstrap", "--variant=minbase", SUITE, str(root)], check=True,
                           capture_output=True, timeout=900)
            part = tarball.with_suffix(".part")
            subprocess.run(["tar", "-C", str(root), "-cf", str(part), "."], check=True,
                           timeout=300)
            part.replace(tarball)
    podman("import", str(tarball), image, timeout=600)


def remove(name: str) -> None:
    """A container the test started, gone whatever its state."""
    podman("rm", "-f", "-t", "0", name, check=False, timeout=120)


def running(name: str) -> bool:
    done = podman("inspect", "-f", "{{.State.Running}}", name, check=False)
    return done.returncode == 0 and done.stdout.strip() == "true"


@contextlib.contextmanager
def docker_api(folder: Path) -> Iterator[str]:
    """Podman serving the Docker API on a socket in ``folder`` (there is no dockerd on
    these machines): yields the ``DOCKER_HOST`` the Docker CLI is pointed at. The
    service is this test's own process, ended (by its pid) when the block ends."""
    with docker_service(folder) as (host, _):
        yield host


@contextlib.contextmanager
def docker_service(folder: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """:func:`docker_api`, with the service's process (a test that kills it: the
    daemon gone under a session)."""
    sock = folder / "docker.sock"
    proc = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{sock}"],
                            env=engine_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    host = f"unix://{sock}"
    try:
        wait_for(lambda: proc.poll() is not None or subprocess.run(
            ["docker", "version"], env={**engine_env(), "DOCKER_HOST": host},
            capture_output=True, timeout=30, check=False).returncode == 0, 60,
            "podman's Docker API answering", interval=0.2)
        if proc.poll() is not None:
            raise RuntimeError(f"podman system service ended ({proc.returncode})")
        yield host, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":  # warm the cache: python tests/support/container.py
    t = time.monotonic()
    built = build_images()
    print(built, f"{time.monotonic() - t:.1f}s")
