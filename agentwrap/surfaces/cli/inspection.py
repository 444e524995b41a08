"""Commands that look inside: ``state``, ``doctor``, ``profiles``.

``state`` shows the detector's last verdict with its signal, rule and
evidence (``--explain``), follows the supervisor's transition log
(``--watch``, woken by the event bus) or prints the screen the verdict was
based on (``--screen``); all through :class:`~agentwrap.service.Service`.
``doctor`` checks tmux, the relay, config, profiles, agent CLIs (their
versions against the ones the profiles were verified on), sessions and the
store, and says how to fix each problem; ``profiles`` lists the profiles.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from typing import Any

from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ... import __version__
from ...config import RunConfig
from ...errors import AgentwrapError
from ...message import QueueLimits
from ...paths import private_problems
from ...service import Service, SessionRecord, Transition
from .common import emit_json, fmt_age, open_service, out, render_rows, user_paths
from .sessions import liveness_label


def _explain(rec: SessionRecord) -> str:
    text = f"{rec.state} ({rec.profile}: {rec.state_reason}; quiet {rec.quiet_ms} ms)"
    if rec.liveness == "stale":
        text += " [stale: the supervisor is gone, this may be out of date]"
    return text


def _host(rec: SessionRecord) -> str:
    """The host the session runs on, and a silent one's ``unreachable since ...``
    ('' for a session recorded before hosts were)."""
    if not rec.host or rec.host_liveness != "unreachable":
        return rec.host
    return f"{rec.host} ({liveness_label(rec)})"


def _native(rec: SessionRecord) -> str | None:
    """What ``state`` says of the session's native channel (Codex's app-server):
    on, or why its launch fell back; None for an agent without one."""
    from ...sessions.native import native_channel

    channel = native_channel(rec.profile)
    return channel.describe(rec.options) if channel is not None else None


def _state_json(rec: SessionRecord) -> dict[str, Any]:
    return {
        "name": rec.name, "host": rec.host, "host_liveness": rec.host_liveness,
        "unreachable_since": None if rec.seen is None else rec.seen.unreachable_since,
        "state": rec.state.value, "signal": rec.state_signal, "rule": rec.state_rule,
        "reason": rec.state_reason, "evidence": rec.state_evidence, "quiet_ms": rec.quiet_ms,
        "draft": rec.draft, "since": rec.state_since, "liveness": rec.liveness,
        "exit_code": rec.exit_code, "explain": _explain(rec), "question": rec.question,
        # a JSON file dropped here answers the question (agentwrap.answers.folder);
        # another host's session is answered on its host (None here)
        "answer_dir": str(user_paths().answers_dir(rec.name)) if rec.seen is None else None,
        "channels": rec.options.to_json().get("channels"),
        # set for an agent that runs tools without asking by default (OpenCode)
        "permission_gate": rec.options.permission_gate,
        # Codex on a private app-server (issue 24): on, or why it fell back
        "app_server": _native(rec),
    }


def _print_question(q: dict[str, Any], name: str) -> None:
    """The question a waiting agent asks, as the person would read it on its screen,
    and the commands that answer it, for this session (``name``: what to type, not a
    placeholder). Everything in it was drawn by the agent: escaped, never markup."""
    what = f" {q['tool']}" + (f": {q['command']}" if q.get("command") else "") if q.get("tool") \
        else (f" {q['command']}" if q.get("command") else "")
    out.print(f"  [bold]{escape(q['kind'])}[/]{escape(what)}")
    if q.get("cwd"):  # told by the agent (Codex's app-server): where the command runs
        out.print(f"  [dim]in:[/] {escape(q['cwd'])}")
    if q.get("description"):  # the agent's own words for the call: not what runs
        out.print(f"  [dim]described as:[/] {escape(q['description'])}")
    if q.get("command_unsure"):
        out.print(f"  [dim]command read off the screen, not for sure: {escape(q['command_unsure'])};"
                  " no rule approves it[/]")
    tabs = q.get("tabs") or []
    if tabs:  # several questions, one tab at a time: --answer names them
        out.print(f"  [dim]questions:[/] {escape(', '.join(f'{i}. {t}' for i, t in enumerate(tabs, 1)))}")
    for item in q.get("questions", ()):
        header = f"[{item['header']}] " if item.get("header") else ""
        several = " (several: --options)" if item.get("multiSelect") else ""
        out.print(f"  {escape(header + item['question'] + several)}")
        for o in item.get("options", ()):
            mark = "❯" if o.get("number") is not None and o.get("number") == q.get("highlighted") \
                else " "
            num = f"{o['number']}." if o.get("number") is not None else f"({o.get('key')})"
            box = "" if o.get("checked") is None else ("[x] " if o["checked"] else "[ ] ")
            desc = f"  [dim]{escape(o['description'])}[/]" if o.get("description") else ""
            out.print(f"   {mark} {escape(num)} {escape(box + o['label'])}{desc}")
    how = "--answer QUESTION=CHOICE for each" if tabs else "--option N"
    out.print(f"  [dim]question {escape(q['id'])}; answer: `agentwrap answer {escape(name)} {how}`"
              f" (or in the terminal: `agentwrap attach {escape(name)}`)"
              f"{'; free text allowed' if q.get('free_text_allowed') else ''}[/]")


def cmd_state(args: argparse.Namespace) -> int:
    with open_service(limits=QueueLimits()) as svc:  # reads only: no config needed
        return _state(svc, args)


def _state(svc: Service, args: argparse.Namespace) -> int:
    args.name = svc.session_name(args.name)  # HOST/NAME (a bare name: this host's when it has one)
    rec = svc.state(args.name)
    if args.screen:
        sys.stdout.write(svc.screen(args.name))
        return 0
    if not args.watch:
        if args.json:
            emit_json(_state_json(rec))
        elif args.explain:
            out.print(escape(_explain(rec)))
            if rec.host:
                out.print(escape(f"  host:       {_host(rec)}"))
            out.print(escape(f"  decided by: {rec.state_signal} ({rec.state_rule})"))
            if rec.state_evidence:
                out.print(escape(f"  evidence:   {rec.state_evidence}"))
            out.print(f"  since:      {fmt_age(rec.state_since)}; supervisor {rec.liveness}")
            from ...sessions.channels import describe

            out.print(escape(f"  channels:   {describe(rec.options)}"))
            if rec.options.permission_gate:
                out.print(escape(f"  permission gate: {rec.options.permission_gate}"))
            native = _native(rec)
            if native:
                out.print(escape(f"  app-server: {native}"))
            if rec.options.describe_timeout():  # the rest from the config's [answers]
                out.print(escape(f"  on timeout: {rec.options.describe_timeout()}"))
            if rec.question:
                _print_question(rec.question, args.name)
        else:
            out.print(escape(rec.state.value))
            if rec.question:
                _print_question(rec.question, args.name)
        return 0
    return _watch_state(svc, args)


def _transition_json(name: str, profile: str, t: Transition) -> dict[str, Any]:
    return {
        "name": name, "state": t.state, "signal": t.signal, "rule": t.rule, "reason": t.reason,
        "evidence": t.evidence, "quiet_ms": t.quiet_ms, "draft": t.draft, "since": t.at,
        "explain": f"{t.state} ({profile}: {t.reason}; quiet {t.quiet_ms} ms)",
    }


#: How often the watcher's first look is taken again when the state changed during it.
_START_TRIES = 20


def _watch_start(svc: Service, name: str) -> tuple[SessionRecord, int]:
    """The session's state and the last transition it follows, as of one moment.

    Read apart, a change recorded between the two (the session turning
    ``ready`` just as the watcher started) was neither the first line nor
    followed: the watcher never showed it. The registry records a state and
    its transition in one transaction, so the log's last id, the same before
    and after the state was read, is that state's. Should the state keep
    changing, the id read before it is taken: a change is then shown twice,
    never missed."""

    def last_id() -> int:
        seen = svc.transitions(name)
        return seen[-1].id if seen else 0

    before = last_id()
    for _ in range(_START_TRIES):
        rec = svc.state(name)
        after = last_id()
        if after == before:
            return rec, after
        before = after
    return svc.state(name), before


def _watch_state(svc: Service, args: argparse.Namespace) -> int:
    """Every state change, in order, until the session ends (or Ctrl-C).

    Follows the supervisor's transition log, not the current state, so a
    state that lasted less than a wake-up is still shown. Sleeps on the event
    bus (a state change announces itself) with a slow re-check for a lost
    announcement, never a fast poll.
    """
    rec, last_id = _watch_start(svc, args.name)
    recent: list[dict[str, Any]] = [_state_json(rec)]
    plain = args.json or not sys.stdout.isatty()

    def emit(data: dict[str, Any]) -> None:
        if args.json:
            sys.stdout.write(json.dumps(data) + "\n")
        else:
            stamp = time.strftime("%H:%M:%S", time.localtime(data["since"]))
            sys.stdout.write(f"{stamp} {data['explain']}\n")
        sys.stdout.flush()

    def follow() -> bool:
        """Emit new transitions; True once the session has ended."""
        nonlocal last_id
        for t in svc.transitions(args.name, last_id):
            last_id = t.id
            data = _transition_json(args.name, rec.profile, t)
            recent.append(data)
            del recent[:-8]
            if plain:
                emit(data)
            if t.state == "exited":
                return True
        return svc.state(args.name).ended is not None

    sub = svc.subscribe()  # before the first look: nothing between the two is missed
    try:
        if plain:
            emit(recent[0])
            while not follow():
                sub.wait(svc.recheck_s)
            return 0
        with Live(console=out, refresh_per_second=10) as live:
            while True:
                done = follow()
                table = Table(box=None, header_style="bold", title=Text(args.name, style="bold"))
                for col in ("TIME", "STATE", "WHY"):
                    table.add_column(col)
                for d in recent:
                    table.add_row(
                        time.strftime("%H:%M:%S", time.localtime(d["since"])),
                        Text(d["state"]), Text(d["reason"]),
                    )
                live.update(table)
                if done:
                    return 0
                sub.wait(svc.recheck_s)
    except KeyboardInterrupt:
        return 0
    finally:
        sub.close()


def _doctor_notify(urls: tuple[str, ...], events: tuple[str, ...],
                   problems: list[dict[str, Any]]) -> dict[str, Any]:
    """``[notify] urls`` as ``doctor`` shows them: the scheme only (a URL holds its
    service's token or password), and whether Apprise knows each."""
    from ...delivery.push import check_urls

    if not urls:
        return {"urls": [], "events": list(events)}
    try:
        checked = check_urls(urls)
    except ImportError:
        problems.append({"problem": "[notify] urls are set but Apprise is not installed",
                         "fix": "pip install apprise (a dependency of agentwrap)"})
        return {"urls": [], "events": list(events)}
    for i, c in enumerate(checked):
        if not c["known"]:
            problems.append({"problem": f"notify.urls[{i}] ({c['url']}) is not a URL Apprise"
                             " knows", "fix": "see the notifications docs for the URL schemes"})
    return {"urls": checked, "events": list(events)}


def _version_of(cmd: str, arg: str = "--version") -> str | None:
    """The first line of what ``cmd arg`` prints when it names a version, else
    None: a program that does not take the flag (dash: "Illegal option --")
    prints an error, not a version."""
    from ...sessions.channels import parse_version

    try:
        done = subprocess.run([cmd, arg], capture_output=True, text=True, timeout=20,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0 or not lines or not parse_version(lines[0]):
        return None
    return lines[0].strip()


def version_verdict(name: str, shown: str | None, prof: Any) -> tuple[str, str, str]:
    """How the installed version (``shown``: what ``--version`` printed) stands to
    the one the profile was verified on: ``(status, message, fix)`` with status
    ``verified`` (the same), ``newer`` / ``older`` (a warning: the profile reads
    screens, dialogs and hooks of the verified release, a new one may draw them
    otherwise), ``too_old`` (older than ``[channels] min_version``: an error,
    agentwrap registers no native channels for it), or ``unknown`` (no version
    to compare); message and fix are empty when there is nothing to say."""
    from ...sessions.channels import parse_version, version_at_least

    verified, floor = prof.verified_version, prof.channels.min_version
    have = parse_version(shown or "")
    if have is None or not (verified or floor):
        return "unknown", "", ""
    version = ".".join(str(n) for n in have)
    pins = f"{verified}, the version agentwrap was verified on (scripts/install_agents.sh" \
        " installs it)" if verified else "a newer release"
    if floor and not version_at_least(version, floor):
        return ("too_old", f"{name} {version} is older than {floor}, the oldest version"
                " agentwrap's native channels (hooks, MCP) for it work with: none are registered",
                f"update {name} to {pins}")
    if not verified:
        return "unknown", "", ""
    want = parse_version(verified) or ()
    width = max(len(have), len(want))
    have, want = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
    if have == want:
        return "verified", "", ""
    status = "newer" if have > want else "older"
    return (status, f"{name} {version} is installed, {status} than {verified} which agentwrap's"
            f" {name} profile was verified on: its screens, dialogs or hooks may differ"
            " (agentwrap state --explain shows what was read)",
            f"if a session misreads it, install {name} {verified} (scripts/install_agents.sh)")


def _channels_of(prof: Any, exe: str, paths: Any) -> dict[str, Any]:
    """What `agentwrap run` would register for this agent now (nothing written)."""
    import os

    from ...config import load_config
    from ...sessions.channels import plan

    try:
        run = load_config(paths).for_profile(prof.name).run
        got = plan(prof, run, paths, "doctor", [exe], dict(os.environ), dry_run=True)
    except AgentwrapError as exc:
        return {"channels": [], "channel_notes": [exc.message]}
    return got.options()


def cmd_doctor(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...detect.profiles import load_all_profiles
    from ...sessions.native import native_channel
    from ...terminal.relay_helper import helper_status
    from ...terminal.tmux import tmux_version

    paths = user_paths()
    # before anything opens the store: ensure() would repair the modes it finds
    problems: list[dict[str, str]] = [
        {"problem": problem, "fix": fix} for problem, fix in private_problems(paths)
    ]
    report: dict[str, Any] = {"agentwrap": __version__, "python": sys.version.split()[0]}
    if shutil.which("tmux"):
        report["tmux"] = tmux_version()
    else:
        report["tmux"] = None
        problems.append({"problem": "tmux is not installed",
                         "fix": "apt-get install -y tmux (or use --backend pty)"})
    helper, why = helper_status()
    report["pty_relay"] = "native" if helper else "python"
    report["pty_relay_detail"] = why
    if helper is None:
        problems.append({"problem": f"the pty backend's native relay is {why}; it relays in "
                         "Python, which is slower on fast output",
                         "fix": "apt-get install -y gcc, then reinstall agentwrap"})
    report["paths"] = {
        "config": str(paths.config_file), "project_config": ".agentwrap.toml",
        "user_profiles": str(paths.user_patterns_dir), "state": str(paths.state_dir),
        "database": str(paths.db_path), "runtime": str(paths.runtime_dir),
        "tmux_sockets": str(paths.tmux_dir), "audit_log": str(paths.audit_log),
        "answer_dirs": str(paths.answers_root / "NAME"),
    }
    ask_first = False  # [run] ask_first, for the agents without a permission gate
    run_cfg = RunConfig()
    try:
        cfg = load_config(paths)
        report["config_files"] = [str(p) for p in cfg.sources]
        ask_first = cfg.run.ask_first
        run_cfg = cfg.run
        report["notify"] = _doctor_notify(cfg.notify.urls, cfg.notify.events, problems)
    except AgentwrapError as exc:
        problems.append({"problem": exc.message, "fix": exc.hint})
    agents: dict[str, Any] = {}
    warnings: list[dict[str, str]] = []  # worth knowing, not a problem: the exit status stays 0
    try:
        profiles = load_all_profiles(paths)
    except AgentwrapError as exc:
        problems.append({"problem": exc.message, "fix": exc.hint})
        profiles = {}
    for name, prof in sorted(profiles.items()):
        if name == "generic":
            continue
        exe = next((shutil.which(c) for c in prof.commands if shutil.which(c)), None)
        agents[name] = {"path": exe,
                        "version": _version_of(exe, prof.channels.version_arg) if exe else None,
                        "verified_version": prof.verified_version or None,
                        "profile": str(prof.source)}
        if exe:
            status, message, fix = version_verdict(name, agents[name]["version"], prof)
            agents[name]["version_status"] = status
            if status == "too_old":
                problems.append({"problem": message, "fix": fix})
            elif message:
                warnings.append({"warning": message, "fix": fix})
        if exe and prof.channels.any:
            agents[name]["channels"] = _channels_of(prof, exe, paths)
        if exe and not prof.permissions.asks_by_default:
            agents[name]["permission_gate"] = _gate_of(prof, ask_first)
        native = native_channel(name)
        if exe and native is not None:  # issue 24: its TUI on a private app-server
            agents[name]["app_server"] = native.doctor(run_cfg, exe)
    report["agents"] = agents
    if not any(a["path"] for a in agents.values()):
        problems.append({"problem": "no agent CLI found on PATH",
                         "fix": "install one, e.g. npm install -g @anthropic-ai/claude-code"})
    try:
        # default limits: the doctor reads, and reports a config error above
        with open_service(paths, limits=QueueLimits()) as svc:
            report["store"] = svc.store_where  # never the password
            views = svc.sessions()
            stale = [v.record.name for v in views if v.record.liveness == "stale"]
            # who supervises this host's running tmux sessions: one host pid, or a pid
            # each (another host's pids are that host's processes, not ours to list)
            running = [v.record for v in views if v.record.seen is None
                       and v.record.liveness == "running" and v.record.backend == "tmux"]
            report["supervisors"] = {
                str(pid): sorted(r.name for r in running if r.supervisor_pid == pid)
                for pid in sorted({r.supervisor_pid for r in running if r.supervisor_pid})
            }
            for name in stale:
                problems.append({"problem": f"session {name!r} has no running supervisor",
                                 "fix": f"agentwrap adopt {name}   (or agentwrap stop {name})"})
            try:
                svc.check_store()
                report["store_connected"] = True
            except AgentwrapError as exc:
                problems.append({"problem": exc.message, "fix": exc.hint})
            try:
                svc.check_host_name()
            except AgentwrapError as exc:
                problems.append({"problem": exc.message, "fix": exc.hint})
    except AgentwrapError as exc:
        if not any(p["problem"] == exc.message for p in problems):
            problems.append({"problem": exc.message, "fix": exc.hint})
    report.setdefault("store_connected", False)  # opened and checked, or not
    report["problems"] = problems
    report["warnings"] = warnings
    if args.json:
        emit_json(report)
        return 1 if problems else 0
    out.print(escape(f"agentwrap {__version__}  python {report['python']}  "
                     f"{report['tmux'] or 'tmux MISSING'}  pty relay: {report['pty_relay']}"))
    table = Table(title="agents", box=None, header_style="bold")
    for col in ("AGENT", "FOUND", "VERSION", "VERIFIED ON"):
        table.add_column(col)
    for name, a in agents.items():
        found = Text(a["path"]) if a["path"] else Text("not found", style="red")
        style = {"newer": "yellow", "older": "yellow", "too_old": "red"}.get(
            a.get("version_status", ""), "")
        table.add_row(Text(name), found, Text(a["version"] or "-", style=style),
                      Text(a["verified_version"] or "-"))
    out.print(table)
    for name, a in agents.items():
        if a.get("channels"):
            from ...session_options import SessionOptions
            from ...sessions.channels import describe

            out.print(escape(f"  {name} channels:"
                             f" {describe(SessionOptions.from_json(a['channels']))}"))
    for name, a in agents.items():
        if a.get("permission_gate"):
            out.print(escape(f"  {name} permission gate: {a['permission_gate']}"))
        if a.get("app_server"):
            out.print(escape(f"  {name} app-server: {a['app_server']}"))
    for key, value in report["paths"].items():
        out.print(escape(f"  {key:15} {value}"))
    connected = "connected" if report["store_connected"] else "NOT connected: see the problem below"
    out.print(escape(f"  {'store':15} {report.get('store') or 'not opened'} ({connected})"))
    for pid, names in report.get("supervisors", {}).items():
        out.print(escape(f"  supervisor     pid {pid} on this host: {len(names)} session(s)"
                         f" ({', '.join(names)})"))
    for w in warnings:
        out.print(f"[yellow]warning:[/] {escape(w['warning'])}\n  [green]fix:[/] {escape(w['fix'])}")
    if problems:
        for p in problems:
            out.print(f"[red]problem:[/] {escape(p['problem'])}\n  [green]fix:[/] {escape(p['fix'])}")
        return 1
    if warnings:  # "no problems found" under a warning reads as if the warning did not count
        out.print(f"[yellow]no problems, {len(warnings)} warning(s) above[/]")
    else:
        out.print("[green]no problems found")
    return 0


def _gate_of(prof: Any, ask_first: bool) -> str:
    """What a new session of ``prof`` (an agent that runs tools without asking by
    default) gets: its ask-first mode, or no permission gate."""
    import os

    env = prof.permissions.ask_first_env
    if env and (ask_first or env in os.environ):
        return f"asks first ({env} set{' by [run] ask_first' if env not in os.environ else ''})"
    if prof.permissions.ask_first_args and ask_first:
        return f"asks first ({' '.join(prof.permissions.ask_first_args)} added by [run] ask_first)"
    return ("none: runs every tool without asking unless its own config says to ask;"
            " [run] ask_first = true starts it in its ask-first mode")


def cmd_profiles(args: argparse.Namespace) -> int:
    from ...detect.profiles import load_all_profiles

    profiles = load_all_profiles(user_paths())
    rows: list[dict[str, Any]] = [
        {"name": p.name, "commands": list(p.commands), "instruction_file": p.instruction_file,
         "source": str(p.source), "rules": len(p.rules), "dialogs": len(p.dialogs)}
        for p in profiles.values()
    ]
    if args.json:
        emit_json(rows)
        return 0
    render_rows(
        out, ("NAME", "COMMANDS", "INSTRUCTION FILE", "RULES", "SOURCE"),
        [[r["name"], ", ".join(r["commands"]), r["instruction_file"] or "-", str(r["rules"]),
          r["source"]] for r in rows],
    )
    return 0
