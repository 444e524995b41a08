"""Where agentwrap keeps things, following the XDG base-directory spec.

All paths come from one :class:`Paths` value built from an environment
mapping, never from module globals, so tests get full isolation by passing a
temporary ``XDG_*`` environment (and with it their own tmux server, whose
socket lives in the runtime dir).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidMessage

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_session_name(name: str) -> str:
    """Session names become file and tmux names: keep them boring."""
    if not _NAME_RE.match(name):
        raise InvalidMessage(
            f"invalid session name {name!r}",
            hint="use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


@dataclass(frozen=True)
class Paths:
    config_dir: Path
    state_dir: Path
    runtime_dir: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Paths:
        env = os.environ if env is None else env
        home = Path(env.get("HOME") or Path.home())
        config = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "agentwrap"
        state = Path(env.get("XDG_STATE_HOME") or home / ".local" / "state") / "agentwrap"
        if env.get("XDG_RUNTIME_DIR"):
            runtime = Path(env["XDG_RUNTIME_DIR"]) / "agentwrap"
        else:
            runtime = Path("/tmp") / f"agentwrap-{os.getuid()}"
        return cls(config_dir=config, state_dir=state, runtime_dir=runtime)

    def ensure(self) -> Paths:
        for d in (self.config_dir, self.state_dir, self.runtime_dir):
            d.mkdir(parents=True, exist_ok=True)
        os.chmod(self.runtime_dir, 0o700)
        return self

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def user_patterns_dir(self) -> Path:
        return self.config_dir / "patterns"

    @property
    def db_path(self) -> Path:
        return self.state_dir / "agentwrap.db"

    @property
    def audit_log(self) -> Path:
        return self.state_dir / "audit.jsonl"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def tmux_socket(self) -> Path:
        """agentwrap's own tmux server: never the user's default one."""
        return self.runtime_dir / "tmux.sock"

    def wake_socket(self, session: str) -> Path:
        return self.runtime_dir / f"{session}.sock"

    def supervisor_log(self, session: str) -> Path:
        return self.logs_dir / f"{session}.log"
