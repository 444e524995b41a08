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
    private = launch.folder / "kimi-home"
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
)

__all__ = ["AGENT", "HOME_ENV", "NAME", "kimi_dir", "normalise", "register"]
