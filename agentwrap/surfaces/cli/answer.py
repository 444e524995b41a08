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
from ...queue.answers import APPLIED, PENDING, STALE
from .common import _emit_json, _service, err, out

EXIT_TIMEOUT = 124

HELP = "answer the question a waiting agent shows (an option, text, or deny)"
DESCRIPTION = (
    "Answer the question the session's agent is waiting on (`agentwrap state NAME`\n"
    "shows it, with its options and id). The answer is typed with the agent's own\n"
    "keys, only while that same question is open, and the dialog closing is checked\n"
    "on screen. Give exactly one of --option, --options, --text, --deny."
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
                      help="several options of a multi-select question (not supported yet)")
    what.add_argument("--text", help="free text, where the question takes it (one plain line)")
    what.add_argument("--deny", action="store_true", help="dismiss the dialog (Esc, or the"
                      " profile's deny keys: Aider 'n')")
    p.add_argument("--question", metavar="ID", help="answer only if this question is still open")
    p.add_argument("--no-wait", action="store_true", help="return once the answer is stored")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="how long to wait for the outcome (default 30 s)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_answer)


def _options(value: str) -> list[int]:
    try:
        return [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise InvalidAnswer(f"--options takes numbers separated by commas, not {value!r}",
                            hint="e.g. --options 1,3") from None


def cmd_answer(args: argparse.Namespace) -> int:
    with _service() as svc:
        result = svc.answer(
            args.name, option=args.option,
            options=_options(args.options) if args.options is not None else None,
            text=args.text, deny=args.deny, question_id=args.question, source="cli",
        )
        a = result.answer
        if not result.supervised:
            err.print(f"[yellow]warning:[/] {escape(args.name)}'s supervisor is not running;"
                      f" the answer waits until `agentwrap adopt {escape(args.name)}`")
        if not args.no_wait:
            a = svc.wait_answer(a.id, args.timeout)
        if args.json:
            _emit_json({**a.to_json(), "question": result.question.to_json()})
        elif a.status == PENDING:
            err.print(escape(f"answer {a.id} to question {a.question_id} stored; pending"))
            out.print(a.id)
        else:
            out.print(escape(f"{a.status}: {a.detail}"))
        if a.status == PENDING:
            return 0 if args.no_wait else EXIT_TIMEOUT
        if a.status == APPLIED:
            return 0
        if not args.json:  # the reason was printed; say what to do
            cls = StaleAnswer if a.status == STALE else AnswerFailed
            err.print(f"hint: {escape(cls.default_hint)}")
        return StaleAnswer.exit_code if a.status == STALE else AnswerFailed.exit_code
