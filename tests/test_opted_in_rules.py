"""--trust-folder for a dialog whose option is named by label (Claude Code's folder
trust: "Yes, I trust this folder" is first in 2.1.197 and second, under a
preselected "No, exit", in 2.1.332): an answer rule picking that label, and
only when the person opted in."""

from __future__ import annotations

from agentwrap.detect.profiles import load_profile
from agentwrap.sessions.compose import opted_in_rules


def test_trust_folder_becomes_a_rule_picking_the_label() -> None:
    claude = load_profile("claude")
    assert opted_in_rules(claude, trust_folder=False) == ()
    (rule,) = opted_in_rules(claude, trust_folder=True)
    assert (rule.name, rule.agent, rule.kind, rule.option) == (
        "--trust-folder", "claude", "trust", "Yes, I trust this folder")


def test_dialogs_with_fixed_keys_stay_with_the_supervisor() -> None:
    codex = load_profile("codex")
    assert any(d.keys and d.opt_in == "trust_folder" for d in codex.dialogs)
    assert opted_in_rules(codex, trust_folder=True) == ()
