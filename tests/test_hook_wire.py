"""The hook wire in one place (agentwrap.hook_wire), held against hook.c (issue 36).

The native client repeats the constants it needs as ``#define NAME value``
under the module's names; these tests parse the C source (no compiler needed)
and fail when a value differs, when hook.c defines a wire constant the module
lacks, when hook.c writes a wire value as a bare literal instead of its name,
and when a Python module keeps a copy of its own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agentwrap import hook_wire

ROOT = Path(__file__).resolve().parents[1]
HOOK_C = ROOT / "agentwrap" / "terminal" / "_native" / "hook.c"
PACKAGE = ROOT / "agentwrap"

#: The module's constants hook.c has no use for (it takes the socket path on its
#: command line and sizes it by ``sun_path``; it never reads a request header).
NOT_IN_HOOK_C = {"MAX_SOCKET_PATH"}
_DEFINE = re.compile(r"^#define\s+([A-Z_][A-Z0-9_]*)\s+(.+?)\s*(?:/\*.*\*/)?\s*$")


def c_value(text: str) -> object:
    """A ``#define``'s value as Python reads it: a string literal, or an
    integer expression of literals (C's ``022`` is octal)."""
    if text.startswith('"'):
        value = ast.literal_eval(text)
        assert isinstance(value, str)
        return value
    python = re.sub(r"\b0([0-7]+)\b", r"0o\1", text)
    tree = ast.parse(python, mode="eval")
    allowed = (ast.Expression, ast.BinOp, ast.Constant, ast.Mult, ast.Add, ast.LShift)
    assert all(isinstance(n, allowed) for n in ast.walk(tree)), text
    return eval(compile(tree, str(HOOK_C), "eval"))  # literals and + * << only (checked above)


def defines(source: str) -> dict[str, object]:
    return {m[1]: c_value(m[2]) for line in source.splitlines() if (m := _DEFINE.match(line))
            and m[1] != "_GNU_SOURCE"}


def wire_constants() -> dict[str, object]:
    return {name: getattr(hook_wire, name) for name in hook_wire.__all__
            if name.isupper() and name not in NOT_IN_HOOK_C}


def test_every_wire_constant_of_hook_c_is_the_modules() -> None:
    got = defines(HOOK_C.read_text(encoding="utf-8"))
    want = wire_constants()
    assert set(got) == set(want), "hook.c and agentwrap/hook_wire.py name different constants"
    assert {k: got[k] for k in sorted(got)} == {k: want[k] for k in sorted(want)}


def test_the_check_fails_when_hook_c_says_otherwise() -> None:
    """The parser reads what a drifted copy would say (the test above is no tautology)."""
    source = HOOK_C.read_text(encoding="utf-8")
    drifted = {
        "ANSWER_WAIT_MS": source.replace("#define ANSWER_WAIT_MS 9000", "#define ANSWER_WAIT_MS 8000"),
        "UNSAFE_MODE": source.replace("#define UNSAFE_MODE 022", "#define UNSAFE_MODE 002"),
        "VERB": source.replace('#define VERB "awhook1"', '#define VERB "awhook2"'),
        "MAX_STDIN": source.replace("(4 * 1024 * 1024)", "(8 * 1024 * 1024)"),
    }
    for name, text in drifted.items():
        assert text != source, name
        assert defines(text)[name] != wire_constants()[name], name


def test_hook_c_writes_no_wire_value_but_by_its_name() -> None:
    """A wire string written out in the code (``"awhook1 %s"``, ``getenv("AGENTWRAP_...")``)
    would escape the check above."""
    strings = {v for v in wire_constants().values() if isinstance(v, str) and len(v) >= 3}
    code = [line for line in HOOK_C.read_text(encoding="utf-8").splitlines()
            if not line.startswith("#define") and not line.lstrip().startswith(("*", "/*"))]
    found = [(v, line.strip()) for line in code for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', line)
             for v in strings if v in ast.literal_eval(f'"{lit}"')]
    assert found == []


@pytest.mark.parametrize("value", sorted(
    v for k, v in wire_constants().items() if k.endswith("_ENV") or k == "VERB"))
def test_no_python_module_keeps_its_own_copy(value: str) -> None:
    """The env names and the verb are written once, in hook_wire (issue 36: they
    were copied into several modules: the session's name in five)."""
    literal = re.compile(r"""(['"])""" + re.escape(value) + r"(?:\s[^'\"]*)?\1")
    copies = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
              if p.name != "hook_wire.py" and literal.search(p.read_text(encoding="utf-8"))]
    assert copies == []


def test_typing_waits_for_the_session_start_hook_a_bounded_time(tmp_path: Path) -> None:
    """The supervisor types nothing until the agent's SessionStart hook has
    handed the queue over (it would race it), nor waits longer than
    START_HOOK_WAIT_S for a hook that never runs (moved from the datagram
    hand-over's module, gone in issue 36, to agentwrap.sessions.signals)."""
    from agentwrap.paths import Paths, private_dir
    from agentwrap.sessions.signals import START_HOOK_WAIT_S, awaits_start_hook

    paths = Paths.from_env({"HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "s"),
                            "XDG_CONFIG_HOME": str(tmp_path / "c"),
                            "XDG_RUNTIME_DIR": str(tmp_path / "r")})
    now = [100.0]
    waiting = awaits_start_hook(paths, "s1", 100.0, clock=lambda: now[0])
    assert waiting()
    seen = paths.session_started("s1")
    private_dir(seen.parent, repair=True)
    seen.write_bytes(b"")
    assert not waiting()
    seen.unlink()
    assert not waiting()  # once over, over
    late = awaits_start_hook(paths, "s2", 100.0, clock=lambda: now[0])
    now[0] = 100.0 + START_HOOK_WAIT_S
    assert not late()
