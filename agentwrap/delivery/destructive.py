"""The built-in deny-list: commands no answer rule may ever approve.

An allow rule is a glob a person wrote on a good day (``command = "*"`` for a
sandbox, ``npm *`` for a project); the commands an agent proposes are whatever
its model produced. Whatever the rules say, a permission for one of these is
left to the person (:func:`agentwrap.delivery.policy.decide`):

* ``rm -r`` of ``/``, ``/*``, ``~``, ``$HOME``, ``.``, ``*``, a system dir, or
  with ``--no-preserve-root``; ``find`` of those with ``-delete``/``-exec rm``;
* ``chmod``/``chown``/``chgrp -R`` of those;
* making or wiping file systems (``mkfs*``, ``mke2fs``, ``mkswap``,
  ``wipefs``, ``fdisk``/``sfdisk``/``parted``), ``dd of=/dev/...``, a
  redirection onto a disk device (``> /dev/sda``), ``shred`` of a device;
* running what was just downloaded: ``curl|wget ... | sh``, ``sh <(curl ...)``,
  ``bash -c "$(curl ...)"``, ``eval "$(wget ...)"``;
* ``git push --force``/``-f``/``+ref`` to ``main`` or ``master`` (or to no
  named branch: the current one may be either);
* a fork bomb (``:(){ :|:& };:``), ``shutdown``, ``reboot``, ``halt``,
  ``poweroff``, ``init 0|6``, ``systemctl poweroff|reboot|halt``,
  ``kill -9 -1``.

Matched on what the shell would run, not on the text: the command is split
into its simple commands at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines,
subshells and command substitutions, each one's words unquoted as the shell
would (``"rm" -rf '/'``), wrappers taken off (``sudo``, ``doas``, ``env``
with its assignments, ``nohup``, ``nice``, ``timeout``, ``xargs``, ``exec``,
``command``, ``time``, ``VAR=value``, ``/usr/bin/`` paths, ``\\rm``), and the
scripts given to ``sh -c``/``bash -c``/``eval``/``su -c`` read the same way.
A few patterns are also looked for in the raw text, as a backstop for what
the splitting cannot see. A command that cannot be parsed (an open quote) is
judged on those alone, and :func:`incomplete` tells the policy not to approve
it either.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "ash", "csh", "tcsh",
                     "busybox"})
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "lwp-request"})
_SYSTEM_DIRS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32",
                          "/lib64", "/opt", "/proc", "/root", "/sbin", "/srv", "/sys", "/usr",
                          "/var", "/usr/bin", "/usr/lib", "/usr/local", "/var/lib", "/mnt",
                          "/media", "/snap", "/Users", "/System", "/Library", "/Applications"})
_HOME_WORDS = ("~", "$HOME", "${HOME}")
_HARMLESS_DEVICES = re.compile(r"^/dev/(null|zero|stdout|stderr|stdin|tty|fd/\d+|random|urandom)$")
_FORMATTERS = re.compile(r"^(mkfs(\..*)?|mke2fs|mkswap|wipefs|fdisk|sfdisk|cfdisk|gdisk|sgdisk"
                         r"|parted|mkntfs|mkdosfs|blkdiscard)$")
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff"})
_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until",
                       "!", "{", "}", "time", "coproc"})
# wrappers that run their arguments as a command: name -> options that take a value
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-T", "-U",
                       "--user", "--group", "--host", "--prompt", "--chdir"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "nohup": frozenset(), "exec": frozenset({"-a"}), "command": frozenset(),
    "builtin": frozenset(), "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}), "chrt": frozenset(), "taskset": frozenset(),
    "setsid": frozenset(), "unbuffer": frozenset(), "caffeinate": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "xargs": frozenset({"-I", "-L", "-n", "-P", "-d", "-E", "-s", "-a", "--arg-file",
                        "--delimiter", "--max-args", "--max-procs", "--replace"}),
    "watch": frozenset({"-n", "--interval", "-d"}),
}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;", "(", ")", "$(", "`", "<(", ">("})

# backstops on the raw text (quotes and all): what splitting may not see
_RAW: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("fork bomb", re.compile(r"(\S+)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&")),
    ("a download piped into a shell", re.compile(
        r"\b(curl|wget|fetch)\b[^\n;]*\|\s*(sudo\s+(-\S+\s+)*)?(\S*/)?(ba|z|da|k|mk|fi|a|c|tc)?sh\b")),
    ("a shell running a download", re.compile(
        r"\b((ba|z|da|k|fi)?sh|eval|source|\.)\s[^\n;|]*(\$\(|<\(|`)\s*(sudo\s+)?(curl|wget|fetch)\b")),
    ("--no-preserve-root", re.compile(r"--no-preserve-root\b")),
    ("a redirection onto a disk", re.compile(
        r">\s*/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|md\d|dm-\d|mapper/)")),
)


@dataclass(frozen=True)
class Simple:
    """One simple command: its words (unquoted, wrappers off) and its redirection targets."""

    argv: tuple[str, ...]
    redirects: tuple[str, ...] = ()
    piped_from: tuple[str, ...] = ()  # the argv0s earlier in its pipeline
    wrappers: tuple[str, ...] = ()  # taken off the front: sudo, env, xargs, ...


def incomplete(command: str) -> bool:
    """The command as shown may not be all of it: an open quote, or it ends in an
    operator or a line continuation (a dialog cut it at the screen's edge)."""
    text = command.rstrip()
    if not text or text.endswith(("&&", "||", "|", "\\", "…", "...", "$(", "(", "`")):
        return True
    try:
        shlex.split(text)
    except ValueError:
        return True
    return False


def destructive(command: str | None, *, depth: int = 0) -> str | None:
    """Why ``command`` is on the built-in deny-list, or None when it is not."""
    if not command or not command.strip():
        return None
    for raw, pattern in _RAW:
        if pattern.search(command):
            return raw
    if depth > 4:  # sh -c 'sh -c "..."' five deep: nobody writes that by accident
        return "shell scripts nested too deep to read"
    for simple in split(command):
        why = _judge(simple, depth)
        if why:
            return why
    return None


def split(command: str) -> Iterator[Simple]:
    """The simple commands of a shell command line (best effort, never raises)."""
    text = command.replace("\\\n", " ").replace("\r", "\n").replace("\n", " ; ")
    text = text.replace("`", " ` ").replace("$(", " $( ").replace("<(", " <( ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:  # an open quote: the words as they stand
        tokens = text.split()
    words: list[str] = []
    redirects: list[str] = []
    pipeline: list[str] = []
    expect_target = False
    for tok in tokens:
        if expect_target:
            redirects.append(tok)
            expect_target = False
            continue
        if _is_redirect(tok):
            expect_target = True
            continue
        if tok in _SEPARATORS or (tok and set(tok) <= set(";&|()") and tok not in ("&>",)):
            if words:
                simple = _unwrap(words, tuple(redirects), tuple(pipeline))
                yield simple
                pipeline = [*pipeline, simple.argv[0]] if tok in ("|", "|&") and simple.argv \
                    else []
            elif tok not in ("|", "|&"):
                pipeline = []
            words, redirects = [], []
            continue
        words.append(tok)
    if words:
        yield _unwrap(words, tuple(redirects), tuple(pipeline))


def _is_redirect(tok: str) -> bool:
    return bool(tok) and set(tok) <= set("<>&|") and ("<" in tok or ">" in tok) \
        and tok not in ("<(", ">(")


def _unwrap(words: list[str], redirects: tuple[str, ...], piped: tuple[str, ...]) -> Simple:
    """The words without keywords, assignments and wrappers (``sudo -u x env A=1 rm``)."""
    i = 0
    wrappers: list[str] = []
    while i < len(words):
        w = words[i]
        name = _base(w)
        if w in _KEYWORDS or w == "$" or _ASSIGNMENT.match(w):
            i += 1
            continue
        if name in _WRAPPERS:
            takes = _WRAPPERS[name]
            wrappers.append(name)
            i += 1
            while i < len(words) and (words[i].startswith("-") or _ASSIGNMENT.match(words[i])
                                      or (name == "timeout" and _is_duration(words[i]))):
                if words[i] == "--":
                    i += 1
                    break
                if words[i] in takes:
                    i += 1
                i += 1
            continue
        if name == "timeout":
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
            if i < len(words) and _is_duration(words[i]):
                i += 1
            continue
        break
    argv = tuple(words[i:])
    if argv:
        argv = (_base(argv[0]), *argv[1:])
    return Simple(argv, redirects, piped, tuple(wrappers))


def _is_duration(word: str) -> bool:
    return bool(re.fullmatch(r"\d+(\.\d+)?[smhd]?", word))


def _base(word: str) -> str:
    """``/usr/bin/rm`` and ``\\rm`` are ``rm``."""
    return os.path.basename(word.lstrip("\\")) or word


def _flags(argv: tuple[str, ...]) -> tuple[set[str], list[str]]:
    """Short flags (letters) and long options of ``argv[1:]``, and its other words."""
    short: set[str] = set()
    rest: list[str] = []
    ended = False
    for w in argv[1:]:
        if ended or not w.startswith("-") or w == "-":
            rest.append(w)
        elif w == "--":
            ended = True
        elif w.startswith("--"):
            short.add(w)
        else:
            short.update(w[1:])
    return short, rest


def _dangerous_target(word: str) -> bool:
    w = word.strip()
    for home in _HOME_WORDS:
        if w == home or (w.startswith(home + "/") and w[len(home) + 1:].strip("/*") == ""):
            return True
    stripped = w
    while stripped.endswith("/*") or (stripped.endswith("/") and stripped != "/"):
        stripped = stripped[:-2] if stripped.endswith("/*") else stripped[:-1]
    if stripped in ("", "/", ".", "..", "*", "./*", "../*", ".*"):
        return True
    return stripped in _SYSTEM_DIRS or re.fullmatch(r"/+", stripped) is not None


def _judge(s: Simple, depth: int) -> str | None:
    for target in s.redirects:
        if target.startswith("/dev/") and not _HARMLESS_DEVICES.match(target):
            return f"a redirection onto {target}"
    if not s.argv:
        return None
    cmd, argv = s.argv[0], s.argv
    short, rest = _flags(argv)
    if cmd in _SHELLS or cmd in ("eval", "su"):
        script = _script(cmd, argv)
        if script is not None:
            why = destructive(script, depth=depth + 1)
            if why:
                return f"{why} (in {cmd} {'-c ' if cmd != 'eval' else ''}...)"
        if any(p in _DOWNLOADERS for p in s.piped_from):
            return f"a download piped into {cmd}"
    if cmd in ("source", ".") and any(p in _DOWNLOADERS for p in s.piped_from):
        return f"a download piped into {cmd}"
    if cmd == "rm":
        recursive = bool(short & {"r", "R", "--recursive"})
        if "--no-preserve-root" in short:
            return "rm --no-preserve-root"
        bad = next((w for w in rest if _dangerous_target(w)), None)
        if recursive and (bad is not None or "xargs" in s.wrappers):
            return f"rm -r of {bad or 'what xargs reads'}"
    if cmd in ("chmod", "chown", "chgrp"):
        recursive = bool(short & {"R", "--recursive"})
        targets = rest[1:] if rest else []  # the first word is the mode or owner
        bad = next((w for w in targets if _dangerous_target(w)), None)
        if recursive and bad is not None:
            return f"{cmd} -R of {bad}"
    deletes = "-delete" in argv or (any(w in ("-exec", "-execdir", "-ok") for w in argv)
                                    and any(_base(w) in ("rm", "shred") for w in argv))
    here = rest[:1] in (["."], ["./"], [".."], ["*"])  # the project: fine when filtered
    filtered = any(w in ("-name", "-iname", "-path", "-ipath", "-regex", "-iregex", "-empty")
                   for w in argv)
    if cmd == "find" and rest and _dangerous_target(rest[0]) and deletes \
            and not (here and filtered):
        return f"find {rest[0]} deleting what it finds"
    if _FORMATTERS.match(cmd):
        return f"{cmd}: makes or wipes a file system"
    if cmd == "dd":
        out = next((w[3:] for w in argv[1:] if w.startswith("of=")), "")
        if out.startswith("/dev/") and not _HARMLESS_DEVICES.match(out):
            return f"dd onto {out}"
    if cmd == "shred" and any(w.startswith("/dev/") for w in rest):
        return "shred of a device"
    if cmd in _POWER:
        return f"{cmd}: stops the machine"
    if cmd in ("init", "telinit") and rest[:1] in (["0"], ["6"]):
        return f"{cmd} {rest[0]}: stops the machine"
    if cmd == "systemctl" and any(w in ("poweroff", "reboot", "halt", "kexec",
                                        "emergency", "rescue") for w in rest):
        return "systemctl: stops the machine"
    if cmd == "kill" and "-1" in argv[1:]:
        return "kill -1: every process"
    if cmd == "git":
        why = _git_force_push(argv)
        if why:
            return why
    return None


def _script(cmd: str, argv: tuple[str, ...]) -> str | None:
    """The script a shell, ``su`` or ``eval`` is told to run in its arguments."""
    if cmd == "eval":
        return " ".join(argv[1:])
    for i, w in enumerate(argv[1:], start=1):
        if w.startswith("-") and not w.startswith("--") and "c" in w[1:] and i + 1 < len(argv):
            return argv[i + 1]
        if w == "--command" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _git_force_push(argv: tuple[str, ...]) -> str | None:
    words = list(argv[1:])
    while words and words[0].startswith("-"):  # git -C dir -c k=v push
        takes = words[0] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace")
        words = words[2:] if takes else words[1:]
    if not words or words[0] != "push":
        return None
    args = words[1:]
    opts = [w for w in args if w.startswith("-")]
    refs = [w for w in args if not w.startswith("-")]
    force = any(o in ("--force", "-f", "--force-with-lease", "--force-if-includes", "--mirror")
                or o.startswith("--force-with-lease=")
                or (not o.startswith("--") and "f" in o[1:]) for o in opts)
    specs = refs[1:]  # after the remote
    plus = [r for r in specs if r.startswith("+")]
    if not force and not plus:
        return None
    targets = [r.lstrip("+").split(":")[-1] for r in (specs if force else plus)]
    main = next((t for t in targets
                 if re.fullmatch(r"(refs/heads/)?(main|master)", t)), None)
    if main is not None:
        return f"a force push to {main}"
    if force and not specs:
        return "a force push with no branch named (the current one may be main)"
    if "--mirror" in opts or "--all" in opts:
        return "a force push of every branch"
    return None
