"""Kimi Code (``patterns/kimi.toml``): ``[[hooks]]`` in a private ``KIMI_CODE_HOME``.

2.1.0 takes hooks from ``[[hooks]]`` in its ``config.toml`` (or an installed
plugin) only, no flag. So the launch gets a private ``KIMI_CODE_HOME``: the
person's config.toml with agentwrap's ``[[hooks]]`` appended (their text kept
as it is), every other entry of their Kimi dir linked. Signals only: its
PostToolUse runs in the background and its output never reaches the model (a
message handed there never reached it), so its messages are typed after the
turn. What Kimi writes to config.toml in the session (``/model``, a login),
and entries it makes new at the top of its dir (a first run's ``sessions/``),
are not kept (the notes say so); without a config.toml of theirs yet nothing
is registered. Its payloads are Claude's names and fields, its ``prompt`` a
list of content parts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .base import TYPED, Agent, StartContext

if TYPE_CHECKING:
    from pathlib import Path

    from .conversation import Entry, Query
    from .launch import Launch

NAME = "kimi"
HOME_ENV = "KIMI_CODE_HOME"


def kimi_dir(env: Mapping[str, str]) -> Path:
    """The person's Kimi Code dir: ``KIMI_CODE_HOME`` or ``~/.kimi-code``."""
    from .launch import agent_dir

    return agent_dir(env, HOME_ENV, ".kimi-code")


def register(launch: Launch) -> None:
    """A private ``KIMI_CODE_HOME``: the person's config.toml with agentwrap's
    ``[[hooks]]`` appended, the rest of their dir linked."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    from ..paths import write_private
    from .launch import HOOK_TIMEOUT_S, SIGNAL_CHANNEL, link_dir

    out = launch.out
    if not launch.hooks:
        return
    own = kimi_dir(launch.env)
    theirs = own / "config.toml"
    why = ""
    try:
        text = theirs.read_text(encoding="utf-8")
    except FileNotFoundError:
        out.notes.append(f"hooks: not registered for Kimi Code: {theirs} does not exist yet"
                         " (its first run writes it); they are from the next launch on")
        return
    except (OSError, UnicodeDecodeError) as exc:
        text, why = "", f"{theirs} could not be read ({exc})"
    added = "".join(
        f"\n[[hooks]]\nevent = {json.dumps(e)}\ncommand = {json.dumps(launch.command(e))}"
        f"\ntimeout = {HOOK_TIMEOUT_S}\n" for e in AGENT.hook_events)
    merged = text + ("" if not text or text.endswith("\n") else "\n") + added
    if not why:
        try:
            hooks_seen = tomllib.loads(merged).get("hooks")
            if not isinstance(hooks_seen, list) or len(hooks_seen) < len(AGENT.hook_events):
                why = f"{theirs} has hooks agentwrap cannot add to"
        except tomllib.TOMLDecodeError as exc:
            why = f"{theirs} with agentwrap's [[hooks]] is not TOML ({exc})"
    if why:
        out.notes.append(f"hooks: not registered for Kimi Code: {why}")
        return
    private = launch.folder / PRIVATE_HOME
    if not out.dry_run:
        link_dir(own, private, "config.toml")
        write_private(private / "config.toml", merged.encode("utf-8"))
    out.files.append(private / "config.toml")
    out.env[HOME_ENV] = str(private)
    out.notes.append(f"hook-signals: through a private KIMI_CODE_HOME ({private}): your"
                     " config.toml with agentwrap's hooks (they tell the agent's state;"
                     " messages are typed after a turn); config changed in this session is"
                     " not kept")
    out.channels.insert(0, SIGNAL_CHANNEL)


def normalise(payload: dict[str, Any]) -> dict[str, Any]:
    """Its prompt (a list of content parts) as its text, so the notes count and keep it."""
    prompt = payload.get("prompt")
    if isinstance(prompt, list):
        text = "".join(str(p.get("text") or "") for p in prompt
                       if isinstance(p, dict) and p.get("type") == "text")
        return {**payload, "prompt": text}
    return payload


# --- its conversation (issue 42) ------------------------------------------------------

#: The private Kimi dir a launch with hooks makes, in its launch dir (:func:`register`).
PRIVATE_HOME = "kimi-home"
#: The main agent's record of a session: ``sessions/<workspace>/<session>/agents/main/wire.jsonl``.
WIRE = "wire.jsonl"


def wire_dirs(query: Query) -> list[Path]:
    """Kimi Code's record folders of the session's project only: in the
    launch's private Kimi dir and the person's (``KIMI_CODE_HOME`` or
    ``~/.kimi-code``), the workspaces whose ``root`` (``workspaces.json``) is
    the project, each session's main agent folder."""
    from pathlib import Path

    from .conversation import cwds, home_of, read_whole

    roots = [Path(query.launch_dir) / PRIVATE_HOME] if query.launch_dir else []
    own = home_of(query.environ, HOME_ENV, ".kimi-code")
    roots += [own] if own is not None else []
    wanted = set(cwds(query))
    out: list[Path] = []
    for root in dict.fromkeys(roots):
        try:
            spaces = json.loads(read_whole(root / "workspaces.json", 1 << 20) or b"{}")
        except ValueError:
            continue
        table = spaces.get("workspaces") if isinstance(spaces, dict) else None
        for space, about in (table or {}).items() if isinstance(table, dict) else []:
            if not isinstance(about, dict) or about.get("root") not in wanted or "/" in space:
                continue
            try:
                out += [p / "agents" / "main" for p in (root / "sessions" / space).iterdir()
                        if p.name.startswith("session_") and not p.is_symlink()]
            except OSError:
                continue
    return out


