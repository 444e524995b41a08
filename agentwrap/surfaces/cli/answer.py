"""``agentwrap answer``: answer the question a waiting agent shows, from anywhere.

An adapter over :meth:`Service.answer <agentwrap.service.Service.answer>`
(every check is there) and :meth:`Service.wait_answer`: the answer is stored,
the supervisor types it with the agent's own keys while the same question is
still open, and this command waits for the outcome (unless ``--no-wait``).
"""

from __future__ import annotations

import argparse

from rich.markup import escape

from ...errors import AnswerFailed, InvalidAnswer, StaleAnswer
from .common import emit_json, err, hint_line, open_service, out

EXIT_TIMEOUT = 124

HELP = "answer the question a waiting agent shows (options, several questions, text, deny)"
DESCRIPTION = (
    "Answer the question the session's agent is waiting on (`agentwrap state NAME`\n"
    "shows it, with its options and id). The answer is typed with the agent's own\n"
    "keys, only while that same question is open, and the dialog closing is checked\n"
    "on screen. Give exactly one of --option, --options, --answer (repeated), --text,\n"
    "--deny.\n"
    "\n"
    "Several questions in one dialog (Claude Code's AskUserQuestion shows them as\n"
    "tabs; `state` lists them: `questions: 1. Database, 2. Features`) are answered\n"
    "together, one --answer QUESTION=CHOICE per question: QUESTION is the header or\n"
    "its number (1 = first tab), CHOICE an option's number or label, or for a\n"
    "multi-select question several separated by commas (exactly those end up\n"
    "ticked). Every question needs one. agentwrap first looks at every tab, so a\n"
    "label no tab has fails before anything is picked, then answers each and\n"
    "submits the review."
)
EPILOG = """\
exit status:
  0    applied: the keys were typed and the dialog closed
  1    failed: typed, but the dialog did not close (evidence in the message)
  3    no such session, or it has ended
  4    the session is not waiting for an answer (no open question)
  5    stale: the agent asks something else now (nothing was typed)
  65   invalid: no such option, text the question does not take, hostile text
  124  --timeout passed with the answer still pending (is the supervisor running?)

examples:
  agentwrap state api                          # the question, its options and id
  agentwrap answer api --option 2
  agentwrap answer api --option "Yes, and don't ask again"   # a label, or a unique prefix
  agentwrap answer api --option yes --question 3f2a9c0d1e4b  # only if still that question
  agentwrap answer api --options 1,3           # a multi-select question: tick 1 and 3
  agentwrap answer api --options Search,Metrics
  agentwrap answer api --answer Database=SQLite --answer Features=1,3
  agentwrap answer api --answer 1=2 --answer 2=Search,Metrics   # questions by number
  agentwrap answer api --deny                  # Esc (the profile's deny keys)
  agentwrap answer api --text "use SQLite" --json"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("answer", help=HELP, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--option", metavar="N|LABEL",
                      help="the option's number as shown, or its label (exact, or a unique prefix)")
    what.add_argument("--options", metavar="N,M",
                      help="a multi-select question: the options to tick (numbers or labels,"
                      " comma-separated); the others end up unticked. Then the dialog goes on"
                      " to its next question, or, for a question alone, its review is"
                      " submitted")
    what.add_argument("--answer", metavar="QUESTION=CHOICE", action="append", dest="answers",
                      help="a dialog of several questions: one per question (header or number ="
                      " option, or options comma-separated for a multi-select one); repeat")
    what.add_argument("--text", help="free text, where the question takes it (one plain line)")
    what.add_argument("--deny", action="store_true", help="dismiss the dialog (Esc, or the"
                      " profile's deny keys: Aider 'n')")
    p.add_argument("--question", metavar="ID", help="answer only if this question is still open")
    p.add_argument("--no-wait", action="store_true", help="return once the answer is stored")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="how long to wait for the outcome (default 30 s)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_answer)


def _options(value: str) -> list[int | str]:
    """``1,3`` or ``Search,Metrics``: numbers stay numbers, labels stay text."""
    got: list[int | str] = [int(x) if x.strip().isdigit() else x.strip()
                            for x in value.split(",") if x.strip()]
    if not got:
        raise InvalidAnswer(f"--options takes numbers or labels separated by commas, not"
                            f" {value!r}", hint="e.g. --options 1,3")
    return got


def _answers(values: list[str]) -> dict[str, list[int | str]]:
    """``--answer Database=SQLite --answer Features=1,3`` as {question: [choices]}."""
    found: dict[str, list[int | str]] = {}
    for value in values:
        question, eq, choice = value.partition("=")
        if not eq or not question.strip() or not choice.strip():
            raise InvalidAnswer(f"--answer takes QUESTION=CHOICE, not {value!r}",
                                hint="e.g. --answer Database=SQLite --answer Features=1,3")
        if question.strip() in found:
            raise InvalidAnswer(f"question {question.strip()!r} is answered twice")
        found[question.strip()] = _options(choice)
    return found


def cmd_answer(args: argparse.Namespace) -> int:
    from ...answers.actions import AnswerStatus

    with open_service() as svc:
        result = svc.answer(
            args.name, option=args.option,
            options=_options(args.options) if args.options is not None else None,
            answers=_answers(args.answers) if args.answers is not None else None, text=args.text, deny=args.deny, question_id=args.question, source="cli",
        )
        a = result.answer
        if not result.supervised:
            err.print(f"[yellow]warning:[/] {escape(args.name)}'s supervisor is not running;"
                      f" the answer waits until `agentwrap adopt {escape(args.name)}`")
        if not args.no_wait:
            a = svc.wait_answer(a.id, args.timeout)
        if args.json:
            emit_json({**a.to_json(), "question": result.question.to_json()})
        elif a.status is AnswerStatus.PENDING:
            err.print(escape(f"answer {a.id} to question {a.question_id} stored; pending"))
            out.print(a.id)
        else:
            out.print(escape(f"{a.status}: {a.detail}"))
        if a.status is AnswerStatus.PENDING:
            return 0 if args.no_wait else EXIT_TIMEOUT
        if a.status is AnswerStatus.APPLIED:
            return 0
        if not args.json:  # the reason was printed; say what to do
            cls = StaleAnswer if a.status is AnswerStatus.STALE else AnswerFailed
            err.print(f"hint: {escape(hint_line(cls, cls.default_hint, args.name))}")
        return StaleAnswer.exit_code if a.status is AnswerStatus.STALE else AnswerFailed.exit_code
