"""The version each agent profile says it was verified on is the one
scripts/install_agents.sh installs (the e2e suite runs on those), and README's
"Verified versions" table says the same (issue 22)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentwrap.detect.profiles import load_profile

REPO = Path(__file__).resolve().parent.parent
AGENTS = ("claude", "codex", "gemini", "aider", "copilot", "opencode", "qwen", "cline", "kimi", "pi")


def pinned() -> dict[str, str]:
    script = (REPO / "scripts" / "install_agents.sh").read_text(encoding="utf-8")
    return {m[1].lower(): m[2] for m in re.finditer(r"^([A-Z]+)_VERSION=(\S+)", script, re.M)}


@pytest.mark.parametrize("agent", AGENTS)
def test_profile_verified_on_the_pinned_version(agent: str) -> None:
    assert load_profile(agent).verified_version == pinned()[agent]


def test_docs_table_lists_the_verified_versions() -> None:
    readme = (REPO / "docs" / "agents" / "index.md").read_text(encoding="utf-8")
    start = readme.index("## Verified versions")
    rows = [line for line in readme[start:].splitlines()[1:40] if line.startswith("| `")]
    table = {m[1]: m[2] for line in rows if (m := re.match(r"\| `(\w+)` \| (\S+) \|", line))}
    assert table == {agent: load_profile(agent).verified_version for agent in AGENTS}
