"""Checks after the agent's own edit tools, answered in the same turn.

The between-tool-calls hook (Claude ``PostToolBatch``/``PostToolUse``, Codex
``PostToolUse``, Gemini ``AfterTool``) calls :func:`after_tool` before it
drains the queue: when the tool was an edit, the ``edit`` sources whose paths
match the touched files run now, synchronously (each bounded by its
timeout), their news is queued, and the same hook run hands it to the model.

The agent kills a hook that outlives its timeout (agentwrap registers 10 s),
and a test suite may take longer. So the checks run in a process of their own
(a session of its own: the agent's kill does not reach it), which the hook
waits for at most :data:`SYNC_WAIT_S`: done by then, their news is in this
turn; still running, the hook hands over what waits and leaves, and the
result, queued when the checks end, goes in at the next tool call or is
typed once the agent is idle.

This module is imported by every between-tool-calls hook, so it imports
nothing heavy until it knows the tool edited files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agents.all_agents import AGENTS, get

if TYPE_CHECKING:
    from ..paths import Paths

#: The edit tools, per agent, and the tool_input fields naming the file (each
#: agent's ``edit_tools``, :mod:`agentwrap.agents`; (): the paths are in the patch text).
EDIT_TOOLS: dict[str, dict[str, tuple[str, ...]]] = {
    a.name: dict(a.edit_tools) for a in AGENTS.values() if a.edit_tools}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$",
                         re.MULTILINE)
MAX_FILES = 200
#: How long the hook waits for the checks (the hooks' 10 s timeout, less time
#: to start, hand over the queue and answer).
SYNC_WAIT_S = 7.0


def _calls(payload: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    batch = payload.get("tool_calls")
    if isinstance(batch, list):  # Claude's PostToolBatch
        for call in batch:
            if isinstance(call, Mapping) and isinstance(call.get("tool_input"), Mapping):
                yield str(call.get("tool_name", "")), call["tool_input"]
    elif isinstance(payload.get("tool_input"), Mapping):
        yield str(payload.get("tool_name", "")), payload["tool_input"]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def edited_paths(agent: str, payload: Mapping[str, Any]) -> list[Path]:
    """The files the payload's edit tools touched, absolute (relative ones
    taken from the payload's ``cwd``); [] for any other tool."""
    tools = EDIT_TOOLS.get(agent, {})
    spec = get(agent)
    patches = spec is not None and spec.patch_edits
    cwd = Path(str(payload.get("cwd") or "."))
    found: list[Path] = []
    for name, tool_input in _calls(payload):
        patch = patches and any("*** Begin Patch" in t for t in _strings(tool_input))
        if name not in tools and not patch:  # Codex runs apply_patch from its shell tool too
            continue
        names: list[str] = []
        if tools.get(name) and not patch:
            names = [str(tool_input[k]) for k in tools[name] if isinstance(tool_input.get(k), str)]
        else:
            for text in _strings(tool_input):
                names += [a or b for a, b in _PATCH_FILE.findall(text)]
        for raw in names[:MAX_FILES]:
            n = raw.strip()
            if n and "\x00" not in n:
                found.append(cwd / n if not n.startswith("/") else Path(n))
    return list(dict.fromkeys(found))[:MAX_FILES]


def on_host(edited: list[Path], payload: Mapping[str, Any], to_host: Callable[[str], str],
            log: Callable[[str], None]) -> tuple[list[Path], dict[str, Any]]:
    """A boxed agent's edited files (as :func:`edited_paths` read them from its own
    payload: the container's paths) and its payload's ``cwd``, as the host's,
    through ``to_host`` (the container's mounts). A path no mount holds is not
    checked (:class:`~agentwrap.errors.PathNotMounted`, logged), never taken for a
    host file of the same name; no ``cwd`` on the host: nothing is checked."""
    from ..errors import PathNotMounted

    try:
        host = {**payload, "cwd": to_host(str(payload.get("cwd") or ""))}
    except PathNotMounted as exc:
        log(f"feedback: refused: {exc.message}")
        return [], dict(payload)
    out: list[Path] = []
    for p in edited:
        try:
            out.append(Path(to_host(str(p))))
        except PathNotMounted as exc:
            log(f"feedback: refused: {exc.message}")
    return list(dict.fromkeys(out)), host


def _has_edit_sources(paths: Paths, payload: Mapping[str, Any]) -> bool:
    """Whether the project the agent works in has ``edit`` sources that may
    run: most have none, and they should not pay for a process per edit."""
    from ..config import load_config
    from .sources import select

    cwd = Path(str(payload.get("cwd") or "/"))
    return bool(select(load_config(paths, cwd)).on("edit"))


def after_tool(
    paths: Paths, session: str, agent: str, payload: Mapping[str, Any],
    log: Callable[[str], None] = lambda _: None, *, wait_s: float = SYNC_WAIT_S,
    env: Mapping[str, str] | None = None, to_host: Callable[[str], str] | None = None,
) -> None:
    """Run the session's ``edit`` sources on the files the tool edited, in a
    process of their own, and wait for it at most ``wait_s``; nothing when the
    tool was not an edit. Never raises: the hook must still hand over what
    waits (a failure goes to ``log``)."""
    try:
        edited = edited_paths(agent, payload)
        if to_host is not None and edited:  # in a container: the host's files (issue 39)
            edited, payload = on_host(edited, payload, to_host, log)
        if not edited or not _has_edit_sources(paths, payload):
            return
        import os
        import subprocess
        import sys

        # the budget is per turn where the payload names the turn (Claude, Codex);
        # Gemini's does not: each hook run has a budget of its own
        turn = payload.get("prompt_id") or payload.get("turn_id")
        argv = [sys.executable, "-m", "agentwrap.feedback.checks", "--session", session]
        if turn:
            argv += ["--turn", str(turn)]
        proc = subprocess.Popen(
            [*argv, "--", *(str(p) for p in edited)], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            env=dict(os.environ if env is None else env), cwd="/",
        )
        try:
            code = proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            log(f"feedback: checks of {len(edited)} edited file(s) still run after {wait_s:g} s;"
                " their result follows when they end")
            return
        if code != 0:
            log(f"feedback: the checks exited {code}")
    except Exception as exc:  # noqa: BLE001 - a check must never fail the agent's hook
        log(f"feedback failed: {type(exc).__name__}: {exc}")
