"""Every help text of the ``agentwrap`` command, as one document.

Walks the parser :func:`agentwrap.surfaces.cli.app.build_parser` builds, every
sub-command and its sub-commands in order, and renders each one's ``--help`` at
a fixed width. ``tests/snapshots/cli_help.txt`` holds what the eager CLI printed
(before the commands were imported lazily); the fast layer compares the two so
no help text, flag or choice changes by accident.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator

WIDTH = "100"


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse keeps no public list of sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, sub


def render(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("agentwrap",)) -> str:
    """The help of ``parser`` and of every parser below it, each under a header
    (argparse takes the width from ``COLUMNS``: set it to :data:`WIDTH` first)."""
    parts = [f"===== {' '.join(path)} =====\n", parser.format_help()]
    for name, sub in _subparsers(parser):
        parts.append(render(sub, (*path, name)))
    return "".join(parts)


def main() -> None:  # pragma: no cover - writes the snapshot by hand
    from agentwrap.surfaces.cli.app import build_parser

    os.environ["COLUMNS"] = WIDTH
    print(render(build_parser()), end="")


if __name__ == "__main__":  # pragma: no cover
    main()
