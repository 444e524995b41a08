"""Built-in feedback sources a ``[[feedback]]`` table can name without a command.

``{files}`` becomes the touched files, one argv item each; where a tool would
check everything given no files, the preset names a directory instead of an
empty list (:attr:`Preset.no_files`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    run: str
    on: tuple[str, ...]
    paths: tuple[str, ...]
    no_files: str = "."  # what {files} becomes when a run has no files (start, schedule)
    per_file: bool = True  # False: the command ignores {files} (the whole suite runs)


PRESETS: dict[str, Preset] = {
    "pytest": Preset("python -m pytest -x -q --no-header -p no:cacheprovider",
                     ("edit", "watch"), ("**/*.py",), per_file=False),
    "ruff": Preset("ruff check --output-format concise --no-cache {files}", ("edit", "watch"),
                   ("**/*.py", "**/*.pyi")),
    "mypy": Preset("mypy --no-error-summary --no-color-output {files}", ("edit", "watch"),
                   ("**/*.py", "**/*.pyi")),
    "eslint": Preset("npx --no-install eslint --format unix {files}", ("edit", "watch"),
                     ("**/*.js", "**/*.jsx", "**/*.ts", "**/*.tsx", "**/*.mjs", "**/*.cjs")),
    "tsc": Preset("npx --no-install tsc --noEmit --pretty false", ("edit", "watch"),
                  ("**/*.ts", "**/*.tsx"), per_file=False),
    "git-status": Preset("git status --short --branch", ("start",), (), per_file=False),
}
