"""The layers of the package point one way (the contract in pyproject.toml).

surfaces > service > sessions > delivery > detect | queue > terminal > the
foundation (config, paths, errors, audit, message): a module may import from
its own layer and the ones below it, never above. import-linter checks every
import, direct or through other modules; this test fails with its report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_imports_follow_the_layers() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    assert lint_imports.exists(), f"{lint_imports} is missing: pip install -e '.[dev]'"
    done = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
