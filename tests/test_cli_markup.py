"""Every literal text the CLI prints through rich means what it says (issue 26).

rich reads ``[...]`` as markup: ``no [[schedule]] here`` printed as ``no []
here``. Untrusted text is escaped where it is printed (tests/test_cli_untrusted.py);
this holds the CLI's own words to the same standard: in a string literal
handed to a console's ``print``, a square bracket is either one of the few
styles the CLI uses on purpose or escaped (``\\[``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

CLI = ROOT / "agentwrap" / "surfaces" / "cli"
STYLES = {"bold", "dim", "red", "green", "yellow", "cyan", "/", "/bold", "/dim"}
TAG = re.compile(r"(?<!\\)\[([^\[\]]*)\]")


def literal_parts(node: ast.expr) -> list[str]:
    """The literal text of a printed argument (f-string constants, concatenations)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if isinstance(node, ast.BinOp):
        return literal_parts(node.left) + literal_parts(node.right)
    return []


def printed_literals(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "print" and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("out", "err", "console")):
            for arg in node.args:
                found += [(node.lineno, text) for text in literal_parts(arg)]
    return found


def test_no_printed_literal_has_a_bracket_rich_would_eat() -> None:
    bad = []
    for path in sorted(CLI.glob("*.py")):
        for line, text in printed_literals(path):
            for tag in TAG.findall(text):
                if tag not in STYLES:
                    bad.append(f"{path.name}:{line}: [{tag}] in {text!r}")
    assert not bad, "escape these brackets (\\[) or use Text:\n" + "\n".join(bad)


def test_schedule_list_says_the_table_name(aw: object) -> None:
    res = aw.cli("schedule", "list")  # type: ignore[attr-defined]
    assert "no [[schedule]] here" in res.stderr, res.stderr
    assert 'Add one: [[schedule]] every = "15m"' in " ".join(res.stderr.split())
