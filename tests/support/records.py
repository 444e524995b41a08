"""A session record for registry tests: a stand-in's, started now."""

from __future__ import annotations

import time

from agentwrap.sessions.registry import SessionRecord


def record(name: str, **kw: object) -> SessionRecord:
    """``name``'s record with the stand-in's defaults; ``kw`` overrides any field."""
    base: dict[str, object] = {
        "name": name, "profile": "standin", "backend": "tmux", "command": ["x"], "cwd": "/",
        "started": time.time(),
    }
    base.update(kw)
    return SessionRecord(**base)  # type: ignore[arg-type,unused-ignore]
