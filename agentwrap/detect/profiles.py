"""Agent profiles: how to recognise, read and type into one agent CLI.

A profile is a TOML file in ``patterns/`` (built in, shipped inside the wheel
as ``agentwrap/detect/_patterns``) or in ``~/.config/agentwrap/patterns/`` (the user's,
which wins). Agent UIs change every week, so everything that depends on what
an agent draws lives here as data, validated at load time with errors that
name the file and the key, never as code.

Screen rules are *region scoped*: a profile names anchor lines (for example
the horizontal rules around Claude's prompt box) and regions between them, and
every rule looks only inside its region. That is what keeps a stale "Working"
line in the transcript from counting as the agent's current state.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ProfileError
from ..paths import Paths
from ..terminal.base import KEYS
from .neutralise import DEFUSE_KINDS, SyntaxRule, SyntaxSpec, check_spec
from .question import KINDS as QUESTION_KINDS
from .states import State

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SPECIAL_REGIONS = ("screen", "title", "last_line")
FRAMINGS = ("block", "raw")  # how messages are typed: quoted in a block, or as is
RULE_STATES = (State.WAITING_INPUT, State.BUSY, State.DRAFT, State.READY, State.STARTING)
_BOUNDARY_RE = re.compile(r"^(?:(top|bottom)|([a-z_][a-z0-9_]*)\[(-?\d+)\](\?)?)([+-]\d+)?$")


@dataclass(frozen=True)
class Boundary:
    """``top``, ``bottom`` or ``anchor[index]`` (+/- a line offset).

    ``anchor[index]?`` is optional: when the anchor is not on screen the
    boundary falls back to the top (as a start) or the bottom (as an end).
    """

    anchor: str | None  # None for top/bottom
    edge: str  # "top" | "bottom" | "anchor"
    index: int = 0
    offset: int = 0
    optional: bool = False


@dataclass(frozen=True)
class Region:
    name: str
    start: Boundary
    end: Boundary
    last: int | None = None  # keep only the last N non-blank lines


@dataclass(frozen=True)
class Rule:
    name: str
    state: State
    region: str
    pattern: re.Pattern[str]
    unless: re.Pattern[str] | None
    explain: str
    ignore_dim: bool = False  # match against the screen with dim text (placeholders) blanked


@dataclass(frozen=True)
class Dialog:
    """A first-run or permission dialog: always ``waiting_input``.

    ``keys`` answer it, but only when the person opted in to ``opt_in`` (for
    example ``--trust-folder``); without opt-in agentwrap only tells them.
    ``opt_in_option`` instead names the option the opted-in answer picks, by
    label: it is typed like ``agentwrap answer``'s (the cursor walked to it on
    the screen read then), for a dialog whose options move between versions
    (Claude Code 2.1.332 lists "No, exit" first and preselects it; 2.1.197
    preselected "Yes, I trust this folder": no fixed keys fit both).
    """

    name: str
    pattern: re.Pattern[str]
    message: str
    keys: tuple[str, ...] = ()
    opt_in: str | None = None
    opt_in_option: str = ""
    region: str = "screen"  # a dialog drawn above the live input box is stale
    # What it asks (agentwrap.detect.question): its kind, and where the tool and
    # command it asks about are shown (a regex with named groups tool, command;
    # ``tool`` names the tool when the screen does not).
    kind: str = "permission"
    subject: re.Pattern[str] | None = None
    tool: str | None = None
    # How an answer from elsewhere (``agentwrap answer``) is typed: ``deny_keys``
    # dismiss the dialog (--deny); ``free_text`` says how free text goes in:
    # "" (refused: not known for this agent) or "option" (move to the option
    # that asks for text, press Enter, type the text, press Enter).
    deny_keys: tuple[str, ...] = ("Escape",)
    free_text: str = ""
    # Multi-select and several questions shown as tabs (Claude's AskUserQuestion):
    # ``toggle_key`` ticks or unticks the option under the cursor, ``next_key`` /
    # ``prev_key`` go to the next / previous tab (the one after the last question
    # is a review), and the review's ``submit_option`` (a label) sends every
    # answer. Empty: such answers are refused for this dialog.
    toggle_key: str = ""
    next_key: str = ""
    prev_key: str = ""
    submit_option: str = ""
    # An option answered by its key (Cline's "[y] Approve  [n] Deny") takes
    # effect at the key: no Enter after it, which would reach the composer.
    key_enter: bool = True
    # Keys pressed sooner than this after the dialog is drawn may be lost or
    # undone (Claude Code 2.1.332 drops Tab for about 0.2 s after AskUserQuestion
    # appears, and puts the trust dialog's cursor back 0.1 s after drawing it):
    # the answerer waits until the dialog has been on screen this long before
    # its first key.
    settle_ms: int = 0
    # Each option of a list without numbers is drawn with one line describing it
    # under it, in the same column (Kimi Code's folder trust): every second line
    # of the list is a description, not an option.
    described: bool = False


@dataclass(frozen=True)
class Overlay:
    """A picker, menu or help screen the agent draws over or instead of its
    input box (Claude Code's rewind picker, a ``/model`` list, shortcut help):
    the box is not what keys reach, so the agent is never ``ready`` while it is
    open. It asks nothing (a :class:`Dialog` asks), so it is not
    ``waiting_input`` either: the detector says ``unknown`` with ``message``
    (rule ``overlay:NAME``), and delivery waits for it to close."""

    name: str
    pattern: re.Pattern[str]
    message: str
    region: str = "screen"


@dataclass(frozen=True)
class InputSpec:
    submit_key: str = "Enter"
    submit_delay_ms: int = 300
    bracketed_paste: bool = True
    newline_key: str = "C-j"
    accepts_input_while_busy: bool = False
    paste_placeholders: tuple[re.Pattern[str], ...] = ()
    max_paste_bytes: int = 10 * 1024
    submit_retries: int = 2
    input_region: str = "box"  # where typed text shows; "last_line" for plain REPLs
    tabs_as_spaces: int = 0  # the agent turns a pasted tab into N spaces (0: kept)
    input_region_fallback: str | None = None  # where to look when input_region is not on screen


#: Which agent's native registration a profile's ``[channels]`` names.
CHANNEL_KINDS = ("claude", "codex", "gemini", "qwen", "copilot", "opencode", "cline", "kimi")


@dataclass(frozen=True)
class ChannelSpec:
    """``[channels]``: the native channels ``agentwrap run`` registers for the
    agent (see :mod:`agentwrap.sessions.channels`): ``hooks`` and ``mcp`` name
    whose registration to use (``claude``, ``codex``, ``gemini``, ``qwen``,
    ``copilot``, ``opencode``, ``cline``, ``kimi``; unset: none), from ``min_version`` of the installed CLI on
    (probed with ``version_arg``).
    ``batch_event_since``: Claude's PostToolBatch from this version on (else
    PostToolUse). ``read_file``: the option that makes the agent re-read a
    file on every model request (Aider's ``--read``): agentwrap's live file
    (:mod:`agentwrap.delivery.read_channel`); ``reads_per_request``: how
    often the agent opens it while building one request.
    ``session_start_at_launch``: the agent runs its SessionStart hook when it
    starts (Claude Code, Gemini CLI), so the supervisor waits for it before
    typing the queue; Codex 0.169.0 runs it only when the first prompt is
    submitted, so its queue is typed once ready as ever. ``async_hooks_since``:
    Claude Code, Qwen Code run a hook marked ``async`` in the background from
    this version on, so their signal-only hooks cost the agent nothing (unset:
    every hook waited for).
    ``turn_end``: the option that names a shell command the agent runs each
    time a reply is done, just before it draws its prompt (Aider's
    ``--notifications-command``), with ``turn_end_flags`` that turn it on
    (``--notifications``): agentwrap's command marks a file, and the turn's end
    is then ``ready`` as soon as the prompt is drawn, with no quiet window
    (:mod:`agentwrap.sessions.turn_end`)."""

    hooks: str | None = None
    mcp: str | None = None
    min_version: str = ""
    batch_event_since: str = ""
    version_arg: str = "--version"
    read_file: str | None = None
    reads_per_request: int = 1
    session_start_at_launch: bool = True
    async_hooks_since: str = ""
    turn_end: str | None = None
    turn_end_flags: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.hooks or self.mcp or self.read_file or self.turn_end)


@dataclass(frozen=True)
class PermissionSpec:
    """``[permissions]``: whether the agent asks before it runs a tool. Most do;
    OpenCode runs every tool (shell, edits, fetches) without asking unless its
    own config says ``"permission": {...: "ask"}``: such a session has no
    permission gate, and ``state``, ``doctor`` and the dashboard say so.
    ``ask_first_env`` / ``ask_first_value``: the environment variable that starts
    it in its ask-first mode, which ``agentwrap run`` sets with ``[run] ask_first``;
    ``ask_first_args``: the options that do (Cline CLI: ``--auto-approve false``),
    which it adds to the command line then (the first names the option: one the
    person gave is kept)."""

    asks_by_default: bool = True
    ask_first_env: str = ""
    ask_first_value: str = ""
    ask_first_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    commands: tuple[str, ...]
    instruction_file: str | None
    launch_args: tuple[str, ...]
    env: Mapping[str, str]
    input: InputSpec
    quiet_ms: int
    startup_timeout_s: float
    quiet_fallback: bool  # no rule matched + screen quiet => ready (generic REPLs)
    structured: str | None  # name of a structured state source, e.g. "claude-sessions"
    anchors: Mapping[str, re.Pattern[str]]
    regions: Mapping[str, Region]
    rules: tuple[Rule, ...]
    dialogs: tuple[Dialog, ...]
    ack_patterns: tuple[str, ...]  # regex templates; "{token}" is the batch token
    overlays: tuple[Overlay, ...] = ()
    source: Path = field(default=Path("<builtin>"))
    # The agent re-reads its instruction file on every model request (so a
    # fallback section reaches the running session), not only at start-up.
    instruction_file_live: bool = False
    # An option that makes the agent read a file on every request (aider's
    # "--read"): agentwrap then keeps the fallback section in a file of its own,
    # passed with this option at launch, instead of editing the project's file.
    context_file_arg: str | None = None
    # What the agent itself acts on in prompt text (@path, $skill, ...) and how
    # agentwrap defuses it: see agentwrap.neutralise.
    syntax: SyntaxSpec = field(default_factory=SyntaxSpec)
    # The program executes what is typed (a shell, an interpreter): a message is
    # a command there, so it is typed raw and only from trusted sources.
    shell: bool = False
    # "block": messages are quoted in agentwrap's marked block (agents);
    # "raw": each message is typed as is, one at a time (shells, plain REPLs).
    framing: str = "block"
    channels: ChannelSpec = field(default_factory=ChannelSpec)
    permissions: PermissionSpec = field(default_factory=PermissionSpec)
    # The agent's version this profile was checked on (screens, dialogs, hooks;
    # scripts/install_agents.sh pins it): ``agentwrap doctor`` warns when the
    # installed one differs, since a new release may move what the profile reads.
    verified_version: str = ""

    @property
    def raw(self) -> bool:
        """Messages are typed as is (no quoting block, no ACK, no fallback file)."""
        return self.framing == "raw"

    def matches_command(self, argv0: str) -> bool:
        return Path(argv0).name in self.commands


# --- locating profile files ---------------------------------------------------------


@functools.cache
def builtin_patterns_dir() -> Path:
    """Inside a wheel the profiles live in ``agentwrap/detect/_patterns``; in a
    source checkout (editable install, tests) they are the top-level
    ``patterns/`` folder next to the package."""
    packaged = Path(__file__).resolve().parent / "_patterns"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "patterns"


def profile_files(paths: Paths | None) -> dict[str, Path]:
    """Name -> file, user overrides replacing built-ins of the same name."""
    found: dict[str, Path] = {}
    dirs = [builtin_patterns_dir()]
    if paths is not None:
        dirs.append(paths.user_patterns_dir)
    for d in dirs:
        if d.is_dir():
            for f in sorted(d.glob("*.toml")):
                found[f.stem] = f
    return found


def load_profile(name: str, paths: Paths | None = None) -> Profile:
    files = profile_files(paths)
    if name not in files:
        known = ", ".join(sorted(files)) or "none"
        raise ProfileError(
            f"no profile named {name!r} (known: {known})",
            hint="pass --profile with one of those, or add NAME.toml to "
            f"{paths.user_patterns_dir if paths else '~/.config/agentwrap/patterns'}",
        )
    return parse_profile_file(files[name])


def load_all_profiles(paths: Paths | None = None) -> dict[str, Profile]:
    return {name: parse_profile_file(f) for name, f in profile_files(paths).items()}


def profile_for_command(argv: list[str], paths: Paths | None = None) -> Profile:
    """The profile whose ``commands`` names argv[0]; ``generic`` otherwise.

    A shell profile matches only a shell that will read commands from the
    person (``bash``, ``zsh -l``), not one that merely launches something
    (``bash -lc claude``, ``sh start-agent.sh``): what runs there is unknown.
    """
    profiles = load_all_profiles(paths)
    for prof in profiles.values():
        if prof.name == "generic" or not prof.matches_command(argv[0]):
            continue
        if prof.shell and not reads_commands(argv):
            continue
        return prof
    if "generic" in profiles:
        return profiles["generic"]
    raise ProfileError("the built-in 'generic' profile is missing", hint="reinstall agentwrap")


def reads_commands(argv: Sequence[str]) -> bool:
    """Whether a shell started with ``argv`` will read commands from its terminal:
    only options, none of them ``-c`` (a script or ``-c`` means a launcher)."""
    args = iter(argv[1:])
    for arg in args:
        if arg in _SHELL_OPTIONS_WITH_VALUE:
            next(args, None)  # bash --rcfile FILE, -o vi
            continue
        if arg in ("-", "--") or not arg.startswith(("-", "+")):
            return False  # a script, stdin, or what follows "--"
        if not arg.startswith("--") and "c" in arg[1:]:
            return False  # -c, -lc, -ic: runs that command string
    return True


_SHELL_OPTIONS_WITH_VALUE = frozenset({"--rcfile", "--init-file", "-o", "+o", "-O", "+O"})


# --- parsing and validation ------------------------------------------------------------


class _Reader:
    """Typed access to one TOML table that names file and key in every error
    and rejects unknown keys (a typo must not silently disable a rule)."""

    def __init__(self, data: Mapping[str, Any], where: str, source: Path) -> None:
        self.data = data
        self.where = where
        self.source = source
        self.used: set[str] = set()

    def _err(self, key: str, msg: str) -> ProfileError:
        dotted = f"{self.where}.{key}" if self.where else key
        return ProfileError(f"{self.source}: {dotted}: {msg}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                raise self._err(key, "is required")
            return default
        value = self.data[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise self._err(key, f"must be {names}, got {type(value).__name__} {value!r}")
        return value

    def strings(self, key: str, default: Iterable[str] = ()) -> tuple[str, ...]:
        value = self.get(key, list, list(default))
        if not all(isinstance(v, str) for v in value):
            raise self._err(key, "must be a list of strings")
        return tuple(value)

    def regex(self, key: str, value: str) -> re.Pattern[str]:
        try:
            return re.compile(value, re.MULTILINE)
        except re.error as exc:
            raise self._err(key, f"invalid regular expression {value!r}: {exc}") from None

    def non_negative(self, key: str, default: int) -> int:
        value: int = self.get(key, int, default)
        if value < 0:
            raise self._err(key, f"must be >= 0, got {value}")
        return value

    def sub(self, key: str, index: int | None = None) -> _Reader:
        value = self.data.get(key, {}) if index is None else self.data[key][index]
        self.used.add(key)
        if not isinstance(value, Mapping):
            raise self._err(key, "must be a table")
        where = f"{self.where}.{key}" if self.where else key
        if index is not None:
            where += f"[{index}]"
        return _Reader(value, where, self.source)

    def table_list(self, key: str) -> list[_Reader]:
        value = self.data.get(key, [])
        self.used.add(key)
        if not isinstance(value, list):
            raise self._err(key, "must be an array of tables ([[...]])")
        return [self.sub(key, i) for i in range(len(value))]

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise self._err(unknown[0], "unknown key (typo?)")


def parse_profile_file(path: Path) -> Profile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_profile(data, path)


def parse_profile(data: Mapping[str, Any], source: Path) -> Profile:
    top = _Reader(data, "", source)
    name = top.get("name", str)
    if name != source.stem and source.suffix == ".toml":
        raise top._err("name", f"must equal the file name {source.stem!r}, got {name!r}")
    env = top.get("env", dict, {})
    if not all(isinstance(v, str) for v in env.values()):
        raise top._err("env", "values must be strings")

    inp = top.sub("input")
    input_spec = InputSpec(
        submit_key=inp.get("submit_key", str, "Enter"),
        submit_delay_ms=inp.non_negative("submit_delay_ms", 300),
        bracketed_paste=inp.get("bracketed_paste", bool, True),
        newline_key=inp.get("newline_key", str, "C-j"),
        accepts_input_while_busy=inp.get("accepts_input_while_busy", bool, False),
        paste_placeholders=tuple(
            inp.regex("paste_placeholders", p) for p in inp.strings("paste_placeholders")
        ),
        max_paste_bytes=inp.non_negative("max_paste_bytes", 10 * 1024),
        submit_retries=inp.non_negative("submit_retries", 2),
        input_region=inp.get("input_region", str, "box"),
        tabs_as_spaces=inp.non_negative("tabs_as_spaces", 0),
        input_region_fallback=inp.get("input_region_fallback", str, None),
    )
    inp.done()

    det = top.sub("detect")
    anchors_r = det.sub("anchors")
    anchors = {k: anchors_r.regex(k, anchors_r.get(k, str)) for k in list(anchors_r.data)}
    anchors_r.done()
    regions = _parse_regions(det.sub("regions"), anchors)
    rules = tuple(_parse_rule(r, regions) for r in det.table_list("rules"))
    for key in ("input_region", "input_region_fallback"):
        region_name = getattr(input_spec, key)
        if region_name is not None and region_name not in {*regions, *SPECIAL_REGIONS}:
            raise inp._err(key, f"unknown region {region_name!r}")
    profile = Profile(
        name=name,
        description=top.get("description", str, ""),
        commands=top.strings("commands", [name]),
        instruction_file=top.get("instruction_file", str, None),
        launch_args=top.strings("launch_args"),
        env=dict(env),
        input=input_spec,
        quiet_ms=det.non_negative("quiet_ms", 500),
        startup_timeout_s=float(det.get("startup_timeout_s", (int, float), 30.0)),
        quiet_fallback=det.get("quiet_fallback", bool, False),
        structured=det.get("structured", str, None),
        anchors=anchors,
        regions=regions,
        rules=rules,
        dialogs=tuple(_parse_dialog(d, regions) for d in top.table_list("dialogs")),
        overlays=tuple(_parse_overlay(o, regions) for o in top.table_list("overlays")),
        ack_patterns=_parse_ack(top.sub("ack")),
        source=source,
        instruction_file_live=top.get("instruction_file_live", bool, False),
        context_file_arg=top.get("context_file_arg", str, None),
        syntax=_parse_syntax(top.sub("syntax")),
        shell=top.get("shell", bool, False),
        framing=top.get("framing", str, "block"),
        channels=_parse_channels(top.sub("channels")),
        permissions=_parse_permissions(top.sub("permissions")),
        verified_version=top.get("verified_version", str, ""),
    )
    if profile.verified_version and not re.fullmatch(r"\d+(?:\.\d+)*", profile.verified_version):
        raise top._err("verified_version", f"must be a version like 1.2.3, got"
                       f" {profile.verified_version!r}")
    if profile.framing not in FRAMINGS:
        raise top._err("framing", f"must be one of {', '.join(FRAMINGS)}, got {profile.framing!r}")
    if profile.shell and not profile.raw:
        # The bug this prevents: a shell ran each line of the quoting block.
        raise top._err("framing", 'a shell (shell = true) takes commands: framing must be "raw"')
    det.done()
    top.done()
    return profile


def _parse_permissions(r: _Reader) -> PermissionSpec:
    spec = PermissionSpec(
        asks_by_default=r.get("asks_by_default", bool, True),
        ask_first_env=r.get("ask_first_env", str, ""),
        ask_first_value=r.get("ask_first_value", str, ""),
        ask_first_args=r.strings("ask_first_args"),
    )
    if bool(spec.ask_first_env) != bool(spec.ask_first_value):
        raise r._err("ask_first_env", "ask_first_env and ask_first_value go together")
    r.done()
    return spec


def _parse_channels(r: _Reader) -> ChannelSpec:
    spec = ChannelSpec(
        hooks=r.get("hooks", str, None), mcp=r.get("mcp", str, None),
        min_version=r.get("min_version", str, ""),
        batch_event_since=r.get("batch_event_since", str, ""),
        async_hooks_since=r.get("async_hooks_since", str, ""),
        version_arg=r.get("version_arg", str, "--version"),
        read_file=r.get("read_file", str, None),
        reads_per_request=r.get("reads_per_request", int, 1),
        session_start_at_launch=r.get("session_start_at_launch", bool, True),
        turn_end=r.get("turn_end", str, None),
        turn_end_flags=r.strings("turn_end_flags"),
    )
    if spec.turn_end_flags and spec.turn_end is None:
        raise r._err("turn_end_flags", "needs turn_end")
    if spec.reads_per_request < 1:
        raise r._err("reads_per_request", "must be 1 or more")
    for key in ("hooks", "mcp"):
        value = getattr(spec, key)
        if value is not None and value not in CHANNEL_KINDS:
            raise r._err(key, f"must be one of {', '.join(CHANNEL_KINDS)}, got {value!r}")
    r.done()
    return spec


def _parse_boundary(r: _Reader, key: str, text: str, anchors: Mapping[str, Any]) -> Boundary:
    m = _BOUNDARY_RE.match(text.strip())
    if not m:
        raise r._err(key, f"{text!r} is not 'top', 'bottom' or 'ANCHOR[INDEX]' (+/-N)")
    edge, anchor, index, optional, offset = m.groups()
    if anchor is not None and anchor not in anchors:
        raise r._err(key, f"unknown anchor {anchor!r} (define it in [detect.anchors])")
    return Boundary(
        anchor=anchor,
        edge=edge or "anchor",
        index=int(index or 0),
        offset=int(offset or 0),
        optional=bool(optional),
    )


def _parse_regions(r: _Reader, anchors: Mapping[str, Any]) -> dict[str, Region]:
    regions: dict[str, Region] = {}
    for name in list(r.data):
        if name in SPECIAL_REGIONS:
            raise r._err(name, f"{name!r} is a built-in region name")
        sub = r.sub(name)
        last = sub.get("last", int, None)
        regions[name] = Region(
            name=name,
            start=_parse_boundary(sub, "from", sub.get("from", str, "top"), anchors),
            end=_parse_boundary(sub, "to", sub.get("to", str, "bottom"), anchors),
            last=last,
        )
        sub.done()
    r.done()
    return regions


def _parse_rule(r: _Reader, regions: Mapping[str, Region]) -> Rule:
    state_text = r.get("state", str)
    try:
        state = State(state_text)
    except ValueError:
        raise r._err("state", f"unknown state {state_text!r}") from None
    if state not in RULE_STATES:
        raise r._err("state", f"rules cannot decide {state_text!r}")
    region = r.get("region", str, "screen")
    if region not in regions and region not in SPECIAL_REGIONS:
        raise r._err("region", f"unknown region {region!r}")
    unless = r.get("unless", str, None)
    rule = Rule(
        name=r.get("name", str, f"{state_text}@{region}"),
        state=state,
        region=region,
        pattern=r.regex("pattern", r.get("pattern", str)),
        unless=r.regex("unless", unless) if unless is not None else None,
        explain=r.get("explain", str, ""),
        ignore_dim=r.get("ignore_dim", bool, False),
    )
    r.done()
    return rule


def _parse_dialog(r: _Reader, regions: Mapping[str, Region]) -> Dialog:
    region = r.get("region", str, "screen")
    if region not in regions and region not in SPECIAL_REGIONS:
        raise r._err("region", f"unknown region {region!r}")
    dialog = Dialog(
        name=r.get("name", str),
        pattern=r.regex("pattern", r.get("pattern", str)),
        message=r.get("message", str),
        keys=r.strings("keys"),
        opt_in=r.get("opt_in", str, None),
        opt_in_option=r.get("opt_in_option", str, ""),
        region=region,
        kind=r.get("kind", str, "permission"),
        subject=r.regex("subject", subject) if (subject := r.get("subject", str, None)) else None,
        tool=r.get("tool", str, None),
        deny_keys=r.strings("deny_keys", ["Escape"]),
        free_text=r.get("free_text", str, ""),
        toggle_key=r.get("toggle_key", str, ""),
        next_key=r.get("next_key", str, ""),
        prev_key=r.get("prev_key", str, ""),
        submit_option=r.get("submit_option", str, ""),
        key_enter=r.get("key_enter", bool, True),
        settle_ms=r.non_negative("settle_ms", 0),
        described=r.get("described", bool, False),
    )
    if dialog.kind not in QUESTION_KINDS:
        raise r._err("kind", f"must be one of {', '.join(QUESTION_KINDS)}, got {dialog.kind!r}")
    unknown = [k for k in dialog.deny_keys if k not in KEYS]
    if unknown or not dialog.deny_keys:
        raise r._err("deny_keys", f"must be key names from: {', '.join(sorted(KEYS))}")
    if dialog.opt_in_option and (dialog.keys or not dialog.opt_in):
        raise r._err("opt_in_option", "goes with opt_in and instead of keys")
    if dialog.free_text not in ("", "option"):
        raise r._err("free_text", f'must be "" or "option", got {dialog.free_text!r}')
    for name in ("toggle_key", "next_key", "prev_key"):
        if getattr(dialog, name) not in ("", *KEYS):
            raise r._err(name, f"must be a key name from: {', '.join(sorted(KEYS))}")
    r.done()
    return dialog


def _parse_overlay(r: _Reader, regions: Mapping[str, Region]) -> Overlay:
    region = r.get("region", str, "screen")
    if region not in regions and region not in SPECIAL_REGIONS:
        raise r._err("region", f"unknown region {region!r}")
    overlay = Overlay(name=r.get("name", str), pattern=r.regex("pattern", r.get("pattern", str)),
                      message=r.get("message", str), region=region)
    r.done()
    return overlay


def _parse_ack(r: _Reader) -> tuple[str, ...]:
    patterns = r.strings("patterns", [r"\bACK[: ]+{token}\b", r"\bACK: context received\b"])
    for i, p in enumerate(patterns):
        r.regex(f"patterns[{i}]", p.replace("{token}", "x"))
    r.done()
    return patterns


def _parse_syntax(r: _Reader) -> SyntaxSpec:
    rules: list[SyntaxRule] = []
    for sub in r.table_list("rules"):
        kind = sub.get("defuse", str)
        if kind not in DEFUSE_KINDS:
            raise sub._err("defuse", f"must be one of {', '.join(DEFUSE_KINDS)}, got {kind!r}")
        pattern_text = sub.get("pattern", str)
        insert = sub.get("insert", str, "")
        replace = sub.get("replace", str, "")
        if kind == "prefix" and not insert.strip():
            raise sub._err("insert", "defuse = 'prefix' needs a visible insert text")
        if kind == "replace" and not replace.strip():
            raise sub._err("replace", "defuse = 'replace' needs a visible replacement")
        if kind != "prefix" and insert:
            raise sub._err("insert", "only for defuse = 'prefix'")
        if kind != "replace" and replace:
            raise sub._err("replace", "only for defuse = 'replace'")
        if kind == "framing" and not pattern_text.startswith("\\A"):
            raise sub._err(
                "pattern", "a 'framing' token is live only at the start of the input: start with \\A"
            )
        rules.append(
            SyntaxRule(
                name=sub.get("name", str),
                token=sub.get("token", str),
                pattern=sub.regex("pattern", pattern_text),
                defuse=kind,
                insert=insert,
                replace=replace,
            )
        )
        sub.get("note", str, "")  # free text for people; the profile comments say more
        sub.done()
    spec = SyntaxSpec(rules=tuple(rules), legend=r.get("legend", str, ""))
    if any(rule.defuse != "framing" for rule in rules) and not spec.legend:
        raise r._err("legend", "is required when a rule changes text: tell the model how to read it")
    r.done()
    check_spec(spec, f"{r.source}: {r.where}")
    return spec
