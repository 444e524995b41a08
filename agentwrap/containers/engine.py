"""The container engine a session's agent runs under: docker or podman, one CLI.

Both take the same words for what agentwrap asks (``run -d``, ``exec -it``,
``inspect``, ``stop``, ``rm -f``), so one :class:`Engine` drives either; which
one is ``[container] engine``, else the first of podman and docker on PATH.
A command that fails raises :class:`agentwrap.errors.ContainerProblem` with
the engine's own last words (never an environment value: variables reach the
engine by name, ``-e NAME``, their values from its environment).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import CONTAINER_ENGINES, ContainerConfig
from ..errors import ContainerEngineMissing, ContainerProblem

#: How each engine says a container does not exist (podman: "no such container X";
#: docker: "No such container: X", "No such object: X"), as against failing to answer.
NO_SUCH = re.compile(r"no such (?:container|object)", re.IGNORECASE)
#: An engine command agentwrap waits for (not the agent's exec): start, inspect, stop.
COMMAND_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Engine:
    """One engine's CLI: ``program`` (its path) and ``kind`` (docker or podman)."""

    program: str
    kind: str

    def run(self, args: Sequence[str], *, env: Mapping[str, str] | None = None,
            timeout: float = COMMAND_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``ENGINE ARGS``, its output kept; a failure (``check``) raises ContainerProblem."""
        try:
            done = subprocess.run([self.program, *args], capture_output=True, text=True,
                                  timeout=timeout, env=dict(env) if env is not None else None,
                                  stdin=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ContainerProblem(f"{self.kind} {args[0] if args else ''}: {exc}") from None
        if check and done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise ContainerProblem(f"{self.kind} {args[0] if args else ''} failed"
                                   f" ({done.returncode}): {said[-1][:300] if said else 'no words'}")
        return done

    def inspect(self, container: str) -> dict[str, Any] | None:
        """The container's ``inspect`` record, or None when the engine says there is no
        such container. Any other failure raises :class:`ContainerProblem`: an engine
        that does not answer (Docker's daemon, or Podman's API service, restarting)
        says nothing of the container, which may well still run; taken for "gone" it
        would end a session with a false reason and leave its container behind."""
        done = self.run(["inspect", "--type", "container", container], check=False)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()
            if NO_SUCH.search(said):
                return None
            lines = said.splitlines()
            raise ContainerProblem(f"{self.kind} inspect failed ({done.returncode}):"
                                   f" {lines[-1][:300] if lines else 'no words'}")
        try:
            data = json.loads(done.stdout)
        except ValueError:
            return None
        return data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else None

    def remove_args(self, container: str) -> list[str]:
        """``rm`` of a container whatever its state, without a stop's grace: podman's
        ``rm -f -t 0``; docker's ``rm -f`` (it kills at once, and has no ``-t``: with
        it the Docker CLI refuses the whole command and the container stays)."""
        return ["rm", "-f", *(("-t", "0") if self.kind == "podman" else ()), container]

    def running(self, container: str) -> bool:
        info = self.inspect(container)
        return bool(info and (info.get("State") or {}).get("Running"))


def find_engine(cfg: ContainerConfig, path: str | None = None) -> Engine:
    """The engine ``cfg`` names, else podman, else docker, found on ``path`` (PATH)."""
    kinds = (cfg.engine,) if cfg.engine else ("podman", "docker")
    for kind in kinds:
        if kind not in CONTAINER_ENGINES:
            continue
        program = shutil.which(kind, path=path)
        if program:
            return Engine(program, kind)
    raise ContainerEngineMissing(f"no container engine: {' or '.join(kinds)} not on PATH")


__all__ = ["COMMAND_TIMEOUT_S", "NO_SUCH", "Engine", "find_engine"]
