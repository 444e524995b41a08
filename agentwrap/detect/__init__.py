"""Detection: what state an agent is in, read from its screen.

Here live the agent profiles (``profiles``: the TOML files that say how to
recognise, read and type into one agent CLI, including its ``[syntax]``
table), the agent-syntax rules that table declares and the defusing of them
(``neutralise``, kept here because ``profiles`` parses and checks them), the
anchored screen regions (``regions``), the detector and its verdicts
(``detector``, ``states``), the precedence between an agent's own word
(hooks, session file, app-server) and its screen, one table for every agent
(``precedence``), and the agents' own structured state files
(``structured``), and the question a waiting agent asks, read off its screen
(``question``). Another source of state (Codex's app-server,
:mod:`agentwrap.app_server`) is a :class:`~.detector.StructuredSource`, the
protocol this layer owns. The built-in profiles ship inside the wheel as
``detect/_patterns``. Imports point down only: to ``agentwrap.terminal``
(snapshots, process trees) and the foundation; never to ``queue`` (the two
are independent), ``delivery``, ``sessions`` or ``surfaces``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from . import neutralise as neutralise
    from . import states as states
    from .detector import Detector as Detector
    from .detector import HookReading as HookReading
    from .detector import HookSource as HookSource
    from .detector import StructuredReading as StructuredReading
    from .detector import StructuredSource as StructuredSource
    from .neutralise import SyntaxSpec as SyntaxSpec
    from .neutralise import defuse as defuse
    from .neutralise import live_tokens as live_tokens
    from .profiles import Dialog as Dialog
    from .profiles import Profile as Profile
    from .profiles import builtin_patterns_dir as builtin_patterns_dir
    from .profiles import load_all_profiles as load_all_profiles
    from .profiles import load_profile as load_profile
    from .profiles import profile_files as profile_files
    from .profiles import profile_for_command as profile_for_command
    from .question import Item as Item
    from .question import Option as Option
    from .question import Question as Question
    from .question import free_text_option as free_text_option
    from .question import pick as pick
    from .question import question_id as question_id
    from .regions import split_around as split_around
    from .states import Reading as Reading
    from .states import Signal as Signal
    from .states import State as State
    from .states import overlay as overlay
    from .structured import structured_source as structured_source

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "detector": ("Detector", "HookReading", "HookSource", "StructuredReading", "StructuredSource"),
    "neutralise": ("SyntaxSpec", "defuse", "live_tokens", "neutralise"),
    "profiles": (
        "Dialog",
        "Profile",
        "builtin_patterns_dir",
        "load_all_profiles",
        "load_profile",
        "profile_files",
        "profile_for_command",
    ),
    "question": ("Item", "Option", "Question", "free_text_option", "pick", "question_id"),
    "regions": ("split_around",),
    "states": ("Reading", "Signal", "State", "overlay", "states"),
    "structured": ("structured_source",),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
