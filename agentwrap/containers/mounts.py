"""Paths inside and outside a container, through the mounts its engine reports.

A file agentwrap writes for a container's agent (the instruction-file fallback in
the project, an answer dropped into the answer folder) must be where the agent
sees it, and a path the agent names (a file it edited, its transcript) is the
container's. Both are translated through the container's bind mounts, as
``inspect`` reports them (``Mounts``: ``Source`` on the host, ``Destination``
inside); the longest mount that holds a path wins, as in the kernel's view.
A path no mount holds is refused (:class:`agentwrap.errors.PathNotMounted`):
written on the host it would never reach the agent, named inside it is no
file of the host's.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ..errors import PathNotMounted


@dataclass(frozen=True)
class Mount:
    """One bind mount: ``source`` on the host at ``destination`` in the container."""

    source: PurePosixPath
    destination: PurePosixPath
    writable: bool = True


def _under(path: PurePosixPath, root: PurePosixPath) -> PurePosixPath | None:
    """``path`` relative to ``root``, or None when ``root`` does not hold it."""
    try:
        return path.relative_to(root)
    except ValueError:
        return None


def _clean(path: str | os.PathLike[str]) -> PurePosixPath:
    """Absolute and normalised (``..`` resolved lexically: a path that climbs
    out of a mount must not pass as inside it)."""
    text = os.fspath(path)
    if not text.startswith("/"):
        raise PathNotMounted(f"not an absolute path: {text!r}")
    return PurePosixPath(os.path.normpath(text))


@dataclass(frozen=True)
class Mounts:
    """A container's bind mounts (``container``: its name, for the errors); ``home``:
    the agent's HOME inside, when the launch knew it (its readers' roots)."""

    container: str
    mounts: tuple[Mount, ...]
    home: PurePosixPath | None = None

    @classmethod
    def from_inspect(cls, container: str, info: Mapping[str, Any]) -> Mounts:
        """The bind mounts of one ``inspect`` record (volumes and tmpfs are no host path)."""
        found: list[Mount] = []
        for m in info.get("Mounts") or ():
            if not isinstance(m, Mapping) or m.get("Type", "bind") != "bind":
                continue
            src, dst = m.get("Source"), m.get("Destination")
            if isinstance(src, str) and isinstance(dst, str) and src.startswith("/") \
                    and dst.startswith("/"):
                found.append(Mount(PurePosixPath(src), PurePosixPath(dst), bool(m.get("RW", True))))
        return cls(container, tuple(found), _env_home(info))

    def _best(self, path: PurePosixPath, side: str) -> tuple[Mount, PurePosixPath] | None:
        best: tuple[Mount, PurePosixPath] | None = None
        for m in self.mounts:
            root = m.source if side == "host" else m.destination
            rest = _under(path, root)
            if rest is not None and (best is None or len(root.parts) > len(
                    (best[0].source if side == "host" else best[0].destination).parts)):
                best = (m, rest)
        return best

    def to_container(self, host_path: str | os.PathLike[str], *, write: bool = False) -> str:
        """Where the agent sees ``host_path``; PathNotMounted when no mount holds it
        (``write``: or only a read-only one does)."""
        path = _clean(host_path)
        best = self._best(path, "host")
        if best is None or (write and not best[0].writable):
            raise PathNotMounted(
                f"{path} is {'not mounted' if best is None else 'mounted read-only'} in container"
                f" {self.container}: the agent there would never see it")
        return str(best[0].destination / best[1])

    def to_host(self, inside: str | os.PathLike[str]) -> str:
        """The host's path of the container's ``inside``; PathNotMounted when no mount holds it."""
        path = _clean(inside)
        best = self._best(path, "container")
        if best is None:
            raise PathNotMounted(f"{path} in container {self.container} is no file of the"
                                 " host's (no mount holds it)")
        return str(best[0].source / best[1])

    def to_json(self) -> str:
        """The mounts as :meth:`from_json` reads them back (kept in the session's launch
        folder, which the container sees read-only: the agent cannot remap them)."""
        return json.dumps({"container": self.container, "mounts": [
            {"source": str(m.source), "destination": str(m.destination), "rw": m.writable}
            for m in self.mounts], "home": None if self.home is None else str(self.home)})

    @classmethod
    def from_json(cls, text: str) -> Mounts:
        data = json.loads(text)
        home = data.get("home")
        return cls(str(data["container"]), tuple(
            Mount(_clean(m["source"]), _clean(m["destination"]), bool(m["rw"]))
            for m in data["mounts"]), _clean(home) if isinstance(home, str) and home else None)

    def reader_view(self, cwd: str) -> tuple[str, dict[str, str]]:
        """What an agent's conversation reader is given for an agent in this
        container: the project folder as the agent named it (its records are
        filed by that path: Claude's ``projects/-work/``), and an environment
        whose only HOME is the host's folder of the agent's own (its HOME mounted
        at another path is read where the host has it). Nothing of the host's
        own environment: a config dir of the supervisor's is no folder of the
        agent's, and a HOME no mount holds leaves the reader none (it never guesses)."""
        try:
            inside = self.to_container(cwd)
        except PathNotMounted:
            inside = cwd
        if self.home is None:
            return inside, {}
        try:
            return inside, {"HOME": self.to_host(self.home)}
        except PathNotMounted:
            return inside, {}

    def text_inside(self, text: str) -> str:
        """``text`` written on the host for the agent (a check's output, a change
        list) with every host path a mount holds named as the agent sees it: the
        longest mount first, a path's whole components only (``/proj`` is not the
        start of ``/project``). A path no mount holds stays as it is: the agent
        cannot reach it either way, and nothing is made up for it."""
        if not text or all(m.source == m.destination for m in self.mounts):
            return text
        moved = sorted(self.mounts, key=lambda m: len(str(m.source)), reverse=True)
        where = {str(m.source): str(m.destination) for m in reversed(moved)}
        roots = "|".join(re.escape(str(m.source)) for m in moved if str(m.source) != "/")
        if not roots:
            return text
        found = re.compile(rf"(?<![\w.~/-])({roots})(?=/|\.(?![\w.-])|[^\w.-]|$)")
        return found.sub(lambda hit: where[hit.group(1)], text)

    def holds(self, host_paths: Iterable[str | os.PathLike[str]], *, write: bool = False) -> bool:
        try:
            for p in host_paths:
                self.to_container(p, write=write)
        except PathNotMounted:
            return False
        return True


def _env_home(info: Mapping[str, Any]) -> PurePosixPath | None:
    """The HOME of an ``inspect`` record's environment (``Config.Env``), if absolute."""
    config = info.get("Config")
    env = config.get("Env") if isinstance(config, Mapping) else None
    for item in env if isinstance(env, list) else ():
        if isinstance(item, str) and item.startswith("HOME=/"):
            return PurePosixPath(os.path.normpath(item[5:]))
    return None


#: The payload fields that name one path of the agent's (the hooks' common ones).
PATH_FIELDS = ("cwd", "transcript_path")


def host_payload(mounts: Mounts, payload: Mapping[str, Any],
                 refused: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """A hook payload from inside the container as the host reads it: ``cwd``,
    ``transcript_path`` and every absolute path in a tool's input (one call's or a
    batch's) translated to the host's; one no mount holds is dropped (told to
    ``refused``), never kept as a container path the host would take for its own.
    For what agentwrap keeps and runs on the host (the handoff notes, feedback);
    the agent's own words (a permission question's command) stay as it said them."""

    def path(value: str, what: str) -> str | None:
        try:
            return mounts.to_host(value)
        except PathNotMounted as exc:
            refused(f"{what}: {exc.message}")
            return None

    def tool_input(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        out: dict[str, Any] = {}
        for key, v in value.items():
            if isinstance(v, str) and v.startswith("/") and "\n" not in v and " " not in v:
                moved = path(v, f"tool_input.{key}")
                if moved is not None:
                    out[key] = moved
            else:
                out[key] = v
        return out

    host = dict(payload)
    for key in PATH_FIELDS:
        if isinstance(host.get(key), str) and host[key]:
            moved = path(host[key], key)
            if moved is None:
                del host[key]
            else:
                host[key] = moved
    if "tool_input" in host:
        host["tool_input"] = tool_input(host["tool_input"])
    if isinstance(host.get("tool_calls"), list):
        host["tool_calls"] = [{**c, "tool_input": tool_input(c.get("tool_input"))}
                              if isinstance(c, Mapping) else c for c in host["tool_calls"]]
    return host


__all__ = ["PATH_FIELDS", "Mount", "Mounts", "host_payload"]
