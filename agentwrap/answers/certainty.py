"""Whether a question's command was read with certainty: only then may a rule approve it.

An answer rule judges the text it is given; the deny-list
(:mod:`agentwrap.answers.denylist`) too. Both are only as good as that text. A
screen is drawn for a person, not for a parser: Claude Code 2.1.332 draws a
line ``Tip: auto mode handles these prompts for you ...`` where 2.1.197 drew the
command, and a subject pattern that took the first line under ``Bash command``
read the tip as the command. An allow-everything rule then approved
``rm -rf ~/important`` (issue 35): the deny-list had judged the tip.

So a rule approves only a command read with certainty: the agent's own exact
text (its hook's request, Codex's app-server request), or the screen's when
nothing disagrees. :func:`doubt` says why not, for any question:

* the reader itself was unsure (``Question.command_unsure``: the command wraps
  or is partly hidden in its box, the box the dialog draws it in was not found,
  or the agent's own request for this dialog says something else: see
  :meth:`agentwrap.answers.hook_questions.HookQuestions.refine`);
* a permission for a tool that runs commands, with no command read at all;
* a command read off the screen that does not look like the kind of request the
  dialog is (:func:`misfit`): a URL for a fetch, a path for a file, a command
  line for a shell; prose (a tip, a description, a sentence) is none of them.

:func:`candidates` is every text a dialog showed for the call (the command and
the line it described it with): the deny-list judges each one, so a text the
reader took for a description is still looked at.
"""

from __future__ import annotations

import re
import shlex

from ..detect.question import Question

#: Where a question's command is the agent's own exact text, not a reading of the screen.
EXACT_SOURCES = frozenset({"hook", "app-server"})

#: Tool families, by the names the dialogs and hooks give (patterns/*.toml, the
#: hooks' tool names): what a command of each looks like.
_FETCH_TOOL = re.compile(r"fetch|web|url|browse", re.IGNORECASE)
_FILE_TOOL = re.compile(r"read|edit|creat|write|file|editor|patch|notebook|add_file",
                        re.IGNORECASE)
#: Tools that run a command (Claude Bash, Codex's shell/exec, Gemini
#: run_shell_command): a permission for one whose command was not read is
#: never approved by a rule, since the deny-list could not look at it.
_COMMAND_TOOL = re.compile(r"bash|shell|exec|command|terminal|run", re.IGNORECASE)

_URL = re.compile(r"https?://[^\s\"'<>]+")
#: A file dialog names its file, alone or in a line about it ("Writing to hello.txt",
#: "notes.md: first line => second line", "Read(/etc/hostname)"): a word that is a
#: path (it has a dot or a slash) must be there.
_PATH = re.compile(r"(?:^|[\s(])[~.]?[\w.+~-]*[./][\w.+~/-]*\w")
#: A program name as the first word of a command line (or an assignment, a
#: subshell, a negation): a word with a colon, a dash of prose, a quote mark
#: of typography is a sentence, not a program.
_PROGRAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*|[(!{].*|[\w.+~/$\[\\-][\w.+~/$@%,=\[\]{}\\-]*")
#: Typography no command line of an agent's is made of, and every sentence may be.
_PROSE = re.compile(r"[\u2014\u2013\u201c\u201d\u2018\u2019]|^(?:Tip|Note|Hint|Warning):",
                    re.IGNORECASE)


def runs_commands(tool: str | None) -> bool:
    """Whether a permission for ``tool`` may run a command (an unknown tool may)."""
    return tool is None or _COMMAND_TOOL.search(tool) is not None


def family(tool: str | None) -> str:
    """``fetch``, ``file`` or ``shell`` (every other tool: the strictest shape)."""
    if tool and _FETCH_TOOL.search(tool):
        return "fetch"
    if tool and _FILE_TOOL.search(tool) and not _COMMAND_TOOL.search(tool):
        return "file"
    return "shell"


def misfit(tool: str | None, command: str) -> str:
    """Why ``command`` does not look like a request of ``tool``'s kind ("" when it does)."""
    text = command.strip()
    kind = family(tool)
    if _PROSE.search(text):
        return f"the text read as the command looks like prose, not a {_KIND[kind]}"
    if kind == "fetch":
        return "" if _URL.fullmatch(text) else "the text read as the URL is not a URL"
    if kind == "file":
        return "" if _PATH.search(text) else "the text read as the file names no path"
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    if not words or not _PROGRAM.fullmatch(words[0]):
        return "the text read as the command does not start with a program"
    return ""


_KIND = {"fetch": "URL", "file": "path", "shell": "command line"}


def doubt(question: Question) -> str:
    """Why no rule may approve ``question`` on its command ("" when it was read
    with certainty, or none was read for a question that needs none)."""
    if question.command_unsure:
        return question.command_unsure
    if not question.command:
        if question.kind == "permission" and runs_commands(question.tool):
            return "the command it would run could not be read"
        return ""
    if question.source in EXACT_SOURCES:
        return ""
    why = misfit(question.tool, question.command)
    return f"{why}: {_shown(question.command)}" if why else ""


def candidates(question: Question) -> tuple[str, ...]:
    """Every text the dialog showed for the call: the command, and the line it was
    described with (which a reader may have taken wrongly for either)."""
    return tuple(t for t in (question.command, question.description) if t and t.strip())


def _shown(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return repr(one if len(one) <= limit else one[:limit - 1] + "…")


__all__ = ["EXACT_SOURCES", "candidates", "doubt", "family", "misfit", "runs_commands"]
