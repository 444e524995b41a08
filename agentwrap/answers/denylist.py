"""The built-in deny-list: commands no answer rule may ever approve.

An allow rule is a glob a person wrote on a good day (``command = "*"`` for a
sandbox, ``npm *`` for a project); the commands an agent proposes are whatever
its model produced. Whatever the rules say, a permission for one of these is
left to the person (:func:`agentwrap.answers.rules.decide`). The rule, in
one sentence (README.md says it so): *a command that deletes or moves anything
outside the session's project (or the project folder itself, or its .git),
overwrites or truncates a file that exists outside it, throws away uncommitted
work in git, names a target that cannot be told before it runs, or wrecks the
system, is never approved by a rule.* In detail:

* outside the project (:class:`Where`: the session's folder; every path is
  resolved as the kernel would, symlinks and ``..`` followed): ``rm``,
  ``unlink``, ``shred`` of any path; ``find PATH ... -delete`` (or ``-exec
  rm``); ``xargs rm`` unless fed by a ``find`` (or ``git ls-files``) of the
  project; ``mv`` of a source; ``mv``/``cp``/``install``/``ln -f``/``rsync``
  onto, ``tee``/``truncate``/``dd of=``/``>`` into, a file that exists there
  (a new file outside is fine: nothing is lost). The same for the project
  folder itself, ``*`` of it and its ``.git`` (``rm -rf .``, ``rm -rf "$PWD"``,
  ``rm -rf *``, ``find . -delete`` unfiltered);
* a target that cannot be told: a variable other than ``$HOME``/``$PWD``, a
  command substitution, ``~user``, a glob that may match ``..``, a ``cd`` to
  any of those (``cd "$X" && rm -rf y``); with no project known (a caller
  that gives no :class:`Where`) every target is outside;
* ``git clean`` (not ``-n``), ``git reset --hard``/``--merge``, ``git checkout``
  of paths (``--``, ``.``, ``-f``, a file), ``git restore`` (of the worktree),
  ``git switch -f``, while ``git status --porcelain`` (``--ignored`` for
  ``clean -x``) lists anything in the repository they act on, or cannot say;
* ``chmod``/``chown``/``chgrp -R`` of ``/``, ``~``, a system dir;
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
subshells and command substitutions (a substitution's value is a target that
cannot be told), each one's words unquoted as the shell would (``"rm" -rf
'/'``), wrappers taken off (``sudo``, ``doas``, ``env`` with its assignments
and ``-C``, ``nohup``, ``nice``, ``timeout``, ``xargs``, ``exec``,
``command``, ``time``, ``VAR=value``, ``/usr/bin/`` paths, ``\\rm``), every
``cd`` followed (a later command may run in any directory an earlier ``cd``
named, or where it started: a ``cd`` may fail), and the scripts given to
``sh -c``/``bash -c``/``eval``/``su -c`` read the same way. A few patterns are
also looked for in the raw text, as a backstop for what the splitting cannot
see. A command that cannot be parsed (an open quote) is judged on what can be
read, and :func:`incomplete` tells the policy not to approve it either. Not
read: the contents of a script file the command runs, in-place edits
(``sed -i``), archives unpacked over files (``tar -x``).
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import islice

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
#: What shlex runs together ("));", "&>"), taken apart longest first.
_OPERATORS = ("&>>", "<<<", "&&", "||", "|&", ";;", ">>", ">|", "&>", ">&", "<<", "<>", "<&",
              "<(", ">(", ";", "&", "|", "(", ")", "<", ">")
#: Redirections that empty their file first (``>>`` appends, ``<`` reads).
_TRUNCATING = frozenset({">", ">|", "&>", ">&"})
#: The word a command substitution stands for: its value cannot be told.
UNKNOWN_WORD = "$(...)"
_GLOB = re.compile(r"[*?[]")
_VARIABLE = re.compile(r"^\$(\{(HOME|PWD)\}|(HOME|PWD)(?![A-Za-z0-9_]))")
#: What a path is to the project (:meth:`_Scan.places`).
INSIDE, ROOT, OUTSIDE, UNTOLD = "inside", "the project itself", "outside the project", "untold"
_TELL = {ROOT: "the project itself", OUTSIDE: "outside the project",
         UNTOLD: "a target that cannot be told before it runs"}
#: Commands that destroy the files they name.
_DELETERS = frozenset({"rm", "unlink", "shred", "srm", "wipe"})
#: Commands that copy or link onto their last operand: option -> takes a value.
_COPIERS: dict[str, frozenset[str]] = {
    "cp": frozenset({"-t", "--target-directory", "-S", "--suffix"}),
    "mv": frozenset({"-t", "--target-directory", "-S", "--suffix"}),
    "ln": frozenset({"-t", "--target-directory", "-S", "--suffix"}),
    "install": frozenset({"-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o",
                          "--owner", "-g", "--group"}),
    "rsync": frozenset({"-e", "--rsh", "-f", "--filter", "--exclude", "--include",
                        "--files-from", "-T", "--temp-dir", "--backup-dir", "--chmod",
                        "--chown", "--port", "-B", "--block-size"}),
}
#: What may stand between a ``find`` of the project and ``xargs rm``: filters only.
_FILTERS = frozenset({"grep", "egrep", "fgrep", "sort", "uniq", "head", "tail"})
#: How long ``git status`` may take before the command is held for not knowing.
GIT_TIMEOUT_S = 10.0

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
class Where:
    """Where a command would run: the session's project (a real path; ""
    unknown: every path then counts as outside it), the directory the command
    starts in (""; unknown: a relative path cannot be told) and HOME (``~``)."""

    project: str = ""
    cwd: str = ""
    home: str = ""

    @classmethod
    def of(cls, project: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None,
           home: str | None = None) -> Where:
        """The project at ``project``; the command starts in ``cwd`` (relative to
        the project; default the project) with ``home`` (default this process's)."""
        root = os.path.realpath(project)
        start = os.path.realpath(os.path.join(root, cwd)) if cwd else root
        return cls(root, start, home if home is not None else os.path.expanduser("~"))


@dataclass(frozen=True)
class Simple:
    """One simple command: its words (unquoted, wrappers off) and its redirection targets."""

    argv: tuple[str, ...]
    redirects: tuple[str, ...] = ()
    piped_from: tuple[str, ...] = ()  # the argv0s earlier in its pipeline
    wrappers: tuple[str, ...] = ()  # taken off the front: sudo, env, xargs, ...
    truncates: tuple[str, ...] = ()  # the targets of > >| &> (emptied first)
    fed_by: tuple[tuple[str, ...], ...] = ()  # the argvs earlier in its pipeline
    chdir: str | None = None  # where a wrapper runs it (env -C, sudo -D)


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


def destructive(command: str | None, *, where: Where | None = None, depth: int = 0) -> str | None:
    """Why ``command`` is on the built-in deny-list, or None when it is not.
    ``where``: the session's project and the command's directory (without it,
    every path a command deletes or moves counts as outside the project)."""
    if not command or not command.strip():
        return None
    return _Scan(where or Where(), depth).command(command)


def split(command: str) -> Iterator[Simple]:
    """The simple commands of a shell command line (best effort, never raises).
    A command substitution is read as commands of its own and stands as
    :data:`UNKNOWN_WORD` in the command around it."""
    text = command.replace("\\\n", " ").replace("\r", "\n").replace("\n", " ; ")
    text = text.replace("`", " ` ").replace("$(", " $( ").replace("<(", " <( ")
    tokens = _tokens(text)
    frames = [_Frame("")]
    i = 0
    while i < len(tokens):
        tok, f = tokens[i], frames[-1]
        i += 1
        if (tok in ("<(", ">(") or (tok == "`" and f.close != "`")
                or (tok == "$" and tokens[i:i + 1] == ["("])):
            i += tok == "$"
            f.word(UNKNOWN_WORD)
            frames.append(_Frame("`" if tok == "`" else ")"))
            continue
        if f.expect:
            f.word(tok)
        elif tok in (")", "`") and len(frames) > 1 and f.close == tok:
            yield from f.end()
            frames.pop()
        elif tok == "(":
            yield from f.end()
            frames.append(_Frame(")"))
        elif _is_redirect(tok):
            if f.words and re.fullmatch(r"\d+|\{\w+\}", f.words[-1]):
                f.words.pop()  # 2>file: the descriptor, not an argument
            f.expect = tok
        elif tok in _SEPARATORS:
            yield from f.end(pipe=tok in ("|", "|&"))
        else:
            f.words.append(tok)
    for f in reversed(frames):
        yield from f.end()


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        raw = list(lexer)
    except ValueError:  # an open quote: the words as they stand
        raw = text.split()
    tokens: list[str] = []
    for tok in raw:
        if not tok or not set(tok) <= set(";&|()<>"):
            tokens.append(tok)
            continue
        left = tok
        while left:  # "));" -> ")", ")", ";"
            op = next((o for o in _OPERATORS if left.startswith(o)), left[0])
            tokens.append(op)
            left = left[len(op):]
    return tokens


@dataclass
class _Frame:
    """The simple command being read, in the top level, a subshell or a substitution."""

    close: str  # the token that ends it ("" at the top)
    words: list[str] = field(default_factory=list)
    redirects: list[str] = field(default_factory=list)
    truncates: list[str] = field(default_factory=list)
    pipeline: list[tuple[str, ...]] = field(default_factory=list)
    expect: str = ""  # the redirection whose target comes next

    def word(self, tok: str) -> None:
        if not self.expect:
            self.words.append(tok)
            return
        if not (self.expect in (">&", "<&") and re.fullmatch(r"\d+-?|-", tok)):
            self.redirects.append(tok)
            if self.expect in _TRUNCATING:
                self.truncates.append(tok)
        self.expect = ""

    def end(self, pipe: bool = False) -> Iterator[Simple]:
        if self.words or self.redirects:
            simple = _unwrap(self.words, tuple(self.redirects), tuple(self.pipeline),
                             tuple(self.truncates))
            yield simple
            self.pipeline = [*self.pipeline, simple.argv] if pipe and simple.argv else []
        elif not pipe:
            self.pipeline = []
        self.words, self.redirects, self.truncates, self.expect = [], [], [], ""


def _is_redirect(tok: str) -> bool:
    return bool(tok) and set(tok) <= set("<>&|") and ("<" in tok or ">" in tok) \
        and tok not in ("<(", ">(")


def _unwrap(words: list[str], redirects: tuple[str, ...], fed_by: tuple[tuple[str, ...], ...],
            truncates: tuple[str, ...] = ()) -> Simple:
    """The words without keywords, assignments and wrappers (``sudo -u x env A=1 rm``)."""
    i = 0
    wrappers: list[str] = []
    chdir: str | None = None
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
                if name in ("env", "sudo") and words[i].startswith("--chdir="):
                    chdir = words[i].partition("=")[2]
                if words[i] in takes:
                    if name in ("env", "sudo") and words[i] in ("-C", "-D", "--chdir"):
                        chdir = words[i + 1] if i + 1 < len(words) else UNKNOWN_WORD
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
    return Simple(argv, redirects, tuple(a[0] for a in fed_by if a), tuple(wrappers),
                  truncates, fed_by, chdir)


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
            short.add(w.partition("=")[0])
        else:
            short.update(w[1:])
    return short, rest


def _operands(argv: tuple[str, ...], takes: frozenset[str]
              ) -> tuple[set[str], dict[str, str], list[str]]:
    """``_flags`` for a command whose options in ``takes`` take a value
    (``-t DIR``, ``-tDIR``, ``--target-directory=DIR``): flags, values, operands."""
    flags: set[str] = set()
    values: dict[str, str] = {}
    rest: list[str] = []
    words = list(argv[1:])
    while words:
        w = words.pop(0)
        if w == "--":
            rest += words
            break
        if not w.startswith("-") or w == "-":
            rest.append(w)
        elif w.startswith("--"):
            name, eq, value = w.partition("=")
            flags.add(name)
            if name in takes:
                values[name] = value if eq else (words.pop(0) if words else UNKNOWN_WORD)
        else:
            for j, letter in enumerate(w[1:], start=1):
                flags.add(letter)
                if f"-{letter}" in takes:
                    values[f"-{letter}"] = w[j + 1:] or (words.pop(0) if words else UNKNOWN_WORD)
                    break
    return flags, values, rest


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


def git_dirty(repo: str, *, ignored: bool = False) -> bool | None:
    """Whether ``git status --porcelain`` in ``repo`` lists anything (with
    ``--ignored``: ignored files too); None when it cannot say (no repository,
    no git, too slow). It takes no lock (``GIT_OPTIONAL_LOCKS=0``)."""
    args = ["git", "-C", repo, "status", "--porcelain", *(["--ignored"] if ignored else [])]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False,
                              env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(done.stdout.strip()) if done.returncode == 0 else None


Cwds = frozenset[str | None]  # where a command may run (None: cannot be told)


class _Scan:
    """One reading of a command line: the directories its commands may run in
    grow with every ``cd`` (a ``cd`` may fail, a subshell's ends: any of them)."""

    def __init__(self, where: Where, depth: int, cwds: Cwds | None = None) -> None:
        self.where, self.depth = where, depth
        self.cwds: Cwds = cwds if cwds is not None else frozenset({where.cwd or None})

    def command(self, command: str) -> str | None:
        for raw, pattern in _RAW:
            if pattern.search(command):
                return raw
        if self.depth > 4:  # sh -c 'sh -c "..."' five deep: nobody writes that by accident
            return "shell scripts nested too deep to read"
        for simple in split(command):
            why = self.judge(simple)
            if why:
                return why
            self.follow_cd(simple.argv)
        return None

    def follow_cd(self, argv: tuple[str, ...]) -> None:
        if not argv or argv[0] not in ("cd", "pushd", "popd", "chdir"):
            return
        _, rest = _flags(argv)
        if argv[0] == "popd" or rest[:1] == ["-"]:
            self.cwds = self.cwds | {None}
        else:
            self.cwds = self.cwds | self.dirs(rest[0] if rest else "~", self.cwds)

    def dirs(self, word: str, cwds: Cwds) -> Cwds:
        """The directories ``cd WORD`` may go to from any of ``cwds``."""
        found: set[str | None] = set()
        for cwd in cwds:
            path = self.path(word, cwd)
            found.add(os.path.realpath(path) if path and not _GLOB.search(path) else None)
        return frozenset(found)

    # --- paths ---------------------------------------------------------------------------

    def path(self, word: str, cwd: str | None) -> str | None:
        """The absolute path ``word`` names run from ``cwd`` (not normalised: the
        kernel follows symlinks before ``..``), or None when it cannot be told."""
        w = word
        if w.startswith("~"):
            head, sep, tail = w.partition("/")
            if head != "~" or not self.where.home:
                return None  # ~user
            w = self.where.home + sep + tail
        m = _VARIABLE.match(w)
        if m:
            value = self.where.home if "HOME" in m.group(0) else cwd
            if value is None or not value:
                return None
            w = value + w[m.end():]
        if not w or "$" in w or "`" in w:
            return None
        if not os.path.isabs(w):
            if cwd is None:
                return None
            w = os.path.join(cwd, w)
        return w

    def places(self, word: str, cwds: Cwds, *, follow: bool = False) -> list[tuple[str, str]]:
        """What ``word`` names, from each of ``cwds``: (:data:`INSIDE` | :data:`ROOT` |
        :data:`OUTSIDE` | :data:`UNTOLD`, the real path). ``follow``: the last
        part's symlink too (a write does; ``rm link`` removes the link)."""
        found: list[tuple[str, str]] = []
        for cwd in cwds:
            path = self.path(word, cwd)
            if path is None:
                found.append((UNTOLD, word))
            elif _GLOB.search(path):
                found += self._glob(path, follow)
            else:
                found.append(self.place(path, follow))
        return found

    def _glob(self, pattern: str, follow: bool) -> list[tuple[str, str]]:
        parts = pattern.split("/")
        if any(_GLOB.search(p) and p.startswith(".") and (fnmatchcase(".", p)
                                                          or fnmatchcase("..", p))
               for p in parts):
            return [(UNTOLD, pattern)]  # .* may match .. (bash before 5.2)
        head, tail = os.path.split(pattern.rstrip("/"))
        if tail == "*" and not _GLOB.search(head) and self.place(head, True)[0] == ROOT:
            return [(ROOT, self.where.project)]  # everything in it
        matches = list(islice(glob.iglob(pattern), 500))
        if len(matches) == 500 or not matches:  # too many to look at, or none: as written
            return [self.place(pattern, follow)]
        return [self.place(m, follow) for m in matches]

    def place(self, path: str, follow: bool) -> tuple[str, str]:
        base = os.path.basename(path)
        real = os.path.realpath(path) if follow or base in ("", ".", "..") \
            else os.path.join(os.path.realpath(os.path.dirname(path)), base)
        root = self.where.project
        if not root:
            return OUTSIDE, real
        if real in (root, os.path.join(root, ".git")):
            return ROOT, real
        if real.startswith(root.rstrip("/") + "/"):
            return INSIDE, real
        return OUTSIDE, real

    # --- judging one simple command ------------------------------------------------------

    def judge(self, s: Simple) -> str | None:
        cwds = self.dirs(s.chdir, self.cwds) if s.chdir is not None else self.cwds
        why = _judge_system(s, self.depth, lambda script: _Scan(
            self.where, self.depth + 1, cwds).command(script))
        if why or not s.argv:
            return why or self.overwrites(s.truncates, cwds, ">")
        return (self.overwrites(s.truncates, cwds, ">") or self.deletes(s, cwds)
                or self.copies(s, cwds) or self.writes(s, cwds) or self.git(s, cwds))

    def removed(self, words: Iterable[str], cwds: Cwds, verb: str) -> str | None:
        """Why deleting (or moving away) ``words`` is held: anything not inside."""
        for word in words:
            for place, real in self.places(word, cwds):
                if place != INSIDE:
                    return f"{verb} {word}: {_TELL[place]}" + (
                        f" ({real})" if place == OUTSIDE and real != word else "")
        return None

    def overwrites(self, words: Iterable[str], cwds: Cwds, verb: str) -> str | None:
        """Why writing over ``words`` is held: a file that exists outside, or untold."""
        for word in words:
            if word.startswith("/dev/"):
                continue  # devices: the disk rules
            for place, real in self.places(word, cwds, follow=True):
                if place == UNTOLD:
                    return f"{verb} {word}: {_TELL[place]}"
                if place == OUTSIDE and os.path.lexists(real):
                    return f"{verb} {word}: a file that exists {_TELL[place]}"
        return None

    def deletes(self, s: Simple, cwds: Cwds) -> str | None:
        cmd, argv = s.argv[0], s.argv
        moves = cmd in _DELETERS or cmd == "mv" or (cmd == "rsync"
                                                    and "--remove-source-files" in argv)
        if moves and "xargs" in s.wrappers and not self.fed_from_project(s, cwds):
            return f"xargs {cmd} of what it reads: {_TELL[UNTOLD]}"
        if cmd in _DELETERS:
            _, rest = _flags(argv)
            return self.removed(rest, cwds, cmd)
        if cmd == "find":
            return self.find(argv, cwds)
        return None

    def find(self, argv: tuple[str, ...], cwds: Cwds) -> str | None:
        deletes = "-delete" in argv or (any(w in ("-exec", "-execdir", "-ok", "-okdir")
                                            for w in argv)
                                        and any(_base(w) in _DELETERS for w in argv))
        if not deletes:
            return None
        filtered = any(w in ("-name", "-iname", "-path", "-ipath", "-regex", "-iregex",
                             "-empty", "-newer", "-mtime", "-mmin", "-type", "-size")
                       for w in argv)
        for start in _find_starts(argv):
            for place, _ in self.places(start, cwds):
                if place != INSIDE and not (place == ROOT and filtered):
                    return f"find {start} deleting what it finds: {_TELL[place]}"
        return None

    def fed_from_project(self, s: Simple, cwds: Cwds) -> bool:
        """``find`` of the project (or ``git ls-files``) | filters | xargs: it reads
        paths in the project only."""
        if not s.fed_by or any(a[0] not in _FILTERS for a in s.fed_by[1:]):
            return False
        first = s.fed_by[0]
        if first[:2] == ("git", "ls-files"):
            return all(place in (INSIDE, ROOT) for place, _ in self.places(".", cwds))
        if first[:1] != ("find",):
            return False
        filtered = len(first) > len(_find_starts(first)) + 1
        return all(place == INSIDE or (place == ROOT and filtered)
                   for start in _find_starts(first) for place, _ in self.places(start, cwds))

    def copies(self, s: Simple, cwds: Cwds) -> str | None:
        """``mv`` away from outside; ``mv``/``cp``/``ln -f``/``install``/``rsync``
        onto a file that exists outside."""
        cmd = s.argv[0]
        if cmd not in _COPIERS:
            return None
        flags, values, rest = _operands(s.argv, _COPIERS[cmd])
        target = values.get("-t") or values.get("--target-directory")
        if cmd == "rsync":
            rest = [w for w in rest if not re.match(r"^[^/]*:", w)]  # host:path is not here
        sources, dest = (rest, target) if target else (rest[:-1], rest[-1] if len(rest) > 1
                                                       else None)
        if cmd == "mv" or (cmd == "rsync" and "--remove-source-files" in flags):
            why = self.removed(sources, cwds, cmd)
            if why:
                return why
        if dest is None or flags & {"n", "--no-clobber"} or (cmd == "ln" and not flags & {
                "f", "--force"}):
            return None
        if cmd == "rsync" or "T" in flags or "--no-target-directory" in flags:
            return self.overwrites([dest], cwds, cmd)
        return self.lands(sources, dest, cwds, cmd)

    def lands(self, sources: list[str], dest: str, cwds: Cwds, verb: str) -> str | None:
        """Why putting ``sources`` at ``dest`` is held: a file there (or, ``dest`` a
        directory, one of the same name in it) exists outside the project."""
        for place, real in self.places(dest, cwds, follow=True):
            if place == UNTOLD:
                return f"{verb} onto {dest}: {_TELL[place]}"
            if place != OUTSIDE or not os.path.lexists(real):
                continue
            if not os.path.isdir(real):
                return f"{verb} onto {dest}: a file that exists {_TELL[place]}"
            for src in sources:
                name = os.path.basename(src.rstrip("/"))
                if not name or "$" in name or _GLOB.search(name) or os.path.lexists(
                        os.path.join(real, name)):
                    return f"{verb} {src} into {dest}: over what exists {_TELL[place]}"
        return None

    def writes(self, s: Simple, cwds: Cwds) -> str | None:
        """``tee`` (not ``-a``), ``truncate``, ``dd of=`` over a file outside."""
        cmd, argv = s.argv[0], s.argv
        if cmd == "tee":
            flags, rest = _flags(argv)
            return None if flags & {"a", "--append"} else self.overwrites(rest, cwds, cmd)
        if cmd == "truncate":
            _, _, rest = _operands(argv, frozenset({"-s", "--size", "-r", "--reference"}))
            return self.overwrites(rest, cwds, cmd)
        if cmd == "dd":
            return self.overwrites([w[3:] for w in argv[1:] if w.startswith("of=")], cwds, cmd)
        return None

    def git(self, s: Simple, cwds: Cwds) -> str | None:
        """git commands that throw away uncommitted work, while there is some."""
        if s.argv[0] != "git":
            return None
        where, words = _git_words(s.argv)
        what = _git_discards(words)
        if what is None:
            return None
        name, ignored = what
        repos = self.dirs(where, cwds) if where is not None else cwds
        for repo in repos:
            if repo is None:
                return f"{name} in a repository that cannot be told"
            if name == "git checkout" and not _checkout_paths(words, repo):
                continue
            dirty = git_dirty(repo, ignored=ignored)
            if dirty is None:
                return f"{name}: git status could not say what it would throw away ({repo})"
            if dirty:
                return f"{name} with uncommitted changes in {repo}"
        return None


def _find_starts(argv: tuple[str, ...]) -> list[str]:
    """The paths ``find`` starts from (``.`` when none is named)."""
    words = list(argv[1:])
    while words and (words[0] in ("-H", "-L", "-P") or words[0].startswith("-O")):
        words.pop(0)
    starts: list[str] = []
    for w in words:
        if w.startswith("-") or w in ("(", ")", "!", ","):
            break
        starts.append(w)
    return starts or ["."]


def _git_words(argv: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """``git -C DIR -c k=v SUB ...``: the directory (joined ``-C``s; None: none)
    and the words from the subcommand on."""
    words = list(argv[1:])
    where: str | None = None
    while words and words[0].startswith("-"):
        takes = words[0] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace")
        if words[0] == "-C" and len(words) > 1:
            where = os.path.join(where, words[1]) if where is not None else words[1]
        elif words[0].startswith(("--git-dir", "--work-tree")):
            where = UNKNOWN_WORD  # another repository than the directory says
        words = words[2:] if takes else words[1:]
    return where, words


def _git_discards(words: list[str]) -> tuple[str, bool] | None:
    """(what, with ignored files) when ``git WORDS`` may throw away uncommitted work."""
    if not words:
        return None
    sub, args = words[0], tuple(words)
    flags, _ = _flags(args)
    if sub == "clean" and not flags & {"n", "--dry-run"}:
        return "git clean", bool(flags & {"x", "X"})
    if sub == "reset" and flags & {"--hard", "--merge"}:
        return "git reset --hard", False
    if sub == "checkout" and not flags & {"b", "B", "--orphan"}:
        return "git checkout", False
    if sub == "restore" and (not flags & {"S", "--staged"} or flags & {"W", "--worktree"}):
        return "git restore", False
    if sub == "switch" and flags & {"f", "--force", "--discard-changes"}:
        return "git switch --discard-changes", False
    return None


def _checkout_paths(words: list[str], repo: str) -> bool:
    """Whether ``git checkout`` writes over files (``--``, ``-f``, ``-p``, ``.``, a
    path that exists) rather than switching branches (which keeps changes)."""
    args = words[1:]
    flags, rest = _flags(tuple(words))
    if "--" in args or flags & {"f", "--force", "p", "--patch"}:
        return True
    return any(w in (".", ":/") or os.path.lexists(os.path.join(repo, w)) for w in rest)


def _judge_system(s: Simple, depth: int, script: Callable[[str], str | None]) -> str | None:
    """The rules that need no project: devices, downloads run, system dirs, power."""
    for target in s.redirects:
        if target.startswith("/dev/") and not _HARMLESS_DEVICES.match(target):
            return f"a redirection onto {target}"
    if not s.argv:
        return None
    cmd, argv = s.argv[0], s.argv
    short, rest = _flags(argv)
    if cmd in _SHELLS or cmd in ("eval", "su"):
        text = _script(cmd, argv)
        if text is not None:
            why = script(text)
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
        if recursive and bad is not None:
            return f"rm -r of {bad}"
    if cmd in ("chmod", "chown", "chgrp"):
        recursive = bool(short & {"R", "--recursive"})
        targets = rest[1:] if rest else []  # the first word is the mode or owner
        bad = next((w for w in targets if _dangerous_target(w)), None)
        if recursive and bad is not None:
            return f"{cmd} -R of {bad}"
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
        return _git_force_push(argv)
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
    _, words = _git_words(argv)
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
