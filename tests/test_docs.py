"""The documentation site: it builds strict, its generated pages are current, and
it keeps the promises the CLI makes about it.

- ``mkdocs build --strict`` (broken links, anchors and pages left out of the
  build are errors) over ``docs/``;
- every page ``scripts/gen_docs.py`` writes (CLI, configuration keys, HTTP API,
  exit codes, troubleshooting entries, agent facts) is what it writes today;
- every error class has its entry on the troubleshooting page, at the anchor the
  CLI's hint names;
- every shell snippet that writes a file under your home makes its folder first
  (a fresh machine has no ``~/.config/agentwrap``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentwrap.surfaces.cli.common import TROUBLESHOOTING, hint_line

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import gen_docs  # noqa: E402  (scripts/ is not a package)

MKDOCS = Path(sys.executable).parent / "mkdocs"


def test_the_site_builds_strict(tmp_path: Path) -> None:
    if not MKDOCS.exists():
        pytest.fail(f"mkdocs is not installed: {sys.executable} -m pip install -e '.[dev]'")
    done = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()


def test_generated_pages_are_current() -> None:
    stale = [str(path.relative_to(ROOT)) for path, text in gen_docs.render().items()
             if not path.exists() or path.read_text() != text]
    assert not stale, f"stale: {stale}; regenerate: .venv/bin/python scripts/gen_docs.py"


def test_the_cli_reference_has_every_command() -> None:
    from agentwrap.surfaces.cli.app import build_parser

    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for name, sub in gen_docs._subparsers(build_parser()):
        assert f"## `agentwrap {name}`" in page, name
        for action in sub._actions:
            for option in action.option_strings:
                if option in ("-h", "--help"):
                    continue
                assert f"`{option}`" in page, (name, option)


def anchors(page: Path) -> set[str]:
    text = page.read_text()
    return set(re.findall(r"\{#([a-z0-9-]+)\}", text))


def test_every_error_class_has_a_troubleshooting_entry_the_hint_names() -> None:
    page = ROOT / TROUBLESHOOTING
    have = anchors(page)
    for cls in gen_docs.error_classes():
        line = hint_line(cls, cls.default_hint or "-")
        link = re.search(r"\(more: ([^#)]+)#([^)]+)\)$", line)
        assert link is not None, line
        assert link.group(1) == TROUBLESHOOTING, line
        assert link.group(2) in have, f"{cls.__name__}: no #{link.group(2)} in {page}"


def shell_blocks() -> list[tuple[Path, str]]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in re.findall(r"^```(?:sh|bash)\n(.*?)^```", page.read_text(), re.S | re.M):
            found.append((page, block))
    return found


def test_snippets_that_write_a_file_at_home_make_its_folder_first() -> None:
    for page, block in shell_blocks():
        made: set[str] = set()
        for line in block.splitlines():
            made |= set(re.findall(r"mkdir -p (~/\S+)", line))
            for target in re.findall(r"(?:>>?|\btee(?: -a)?) (~/\S+)", line):
                folder = target.rsplit("/", 1)[0]
                if folder == "~":
                    continue
                assert any(folder == m or folder.startswith(m + "/") for m in made), (
                    f"{page.name}: writes {target} without `mkdir -p {folder}` first:\n{block}")


def test_the_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 230, len(lines)


def test_the_readmes_pictures_are_committed() -> None:
    readme = (ROOT / "README.md").read_text()
    for picture in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme):
        assert (ROOT / picture).is_file(), picture


def test_the_readmes_agent_table_says_each_profiles_verified_version() -> None:
    import tomllib

    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| [^|]+ \| `([a-z]+)` \| ([0-9.]+) \|", readme, re.M)
    assert len(rows) == 10, rows
    for command, version in rows:
        profile = tomllib.loads((ROOT / "patterns" / f"{command}.toml").read_text())
        assert profile["verified_version"] == version, (command, version)
