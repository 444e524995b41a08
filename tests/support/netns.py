"""A network partition the tests make themselves: a network namespace joined
to the root namespace by a veth pair, and a cable to pull.

A "host" whose processes run in the namespace (``ip netns exec``, see
:attr:`Partition.prefix`) reaches the root namespace only through the veth:
loopback and the pair's own two addresses, nothing else of the machine.
:meth:`Partition.cut` sets the root end down, so the namespace's end loses
its carrier and every packet either way is dropped without a word (a pulled
cable, not a refused connection); :meth:`Partition.mend` puts it back.

Names are unique per run (a random part: parallel runs never collide) and
the addresses are a random /30 of 198.18.0.0/15, the range reserved for
network tests (RFC 2544). Making one needs root (CAP_NET_ADMIN and
CAP_SYS_ADMIN) and iproute2; :func:`unavailable` says why it cannot be made,
for a clean skip. :meth:`Partition.close` deletes the namespace, which takes
the pair with it, even after a failed test.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass, field

NETWORK = ipaddress.IPv4Network("198.18.0.0/15")


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def unavailable() -> str | None:
    """Why no partition can be made here (a skip's reason), or None."""
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed: apt-get install -y iproute2"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN): the partition tests run in CI as root"
    probe = "awprobe" + secrets.token_hex(3)
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_subnet() -> ipaddress.IPv4Network:
    """A random /30 of :data:`NETWORK` no address of this machine is in."""
    used = _ip("-4", "-o", "addr", "show").stdout
    while True:
        offset = secrets.randbelow(NETWORK.num_addresses // 4) * 4
        net = ipaddress.IPv4Network(f"{NETWORK.network_address + offset}/30")
        if not any(str(a) in used for a in net):
            return net


@dataclass
class Partition:
    """A namespace ``name`` and the veth between it and the root namespace:
    the root end ``outer`` at :attr:`outer_ip`, the namespace's at :attr:`inner_ip`."""

    name: str
    outer: str
    inner: str
    subnet: ipaddress.IPv4Network
    made: list[str] = field(default_factory=list)

    @property
    def outer_ip(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def inner_ip(self) -> str:
        return str(self.subnet.network_address + 2)

    @property
    def prefix(self) -> list[str]:
        """argv before a command that is to run in the namespace."""
        return ["ip", "netns", "exec", self.name]

    @classmethod
    def make(cls) -> Partition:
        tag = secrets.token_hex(4)  # interface names: at most 15 bytes
        part = cls(f"awns{tag}", f"aw{tag}o", f"aw{tag}i", _free_subnet())
        try:
            _ip("netns", "add", part.name)
            part.made.append("netns")
            _ip("link", "add", part.outer, "type", "veth", "peer", "name", part.inner)
            part.made.append("veth")
            _ip("link", "set", part.inner, "netns", part.name)
            _ip("addr", "add", f"{part.outer_ip}/30", "dev", part.outer)
            _ip("link", "set", part.outer, "up")
            _ip("addr", "add", f"{part.inner_ip}/30", "dev", part.inner, netns=part.name)
            _ip("link", "set", part.inner, "up", netns=part.name)
            _ip("link", "set", "lo", "up", netns=part.name)
        except BaseException:
            part.close()
            raise
        return part

    def cut(self) -> None:
        """Pull the cable: nothing crosses, nobody is told."""
        _ip("link", "set", self.outer, "down")

    def mend(self) -> None:
        _ip("link", "set", self.outer, "up")

    def close(self) -> None:
        """Delete what was made (the namespace takes its end of the pair, and
        a veth goes with its peer) and end what still runs in the namespace
        (a host's supervisors, tmux, agents); safe to call twice."""
        if "netns" in self.made:
            pids = _ip("netns", "pids", self.name, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        if "veth" in self.made:
            _ip("link", "del", self.outer, check=False)
        if "netns" in self.made:
            _ip("netns", "del", self.name, check=False)
        self.made.clear()
