"""The deny-list's project rule (issue 25): whatever an allow-everything rule says, a
command that deletes or moves anything outside the session's project (or the project
itself), overwrites a file that exists outside it, throws away uncommitted work in git,
or names a target that cannot be told, is left to the person.

Judged against a real throwaway layout: a HOME with a folder ``important``, a
sibling folder ``other``, and the project (a git repository) beside them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentwrap.answers.denylist import UNKNOWN_WORD, Where, destructive, split
from agentwrap.answers.hook_questions import from_payload, hook_decision
from agentwrap.answers.rules import BUILTIN, decide
from agentwrap.config import AnswerRule
from agentwrap.detect.question import Item, Option, Question

ALLOW_ALL = AnswerRule(name="allow-all", option=1)


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


@pytest.fixture
def where(tmp_path: Path) -> Where:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / "important").mkdir(parents=True)
    (home / "important" / "notes.txt").write_text("keep me")
    (home / "file").write_text("keep me")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "a.txt").write_text("keep me")
    (project / "build").mkdir(parents=True)
    (project / "build" / "out.o").write_text("ignored, not committed")
    (project / "a.txt").write_text("tracked")
    git(project, "init", "-q")
    git(project, "add", "a.txt")
    git(project, "commit", "-qm", "init")
    (project / ".gitignore").write_text("build/\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore")
    os.symlink(tmp_path / "other", project / "link")  # a folder outside, reached from inside
    git(project, "add", "link")
    git(project, "commit", "-qm", "link")
    return Where.of(project, home=str(home))


HELD = [
    # deletes outside the project, however it is spelled
    "rm -rf ~/important", "rm -r ../other", "rm -fr /tmp/x", "rm -f /tmp/x", "rm ~/file",
    "rm -rf ~/important/", "rm -rf $HOME/important", 'rm -rf "${HOME}/important"',
    "rm -rf ../other/*", "/bin/rm -rf ../other", "\\rm -rf ../other", "rm -rf -- ../other",
    "unlink ~/file", "shred -u ~/file", "rm -rf link/", "rm -rf link/a.txt",
    "rm -rf build/../../other", "rm -rf ./../other",
    # the project itself (and its history)
    "rm -rf .", "rm -rf ./", 'rm -rf "$PWD"', "rm -rf ${PWD}", "rm -rf *", "rm -rf ./*",
    "rm -rf ../project", "rm -rf .git", "find . -delete",
    # find and xargs
    "find ../other -delete", "find ~/important -name '*.txt' -delete",
    "find ../other -exec rm -f {} +", "ls ../other | xargs rm", "cat list | xargs rm -rf",
    "find ../other -name '*.o' | xargs rm", "echo x | xargs -I{} rm -rf ../other/{}",
    # moves, truncations, overwrites of what exists outside
    "mv ~/important /tmp/x", "mv ../other/a.txt .", "mv a.txt ../other/", "mv a.txt ~/file",
    "> ~/file", ": > ~/file", "echo x > ~/file", "echo x >| ~/file", "cmd &> ~/file",
    "cmd 2> ~/file", "truncate -s0 ~/file", "truncate -s 0 ~/file",
    "dd if=/dev/zero of=$HOME/file", "echo x | tee ~/file", "cp a.txt ~/file",
    "cp -r build ~/important/notes.txt", "cp a.txt -t ../other", "ln -sf a.txt ~/file",
    "install a.txt ~/file", "rsync -a build/ ../other", "echo x > link/a.txt",
    # compound commands, wrappers, scripts
    "cd ~ && rm -rf important", "cd ~; rm -rf important", "cd ..; rm -rf other",
    "cd; rm -rf important", "(cd .. && rm -rf other)", "cd build && rm -rf ../../other",
    "echo ok && rm -rf ~/important", "false || rm -rf ~/important", "ls | rm -rf ../other",
    "sudo rm -rf ~/important", "sudo -u root rm -rf /tmp/x", "env rm -rf ../other",
    "env -C .. rm -rf other", "nohup rm -rf ../other &", "timeout 5 rm -rf ../other",
    "bash -c 'rm -rf ~/important'", "sh -c \"cd ~ && rm -rf important\"",
    "eval 'rm -rf ../other'", "bash -lc 'mv ~/important /tmp/x'",
    "pushd .. && rm -rf other", "cd - && rm -rf x",
    # targets that cannot be told
    "rm -rf $X", 'rm -rf "$TARGET/"', "rm -rf ${DIR}", "rm -rf ~bob/x", 'rm -rf "$(pwd)"',
    "rm -rf `pwd`", "rm -rf $(echo build)", "rm -rf .*", "cd $X && rm -rf y",
    "cd */ && rm -rf x", "> $LOG", "cp a.txt $DEST",
]

ALLOWED = [
    "rm -rf build/", "rm -rf build", "rm -rf ./build", "rm -f a.txt", "rm a.txt",
    "rm -rf build/*", "rm -rf node_modules dist", "rm -f .git/index.lock", "rm link",
    "rm -rf 'build'", "rm -rf $PWD/build", "find . -name '*.pyc' -delete",
    "find build -delete", "find . -name '*.o' | xargs rm -f",
    "find . -name '*.o' -print0 | grep -z x | xargs -0 rm", "git ls-files -z | xargs -0 rm",
    "mv a.txt b.txt", "mv build out", "cp a.txt /tmp/agentwrap-new-file-xyz",
    "cp a.txt ~/important", "echo x > /tmp/agentwrap-new-file-xyz", "echo x >> ~/file",
    "tee -a ~/file", "cat ~/file", "cat < ~/file", "echo x > out.txt", "cmd > /dev/null 2>&1",
    "cmd 2>&1 | tee log.txt", "python x.py > /tmp/agentwrap-new-log-xyz 2>&1",
    "cp -n a.txt ~/file", "ln -s a.txt ~/file", "touch x", "ls -la ~",
    "cd build && rm -rf out", "cd build; rm -f x.o", "sudo rm -rf build",
    "bash -c 'rm -rf build'", "echo 'rm -rf ~/important'", "echo $((1+2)) > n.txt",
    "git status", "git checkout -b feature", "git checkout main", "git clean -n",
    "git reset --hard", "git clean -fd", "git checkout -- .", "git restore .",
    "npm test && echo ok",
]


@pytest.mark.parametrize("command", HELD)
def test_held_whatever_the_rules_say(where: Where, command: str) -> None:
    why = destructive(command, where=where)
    assert why, command
    d = decide(q(command), "claude", [ALLOW_ALL], where=where)
    assert d is not None and d.holds and d.rule == BUILTIN and d.vetoed == "allow-all", d
    assert Path(where.home, "important", "notes.txt").exists()  # only read, never run


@pytest.mark.parametrize("command", ALLOWED)
def test_the_rule_approves_work_inside_the_project(where: Where, command: str) -> None:
    assert destructive(command, where=where) is None, command
    d = decide(q(command), "claude", [ALLOW_ALL], where=where)
    assert d is not None and d.answer == {"option": 1}, d


def test_reasons_say_what_and_where(where: Where) -> None:
    home = where.home
    assert destructive("rm -rf ~/important", where=where) == (
        f"rm ~/important: outside the project ({home}/important)")
    assert destructive('rm -rf "$PWD"', where=where) == "rm $PWD: the project itself"
    assert destructive("rm -rf $X", where=where) == (
        "rm $X: a target that cannot be told before it runs")
    assert destructive("> ~/file", where=where) == (
        "> ~/file: a file that exists outside the project")


@pytest.mark.parametrize("command", ["git clean -fdx", "git clean -fd", "git reset --hard",
                                     "git checkout -- .", "git checkout .", "git checkout a.txt",
                                     "git restore .", "git restore --worktree a.txt",
                                     "git switch -f main", "git -C . reset --hard",
                                     "cd build && git reset --hard"])
def test_git_throws_away_work_only_while_there_is_some(where: Where, command: str) -> None:
    project = Path(where.project)
    dirty = "git clean -fdx" if command == "git clean -fdx" else None
    # clean worktree (git clean -x would still delete the ignored build/: held)
    assert (destructive(command, where=where) is None) == (dirty is None), command
    (project / "a.txt").write_text("changed, not committed")
    why = destructive(command, where=where)
    assert why and "uncommitted changes" in why, (command, why)
    git(project, "checkout", "--", "a.txt")
    (project / "new.txt").write_text("untracked")
    assert destructive(command, where=where), command
    # harmless ones stay allowed on a dirty tree
    for fine in ("git clean -n", "git restore --staged a.txt", "git checkout -b x",
                 "git status", "git stash"):
        assert destructive(fine, where=where) is None, fine


def test_git_outside_any_repository_is_held(where: Where, tmp_path: Path) -> None:
    why = destructive("git -C ../other reset --hard", where=where)
    assert why and "could not say" in why, why


def test_no_project_known_every_path_is_outside() -> None:
    for command in ("rm -rf build", "rm x", "find . -name '*.o' -delete"):
        assert destructive(command), command
    for command in ("touch x", "echo hi", "git status", "ls -la"):
        assert destructive(command) is None, command


def test_a_substitution_stands_as_an_unknown_word() -> None:
    argvs = [s.argv for s in split("rm -rf $(pwd)/x; echo `id` done")]
    assert ("pwd",) in argvs and ("id",) in argvs, argvs
    assert ("echo", UNKNOWN_WORD, "done") in argvs, argvs
    assert ("rm", "-rf", UNKNOWN_WORD, "/x") in argvs, argvs  # not a path that can be told


def q(command: str) -> Question:
    item = Item("Do you want to proceed?", options=(Option("Yes", number=1),
                                                    Option("No", number=2)))
    return Question(id="q1", kind="permission", title="Bash command", questions=(item,),
                    highlighted=1, tool="Bash", command=command, dialog="permission")


def test_the_hook_judges_from_the_agents_directory(
    where: Where, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A PermissionRequest hook takes the project from its payload's ``cwd``."""
    monkeypatch.setenv("HOME", where.home)

    def ask(command: str) -> str:
        hq = from_payload("claude", "PermissionRequest", {
            "tool_name": "Bash", "tool_input": {"command": command}, "cwd": where.project})
        assert hq is not None and hq.cwd == where.project
        behavior, _ = hook_decision(hq, "claude", [ALLOW_ALL])
        return behavior

    assert ask("rm -rf build") == "allow"
    assert ask("rm -rf ~/important") == ""  # left to the dialog
    assert ask("git status && mv ~/important /tmp/x") == ""
    codex = from_payload("codex", "PermissionRequest", {
        "tool_name": "Bash", "cwd": where.project,
        "tool_input": {"command": "rm -rf other", "workdir": ".."}})
    assert codex is not None and hook_decision(codex, "codex", [ALLOW_ALL])[0] == ""
