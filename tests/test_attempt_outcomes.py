"""One enum of attempt outcomes for every channel (issue 36).

Every attempt a channel records (typed, hook, MCP, Aider's read file, Codex's
app-server, the fallback file) and every engine result names its outcome as an
:class:`~agentwrap.message.AttemptOutcome`: no bare word in the code, and the
words stored are the ones stored before, so an old store reads as it did.
"""

from __future__ import annotations

import ast
from pathlib import Path

from agentwrap.message import SECTION_REMOVED, UNACKNOWLEDGED, AttemptOutcome

ROOT = Path(__file__).resolve().parents[1] / "agentwrap"

#: The words the attempts table held before the enum (aae88cc): unchanged.
STORED_BEFORE = {
    "submitted", "awaiting_ack", "acknowledged", "delivered", "unacknowledged",
    "paste_not_seen", "submit_not_confirmed", "no_ack", "no_window", "agent_exited", "error",
    "handed", "not_handed", "written", "not_read", "section_removed",
}


def test_the_values_are_the_words_stored_before() -> None:
    assert {o.value for o in AttemptOutcome} == STORED_BEFORE
    assert UNACKNOWLEDGED == "unacknowledged" and SECTION_REMOVED == "section_removed"
    for o in AttemptOutcome:  # an old row's plain word compares equal, and prints as itself
        assert o == o.value and str(o) == o.value and f"{o}" == o.value


def _bare_outcomes(path: Path) -> list[str]:
    """Calls that name an outcome with a bare string: ``Attempt(..., "no_ack", ...)``
    (its 7th argument), ``Outcome(ok, "no_ack", ...)`` (its 2nd), ``outcome="..."``,
    and comparisons ``x.outcome == "..."``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        bare: list[ast.expr] = []
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if name == "Attempt" and len(node.args) >= 7:
                bare.append(node.args[6])
            if name == "Outcome" and len(node.args) >= 2:
                bare.append(node.args[1])
            bare += [k.value for k in node.keywords if k.arg == "outcome"
                     and name in ("Attempt", "Outcome", "replace")]
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) \
                and node.left.attr == "outcome":
            for right in node.comparators:
                bare += list(right.elts) if isinstance(right, (ast.Tuple, ast.List)) else [right]
        found += [f"{path.name}:{node.lineno}: {ast.unparse(node)[:100]}"
                  for b in bare if isinstance(b, ast.Constant) and isinstance(b.value, str)]
    return found


def test_no_outcome_is_a_bare_word() -> None:
    found = [f for path in sorted(ROOT.rglob("*.py")) for f in _bare_outcomes(path)]
    assert not found, "name the outcome with AttemptOutcome:\n" + "\n".join(found)


def test_the_scan_finds_a_bare_word(tmp_path: Path) -> None:
    """What the scan above would have found before the enum."""
    old = tmp_path / "old.py"
    old.write_text('Outcome(False, "no_ack", "x")\n'
                   'Attempt(a, b, c, d, e, "hook", "handed", why)\n'
                   'if result.outcome in ("paste_not_seen", "submit_not_confirmed"): pass\n',
                   encoding="utf-8")
    assert len(_bare_outcomes(old)) == 4  # the tuple's two words each