def read_conversation(query: Query) -> list[Entry]:
    """The conversation in Kimi Code's wire record (2.1.0, one event a line):
    its ``agent.message.appended`` events, the person's input (``meta.source``
    ``input``: not the reminders it injects) and the model's text and
    ``toolCalls``, from the newest record of :func:`wire_dirs` written since
    the session started (its hooks name none). A launch's private dir is
    removed with the session (its first run's ``sessions/`` with it)."""
    from . import conversation as c
    from .conversation import EntryKind, cut

    path = c.newest(wire_dirs(query), (WIRE,), query.started)
    out: list[Entry] = []
    for record in c.json_lines(c.tail_lines(path) if path is not None else None):
        at, outer = record.get("time"), record.get("message")
        if record.get("type") != "agent.message.appended" or not isinstance(at, int | float) \
                or not isinstance(outer, dict) or not isinstance(outer.get("message"), dict):
            continue
        message, meta = outer["message"], outer.get("meta")
        role, source = message.get("role"), meta.get("source") if isinstance(meta, dict) else None
        if (role, source) not in (("user", "input"), ("assistant", "llm")):
            continue
        parts, calls = message.get("content"), message.get("toolCalls")
        for part in parts if isinstance(parts, list) else []:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str) and text.strip() and part.get("type") == "text":
                out.append(c.Entry(EntryKind.PROMPT if role == "user" else EntryKind.REPLY,
                                   at / 1000, cut(text.strip()), "transcript"))
        for call in calls if isinstance(calls, list) and role == "assistant" else []:
            if not isinstance(call, dict):
                continue
            args = call.get("arguments")
            try:
                given = json.loads(args) if isinstance(args, str) else args
            except ValueError:
                given = None
            out.append(c.tool_entry(at / 1000, call.get("name"), given))
    return out


AGENT = Agent(
    name=NAME,
    hook_events=("UserPromptSubmit", "Stop", "PermissionRequest", "Interrupt"),
    events={  # Claude's names and fields (Kimi Code 2.1.0, [[hooks]] in a private config.toml)
        "UserPromptSubmit": "prompt_submitted",  # waited for; the person's prompts only
        "Stop": "turn_end",  # waited for; no reply text in it
        "PermissionRequest": "permission_prompt",  # in the background, as its dialog opens
        "Interrupt": "turn_end",  # the turn was cancelled (Esc)
    },
    normalise=normalise,
    start_context=StartContext("typed", f"{TYPED}: no session-start hook is registered"),
    register=register,
    conversation=read_conversation,
)

__all__ = ["AGENT", "HOME_ENV", "NAME", "PRIVATE_HOME", "WIRE", "kimi_dir", "normalise",
           "read_conversation", "register", "wire_dirs"]
