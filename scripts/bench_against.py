"""``--against COMMIT`` for every benchmark: the same benchmark on another commit, same run.

A benchmark's figure alone says little on a machine that eight developers
share; the same benchmark on the previous commit, run turn about with this
tree in the same minutes, says whether a change made it slower. This module
is that plumbing, once for every ``scripts/bench_*.py`` that offers
``--against`` (bench_hooks.py, bench_scale.py):

* :func:`baseline`: COMMIT as a tree of its own with an interpreter of its
  own, built once and kept under ``~/.cache/agentwrap/bench-against/<commit>/``
  (``AGENTWRAP_BENCH_CACHE`` moves it; a commit's tree never changes, and
  building one, native helpers included, costs a minute on a loaded machine).
  The tree is ``git archive``'s, not ``git worktree add``'s: nothing is
  registered in the repository every worktree shares, so a killed run leaves
  a directory behind and nothing else. Its native helpers (the pty relay, the
  hook client) are built from its own sources with this tree's
  hatch_build.py, its bytecode compiled as an install compiles it. Its venv
  (``venv/``, made with this interpreter) finds the commit's ``agentwrap``
  first and this venv's dependencies after it, so ``python -m agentwrap``
  started anywhere by that interpreter (every hook a benchmark's agent
  starts) is the commit's.
* :func:`interleaved`: the benchmark's own command, once per tree per round,
  the trees taking turns (A B, then B A: a trend in the load, or a cache one
  warmed, favours neither), the load average noted before each run.
* :func:`print_ratios`: per figure, each tree's median, the ratio this / COMMIT
  and each round's paired ratio.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import site
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import ROOT, TREE_ENV, fmt, import_path

#: Where built trees are kept (default ``~/.cache/agentwrap/bench-against``).
CACHE_ENV = "AGENTWRAP_BENCH_CACHE"


@dataclass(frozen=True)
class Tree:
    """A source tree of agentwrap under test and the interpreter that runs it."""

    side: str  # "this" or "ref"
    label: str
    root: Path
    python: str

    def env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """``env`` (default this process's) with the tree first on PYTHONPATH
        (what a benchmark's child passes on to the processes it starts)."""
        out = dict(os.environ if env is None else env)
        out["PYTHONPATH"] = str(self.root) + os.pathsep + out.get("PYTHONPATH", "")
        out[TREE_ENV] = str(self.root)  # benchlib.UNDER_TEST: the tree a script measures
        return out


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def this_label() -> str:
    """This tree's commit, ``+changes`` when tracked files differ from it."""
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + ("+changes" if dirty else "")


#: Set (to anything) to measure this checkout in place, through its own venv, not built.
IN_PLACE_ENV = "AGENTWRAP_BENCH_IN_PLACE"


def snapshot() -> str:
    """This checkout as it is now (changed and new files, what .gitignore
    leaves out left out) as a commit object of its own, HEAD when nothing
    changed. Made through a temporary index, so the repository's refs, index
    and working tree are untouched; author, committer and dates fixed, so the
    same files give the same commit and its cached build is used again."""
    if not git("status", "--porcelain"):
        return git("rev-parse", "HEAD")
    fixed = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
             "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
             "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
    with tempfile.TemporaryDirectory(prefix="awsnap-") as tmp:
        env = {**os.environ, **fixed, "GIT_INDEX_FILE": str(Path(tmp) / "index")}

        def run(*args: str) -> str:
            return subprocess.run(["git", "-C", str(ROOT), *args], env=env, capture_output=True,
                                  text=True, check=True).stdout.strip()

        run("read-tree", "HEAD")
        run("add", "-A")
        tree = run("write-tree")
        return run("commit-tree", tree, "-p", "HEAD", "-m", "bench_against: this checkout")


def this_tree(root: Path = ROOT) -> Tree:
    """This checkout, built as :func:`baseline` builds the other commit (a
    snapshot of it, :func:`snapshot`): its own tree, native helpers, bytecode
    and venv. Measured in place through the checkout's own venv (its editable
    install) it was not like for like: 2e7f2a2 against its parent, whose only
    difference is a test, measured enqueue -> delivered 1.25x (206 vs 166 ms),
    while both built measure the same. ``root`` another tree, or
    :data:`IN_PLACE_ENV` set: that tree as it is, by this interpreter."""
    if root.resolve() != ROOT.resolve() or os.environ.get(IN_PLACE_ENV):
        return Tree("this", f"this {this_label()}", root.resolve(), sys.executable)
    built = baseline(snapshot())
    return Tree("this", f"this {this_label()}", built.root, built.python)


def cache_dir() -> Path:
    found = os.environ.get(CACHE_ENV)
    return Path(found) if found else Path.home() / ".cache" / "agentwrap" / "bench-against"


def baseline(ref: str) -> Tree:
    """Commit ``ref``'s tree and interpreter, from the cache or built into it
    (built in a private temp dir beside it, then renamed in whole: a run that
    dies mid-build leaves no half tree for the next one)."""
    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    label = git("rev-parse", "--short", commit)
    home = cache_dir()
    done = home / commit
    if not (done / "venv" / "bin" / "python").exists():
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        work = Path(tempfile.mkdtemp(prefix=f".{label}-", dir=home))
        try:
            build(commit, work, done)
            try:
                os.rename(work, done)
            except OSError:  # another run built it meanwhile
                if not (done / "venv" / "bin" / "python").exists():
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    link_dependencies(done / "venv", done / "tree")
    return Tree("ref", label, done / "tree", str(done / "venv" / "bin" / "python"))


def build(commit: str, into: Path, final: Path) -> None:
    """``into/tree``: the commit's files, native helpers and bytecode;
    ``into/venv``: an interpreter that imports that tree's agentwrap once
    ``into`` is renamed ``final``."""
    tree = into / "tree"
    tree.mkdir()
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                               stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=False)
    assert archive.stdout is not None
    archive.stdout.close()
    if archive.wait() != 0 or untar.returncode != 0:
        raise RuntimeError(f"git archive {commit} | tar -x failed")
    build_native(tree)
    compile_tree(tree)
    venv = into / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    link_dependencies(venv, final / "tree")


#: The file in a built venv's site-packages that puts the tree and this venv's dependencies on its path.
PTH = "agentwrap-bench-against.pth"


def link_dependencies(venv: Path, tree: Path) -> None:
    """``venv`` imports ``tree`` first, then THIS interpreter's dependencies
    (as plain entries: this venv's own .pth files, its editable agentwrap
    among them, are not read). Written at build and again on each use: the
    cache outlives the venv that built it (a worktree removed, its venv with
    it), and a cached tree pointing at a gone venv failed every run of the
    other commit with ``No module named 'rich'``."""
    found = sorted((venv / "lib").glob("python*/site-packages"))
    if not found:
        raise RuntimeError(f"{venv}: no site-packages")
    text = f"{tree}\n" + "".join(f"{p}\n" for p in site.getsitepackages())
    pth = found[0] / PTH
    if not pth.exists() or pth.read_text(encoding="utf-8") != text:
        pth.write_text(text, encoding="utf-8")


def compile_tree(tree: Path) -> None:
    """The tree's bytecode, written as an install writes it: without it each
    run of that tree compiles every module it imports from source (nothing is
    cached when ``PYTHONDONTWRITEBYTECODE`` is set), which made the other
    commit's hooks look ~20 ms slower than they are."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0",
                    str(tree / "agentwrap")], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})


def build_native(tree: Path) -> list[Path]:
    """The tree's native helpers, built with this tree's hatch_build.py (the
    other commit's imports hatchling, which the venv need not have). Without a
    C compiler the comparison is refused: the other tree would relay and run
    its hooks in Python while this one uses its binaries."""
    hb = import_path("agentwrap_hatch_build", ROOT / "hatch_build.py")
    cc = hb.compiler()
    if cc is None:
        raise RuntimeError("no C compiler: the other tree's native helpers cannot be built")
    built: list[Path] = hb.build_helpers(cc, tree)
    return built


def alternate(labels: Sequence[str], rounds: int) -> Iterator[tuple[int, list[str]]]:
    """(round, labels in the order they run): A B, then B A, and so on, so a
    trend in the machine's load, or a cache warmed by the first, favours
    neither side."""
    for r in range(rounds):
        yield r, list(labels) if r % 2 == 0 else list(reversed(labels))


@dataclass
class Runs:
    """What :func:`interleaved` measured: each tree's results, per group, in
    round order, and the 1-minute load average before each run."""

    trees: dict[str, Tree]
    results: dict[str, dict[str, list[dict[str, Any]]]]
    loads: list[float] = field(default_factory=list)
    failed: int = 0

    def load_range(self) -> str:
        return f"load {min(self.loads):.1f}-{max(self.loads):.1f}" if self.loads else "load -"


#: Builds a child's command line: (tree, group, a JSON file the child may write) -> argv.
Argv = Callable[[Tree, str, Path], list[str]]
#: Reads a child's results: (its finished process, that JSON file) -> results.
Read = Callable[[subprocess.CompletedProcess[str], Path], dict[str, Any]]


def interleaved(ref: str, rounds: int, argv: Argv, read: Read, *, groups: Sequence[str] = ("",),
                this: Tree | None = None,
                progress: Callable[[int, str, Tree, dict[str, Any]], None] | None = None) -> Runs:
    """The benchmark's child command (``argv``, run by the tree's interpreter
    with the tree first on PYTHONPATH) for this tree and commit ``ref``'s,
    ``rounds`` times each per group, turn about. A child that fails is
    reported in its results (``errors``) and counted, the others go on."""
    trees = {"this": this or this_tree(), "ref": baseline(ref)}
    compile_tree(trees["this"].root)  # as the commit's is (its cache has it compiled)
    runs = Runs(trees, {side: {g: [] for g in groups} for side in trees})
    with tempfile.TemporaryDirectory(prefix="awagainst-") as tmp:
        for r, order in alternate(list(trees), max(1, rounds)):
            for group in groups:
                for side in order:
                    tree = trees[side]
                    runs.loads.append(os.getloadavg()[0])
                    out = Path(tmp) / f"{side}-{group or 'all'}-{r}.json"
                    # run in the tree: a child's working directory comes first on its path
                    proc = run_child(argv(tree, group, out), tree)
                    try:
                        res = read(proc, out)
                        unread = ""
                    except (OSError, ValueError) as exc:
                        res, unread = {}, f"{exc}: "
                    if proc.returncode != 0 or unread:
                        runs.failed += 1
                        res.setdefault("errors", []).append(  # the child's stderr once
                            f"exit {proc.returncode}: {unread}{proc.stderr.strip()[-2000:]}")
                    res["load"] = runs.loads[-1]
                    runs.results[side][group].append(res)
                    if progress is not None:
                        progress(r, group, tree, res)
    return runs


#: How long an interrupted child is given for its own teardown (its agents,
#: tmux servers, database) before it and its group are killed.
TEARDOWN_S = 60.0


def run_child(argv: Sequence[str], tree: Tree) -> subprocess.CompletedProcess[str]:
    """One run of the benchmark: its command in the tree, in a session of its
    own. This process interrupted (Ctrl-C, or SIGTERM/SIGHUP, which main turns
    into :class:`benchlib.Interrupted`, as ``timeout`` sends) ends the child
    too: SIGTERM, so its teardown runs, then SIGKILL to its group. A
    ``subprocess.run`` left it running: a bench_store ended by ``timeout``
    went on starting ``agentwrap send`` callers at a load of 31."""
    # run in the tree: a child's working directory comes first on its path
    with subprocess.Popen(list(argv), env=tree.env(), cwd=tree.root, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate()
        except BaseException:
            end_child(proc)
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def end_child(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the child (its teardown), then SIGKILL to its whole group."""
    import signal

    with contextlib.suppress(OSError):
        proc.terminate()
    try:
        proc.communicate(timeout=TEARDOWN_S)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def ratio(a: float | None, b: float | None) -> float:
    """a / b; NaN when either is missing."""
    if a is None or b is None or a != a or b != b or b == 0:
        return float("nan")
    return a / b


def median(xs: Iterable[float | None]) -> float:
    got = [x for x in xs if x is not None and x == x]
    return statistics.median(got) if got else float("nan")


def print_ratios(title: str, this: str, ref: str, rows: list[tuple[str, list[float], list[float]]],
                 spec: str = ".1f") -> list[dict[str, Any]]:
    """One table of a same-run comparison: per figure, the median of this
    tree's runs and of REF's, the ratio of the medians (this / REF), and the
    paired ratio of each round (each run with the other tree's run next to
    it). Returns the rows for ``--json``."""
    print(f"\n{title}")
    hdr = f"{'':40} {this:>16} {ref:>16} {'ratio':>6}   paired ratios"
    print(hdr)
    print("-" * len(hdr))
    out = []
    for label, xs, ys in rows:
        a, b = median(xs), median(ys)
        paired = [ratio(x, y) for x, y in zip(xs, ys, strict=False)]
        cells = " ".join(fmt(r, ".2f") for r in paired) if len(paired) > 1 else ""
        print(f"{label:40} {fmt(a, spec):>16} {fmt(b, spec):>16} {fmt(ratio(a, b), '.2f'):>6}"
              f"   {cells}")
        out.append({"figure": label, "this": a, "ref": b, "ratio": ratio(a, b), "paired": paired,
                    "this_runs": xs, "ref_runs": ys})
    return out


# ---------------------------------------------------------------------------
# The one ``--against`` of every benchmark: :func:`add_arguments` and :func:`main`.
# A benchmark adds the two options and, given ``--against``, hands its own
# command line to :func:`main`, which runs that command (without the two
# options, with the benchmark's ``--json``) once per tree per round, turn
# about, and prints one ratio row per number the benchmark reported.

#: The option that names the commit, and the one that says how many runs per tree.
AGAINST, ROUNDS = "--against", "--against-rounds"
#: Keys whose numbers are settings or bookkeeping, not measurements (no ratio row).
NOT_FIGURES = frozenset({"pid", "pids", "load", "loads", "rounds", "runs", "round", "seed",
                         "returncode", "exit", "cpus", "rev", "version"})


def add_arguments(parser: Any, rounds_flag: str = ROUNDS, rounds: int = 3) -> None:
    """``--against COMMIT`` and its runs per tree (``--against-rounds``, or the
    benchmark's own flag when it has one of that name already)."""
    parser.add_argument(AGAINST, metavar="COMMIT", default="",
                        help="also run this benchmark on COMMIT's tree, turn about with this one,"
                             " and print the ratios (scripts/bench_against.py)")
    parser.add_argument(rounds_flag, type=int, default=rounds, dest="against_rounds",
                        help=f"with {AGAINST}: runs per tree (default {rounds})")


def strip_options(argv: Sequence[str], valued: Sequence[str]) -> list[str]:
    """``argv`` without each option in ``valued`` and its value (``--x V`` or ``--x=V``)."""
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a in valued:
            skip = True
        elif not any(a.startswith(v + "=") for v in valued):
            out.append(a)
    return out


@dataclass(frozen=True)
class Child:
    """How a benchmark is run as one tree's child: its script, its arguments
    (``--against`` gone) and how it hands its figures over: ``--json FILE``
    (``json_file``) or ``--json`` on stdout."""

    script: Path
    args: tuple[str, ...]
    json_file: bool

    @classmethod
    def of(cls, script: str | Path, argv: Sequence[str], json_file: bool,
           rounds_flag: str = ROUNDS) -> Child:
        drop = [AGAINST, rounds_flag] + (["--json"] if json_file else [])
        rest = strip_options(argv, drop)
        if not json_file:
            rest = [a for a in rest if a != "--json"]
        return cls(Path(script).resolve(), tuple(rest), json_file)

    def argv(self, tree: Tree, _group: str, out: Path) -> list[str]:
        return [tree.python, str(self.script), *self.args,
                *(["--json", str(out)] if self.json_file else ["--json"])]

    def read(self, proc: subprocess.CompletedProcess[str], out: Path) -> dict[str, Any]:
        import json

        got = json.loads(out.read_text(encoding="utf-8") if self.json_file else proc.stdout)
        return got if isinstance(got, dict) else {"results": got}


def _name(item: Any, i: int) -> str:
    """A list item's label: its name, agent, case or mode when it has one."""
    if isinstance(item, dict):
        for key in ("name", "agent", "case", "mode", "backend", "stream", "what", "label", "kind"):
            if isinstance(item.get(key), str):
                return item[key]
    return str(i)


def figures(result: Any, prefix: str = "") -> dict[str, float]:
    """Every number a benchmark reported, by its path (``messages.p50_ms``,
    ``results.claude.ready_ms``): lists of numbers (raw samples) and
    bookkeeping keys (:data:`NOT_FIGURES`) left out."""
    out: dict[str, float] = {}
    if isinstance(result, dict):
        for k, v in result.items():
            if str(k) in NOT_FIGURES or str(k) == "errors":
                continue
            out.update(figures(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(result, list) and any(isinstance(x, (dict, list)) for x in result):
        for i, v in enumerate(result):
            out.update(figures(v, f"{prefix}.{_name(v, i)}" if prefix else _name(v, i)))
    elif isinstance(result, (int, float)) and not isinstance(result, bool):
        out[prefix] = float(result)
    return out


def ratio_rows(this_runs: Sequence[dict[str, Any]], ref_runs: Sequence[dict[str, Any]],
               ) -> list[tuple[str, list[float], list[float]]]:
    """One row per figure either tree reported, in the order first seen; a
    figure equal in every run of both trees (a setting echoed back) has none."""
    mine = [figures(r) for r in this_runs]
    theirs = [figures(r) for r in ref_runs]
    names: dict[str, None] = {}
    for f in mine + theirs:
        names.update(dict.fromkeys(f))
    rows = []
    for n in names:
        xs = [f.get(n, float("nan")) for f in mine]
        ys = [f.get(n, float("nan")) for f in theirs]
        if len({x for x in xs + ys if x == x}) > 1:
            rows.append((n, xs, ys))
    return rows


def main(script: str | Path, args: Any, argv: Sequence[str] | None = None, *,
         json_file: bool, rounds_flag: str = ROUNDS, title: str = "") -> int:
    """``--against``: the benchmark (``script`` with ``argv``, default this
    process's) on this tree and on ``args.against``'s, ``args.against_rounds``
    runs each, turn about; the ratio table on stdout (on stderr when the
    benchmark's ``--json`` is stdout), and with ``--json`` every run and row."""
    import json
    import signal

    from benchlib import raise_interrupted

    for sig in (signal.SIGTERM, signal.SIGHUP):  # unwind, ending the running child (run_child)
        signal.signal(sig, raise_interrupted)
    child = Child.of(script, sys.argv[1:] if argv is None else argv, json_file, rounds_flag)
    want_json = getattr(args, "json", None)
    sink = sys.stderr if (want_json and not json_file) else sys.stdout

    def progress(r: int, _g: str, tree: Tree, res: dict[str, Any]) -> None:
        errs = res.get("errors") or []
        print(f"round {r + 1} {tree.label:22} load {res['load']:4.1f}:"
              f" {len(figures(res))} figures" + (f", {len(errs)} errors" if errs else ""),
              file=sink, flush=True)
        for e in errs[:5]:
            print(f"    ! {str(e)[:600]}", file=sink)

    with contextlib.redirect_stdout(sink):
        runs = interleaved(args.against, args.against_rounds, child.argv, child.read,
                           progress=progress)
        this, ref = runs.trees["this"], runs.trees["ref"]
        rows = ratio_rows(runs.results["this"][""], runs.results["ref"][""])
        name = title or Path(script).stem
        table = print_ratios(f"{name} {' '.join(child.args)}: {args.against_rounds} runs per tree"
                             f" (turn about), {runs.load_range()}, {os.cpu_count()} cpus",
                             this.label, ref.label, rows, ".2f")
    summary = {"against": args.against, "this": this.label, "ref": ref.label,
               "args": list(child.args), "loads": runs.loads, "figures": table,
               "runs": runs.results, "failed": runs.failed}
    if want_json:
        from benchlib import json_safe

        text = json.dumps(json_safe(summary), indent=1, default=str)
        if json_file:
            Path(want_json).write_text(text + "\n", encoding="utf-8")
        else:
            print(text)
    return 1 if runs.failed else 0
