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


@dataclass
class Dockerd:
    """A real Docker daemon the suite started (Debian's ``docker.io``: dockerd, which
    starts its own containerd): its data and exec roots and socket in a folder of its
    own, no bridge and no iptables (the tests' containers use the host's network, as
    with podman), ulimits at or below the hard limits (as containers.conf says for
    podman). Nothing system-wide: ``DOCKER_HOST`` names :attr:`host`."""

    root: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.root / 'docker.sock'}"

    def docker(self, *args: str, check: bool = True, timeout: float = 300,
               stdin: int | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["docker", *args], env={**os.environ, "DOCKER_HOST": self.host},
                              capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=stdin)
        if check and done.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)}: {done.returncode}: {done.stderr[-2000:]}")
        return done

    def answering(self) -> bool:
        return self.docker("version", check=False, timeout=30).returncode == 0

    def start(self) -> None:
        """dockerd (again, after :meth:`kill`: it finds its containerd still running and
        takes it back, as a daemon restart does)."""
        nofile, nproc = _limits()
        r = self.root
        self.proc = subprocess.Popen(
            ["dockerd", "--data-root", str(r / "data"), "--exec-root", str(r / "exec"),
             "-H", self.host, "--pidfile", str(r / "docker.pid"), "--iptables=false",
             "--ip-masq=false", "--bridge=none", "--storage-driver=overlay2",
             "--default-ulimit", f"nofile={nofile}:{nofile}",
             "--default-ulimit", f"nproc={nproc}:{nproc}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(r / "dockerd.log", "ab"), start_new_session=True)  # noqa: SIM115
        proc = self.proc
        wait_for(lambda: proc.poll() is not None or self.answering(), 90,
                 "dockerd answering", interval=0.2)
        if proc.poll() is not None:
            raise RuntimeError(f"dockerd ended ({proc.returncode}): "
                               f"{(r / 'dockerd.log').read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL to dockerd alone (no goodbye to its clients; its containerd and the
        containers go on, as when the daemon dies)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def load(self, image: str) -> float:
        """``image`` (built by podman) loaded into this daemon; the seconds it took."""
        t = time.monotonic()
        if self.docker("image", "inspect", image, check=False).returncode == 0:
            return 0.0
        with tempfile.TemporaryFile(dir=self.root) as tar:
            subprocess.run(["podman", "save", "--format", "docker-archive", image],
                           env=engine_env(), stdout=tar, stderr=subprocess.PIPE, check=True,
                           timeout=600)
            tar.seek(0)
            self.docker("load", stdin=tar.fileno(), timeout=600)
        return time.monotonic() - t

    def remove(self, name: str) -> None:
        self.docker("rm", "-f", name, check=False, timeout=120)

    def stop(self) -> None:
        """Every container gone, then dockerd and its containerd (by their pid files)."""
        if self.proc is not None and self.proc.poll() is None:
            ids = self.docker("ps", "-aq", check=False, timeout=60).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False, timeout=120)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        pidfile = self.root / "exec" / "containerd" / "containerd.pid"
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pidfile.read_text().strip()), 9)
        self.reap()

    def shims(self) -> dict[int, str]:
        """This daemon's containerd shims still running: pid -> the container's id. They
        outlive dockerd (and its containerd, which dies with it), holding the containers."""
        found: dict[int, str] = {}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"-address" in argv and b"-id" in argv and any(
                    a.startswith(str(self.root).encode()) for a in argv):
                found[int(proc.name)] = argv[argv.index(b"-id") + 1].decode()
        return found

    def reap(self) -> None:
        """Whatever a killed daemon left: each container's processes (its cgroup, as the
        daemon made it under ``docker/``), then its shim."""
        for pid, cid in self.shims().items():
            for procs in Path("/sys/fs/cgroup").glob(f"*/docker/{cid}/cgroup.procs"):
                with contextlib.suppress(OSError, ValueError):
                    for member in procs.read_text().split():
                        os.kill(int(member), 9)
            with contextlib.suppress(OSError):
                os.kill(pid, 9)


def dockerd_missing() -> str | None:
    """Why no dockerd can run here (None: it can)."""
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        return "no dockerd/docker on PATH (scripts/setup.sh installs Debian's docker.io)"
    if os.geteuid() != 0:
        return "dockerd needs root"
    return None


@contextlib.contextmanager
def dockerd() -> Iterator[Dockerd]:
    """A real dockerd of the test's own, stopped at the end with what it ran. Its folder
    is short (a unix socket path holds 108 bytes: containerd's lives in the exec root)."""
    root = Path(tempfile.mkdtemp(prefix="awdk-", dir="/tmp"))
    d = Dockerd(root)
    try:
        d.start()
        yield d
    finally:
        d.stop()
        # dockerd mounts its data root on itself, and a killed one leaves that (and
        # any container's overlay) mounted: off, deepest first, before the folder goes
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts if line.split()[1].startswith(str(root))]
        for point in sorted(points, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=30)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":  # warm the cache: python tests/support/container.py
    t = time.monotonic()
    built = build_images()
    print(built, f"{time.monotonic() - t:.1f}s")
