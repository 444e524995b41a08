#!/usr/bin/env python3
"""A scripted stand-in agent for fast tests of backends and delivery.

It behaves like the real TUIs where it matters to agentwrap: raw mode,
bracketed paste, a prompt box between two rules, Enter submits and C-j makes a
newline, a spinner and "esc to interrupt" while busy, optional permission
dialogs, ACK replies. Like them it redraws the whole screen at the new size on
SIGWINCH (a person's client attaching at another size resizes the pane: a
screen drawn for the old width wraps and no rule matches it any more), asks
for focus reports and reads every escape sequence the terminal sends (focus
in/out, arrows, replies to queries) as one input event, never as typed text.
Every submitted message is appended to ``--log`` as a JSON line, so tests can
assert what arrived, and how many times.

Never the only proof: the e2e suite drives the real CLIs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import sys
import termios
import time
import tty

ACK_RE = re.compile(r'Reply "ACK ([0-9a-f]+)"')

# The dialogs it can show: (lines above the options, options, footer). The
# cursor starts on option 1; Up/Down move it, Enter picks it, a digit picks that
# option, Esc cancels. "yn" is a one-line prompt like Aider's: a letter, then Enter.
DIALOGS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "permission": ([" Bash command", "   touch x", " Do you want to proceed?"],
                   ["Yes", "No"], [" Esc to cancel"]),
    "choice": ([" ☐ Database", " Which database should it use?"],
               ["SQLite", "Postgres", "Type something."],
               [" Enter to select · ↑/↓ to navigate · Esc to cancel"]),
    "yn": ([], [], ["Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: "]),
}

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
# A CSI (ESC [ params intermediates final) or SS3 (ESC O x) sequence: keys,
# focus events and replies to queries all come in one of these shapes.
ESC_SEQ = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|O[ -~])")
ESC_PREFIX = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*|O)?\Z")


def terminal_size(fd: int) -> tuple[int, int]:
    """The pty's size itself: $COLUMNS/$LINES (which shutil prefers) say
    nothing about a pane that has been resized since."""
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return 80, 24
    return size.columns or 80, size.lines or 24


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--busy", type=float, default=0.3, help="seconds busy per message")
    ap.add_argument("--startup", type=float, default=0.2)
    ap.add_argument("--never-ack", action="store_true")
    ap.add_argument("--ack-on", default="",
                    help="a message containing this is acknowledged even with --never-ack")
    ap.add_argument("--read-on", default="",
                    help="before replying to a message containing this, read --read-file and"
                    " log what it held to LOG.reads (as an agent opens its instruction file)")
    ap.add_argument("--read-file", default="")
    ap.add_argument("--dialog-on", default="", help="a message containing this opens a dialog")
    ap.add_argument("--dialog-style", default="permission", choices=sorted(DIALOGS),
                    help="which dialog opens: a numbered permission (Up/Down/Enter, digits,"
                    " Esc), a numbered choice with a free-text option, or an Aider-like y/n line")
    ap.add_argument("--dialog-command", default="touch x",
                    help="the command the permission and y/n dialogs ask about")
    ap.add_argument("--answers-log", default="",
                    help="each answer to a dialog as a JSON line (default: LOG.answers)")
    ap.add_argument("--die-on", default="", help="a message containing this kills the agent")
    ap.add_argument("--ignore-enter", type=int, default=0, help="ignore the first N Enters")
    ap.add_argument("--exit-code", type=int, default=0)
    ap.add_argument("--esc-interrupts", action="store_true",
                    help="Esc while busy interrupts the turn (no reply; 'Interrupted by user')")
    ap.add_argument("--spin", type=float, default=0.0,
                    help="redraw the whole screen every N s while busy, like a TUI's spinner")
    args = ap.parse_args()

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    out = sys.stdout
    transcript: list[str] = []
    box = ""
    busy_until = 0.0
    dialog = False
    cursor = 0  # the option the dialog's cursor is on (0-based)
    typing: str | None = None  # the free-text option was picked: its text so far
    yn_key = ""  # the y/n prompt: the letter typed, before Enter
    answers_log = args.answers_log or args.log + ".answers"
    above, options, footer = DIALOGS[args.dialog_style]
    above = [line.replace("touch x", args.dialog_command) for line in above]

    def answered(choice: str, **record: object) -> None:
        nonlocal dialog, typing, yn_key
        dialog, typing, yn_key = False, None, ""
        transcript.append(f"  ⎿ (dialog answered) {choice}")
        with open(answers_log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t": time.time(), "choice": choice, **record}) + "\n")
    pending_reply: str | None = None
    read_next = False  # read --read-file before the pending reply (--read-on)
    ignore = args.ignore_enter
    frame = 0

    def draw() -> None:
        cols, rows = terminal_size(sys.stdout.fileno())
        lines = []
        for t in transcript:
            lines.extend(t.split("\n"))
        busy = time.monotonic() < busy_until
        spinner = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"[frame % 10]
        if dialog and args.dialog_style == "yn":
            tail = ["─" * cols, f"   {args.dialog_command}", footer[0] + yn_key]
        elif dialog and typing is not None:
            tail = ["─" * cols, *above, f" {len(options)}. {options[-1]}: {typing}▏",
                    " Enter to submit · Esc to go back"]
        elif dialog:
            tail = ["─" * cols, *above,
                    *(f" {'❯' if i == cursor else ' '} {i + 1}. {label}"
                      for i, label in enumerate(options)), *footer]
        else:
            box_lines = ("❯ " + box).split("\n")
            working = f"{spinner} Working… ({frame})" if args.spin else "· Working…"
            tail = ([working] if busy else [""]) + ["─" * cols] + box_lines + ["─" * cols]
            tail.append("  esc to interrupt" if busy else "  ? for shortcuts")
        room = rows - len(tail)
        body = lines[-room:] if room > 0 else []
        screen = body + [""] * (room - len(body)) + tail
        out.write("\x1b[H\x1b[2J" + "\r\n".join(x[:cols] for x in screen[:rows]))
        out.flush()

    # SIGWINCH wakes the select below through this pipe (a handler alone would
    # not: select is restarted after it runs)
    winch_r, winch_w = os.pipe()
    os.set_blocking(winch_w, False)
    signal.set_wakeup_fd(winch_w)
    signal.signal(signal.SIGWINCH, lambda *_: None)
    # bracketed paste and focus reports, like Claude Code; and, like most
    # TUIs, ask the terminal what it is (DA1): the reply comes back as input
    # and must never be taken for typing
    out.write("\x1b[?2004h\x1b[?1004h\x1b[c")
    time.sleep(args.startup)
    draw()
    buf = b""
    in_paste = False
    try:
        while True:
            now = time.monotonic()
            if pending_reply is not None and now >= busy_until:
                if read_next:
                    read_next = False
                    try:
                        with open(args.read_file, encoding="utf-8") as f:
                            held: str | None = f.read()
                    except FileNotFoundError:
                        held = None
                    with open(args.log + ".reads", "a", encoding="utf-8") as f:
                        f.write(json.dumps({"t": time.time(), "read": held}) + "\n")
                transcript.append("● " + pending_reply)
                pending_reply = None
                draw()
            timeout = max(0.0, busy_until - now) if pending_reply is not None else 0.5
            spinning = args.spin > 0 and now < busy_until
            if spinning:
                timeout = min(timeout, args.spin)
            r, _, _ = select.select([fd, winch_r], [], [], timeout)
            if winch_r in r:
                os.read(winch_r, 512)
                draw()  # the whole screen again, at the new size
            if fd not in r:
                if spinning:
                    frame += 1
                    draw()
                continue
            data = os.read(fd, 65536)
            if not data:
                break
            buf += data
            while buf:
                if in_paste:
                    end = buf.find(PASTE_END)
                    if end < 0:
                        # keep a possibly split end marker for the next read
                        keep = next((k for k in range(len(PASTE_END) - 1, 0, -1)
                                     if PASTE_END.startswith(buf[-k:])), 0)
                        box += buf[: len(buf) - keep].decode("utf-8", "replace")
                        buf = buf[len(buf) - keep :]
                        break
                    box += buf[:end].decode("utf-8", "replace")
                    buf = buf[end + len(PASTE_END) :]
                    in_paste = False
                    continue
                ch = b""
                if buf.startswith(b"\x1b"):
                    seq = ESC_SEQ.match(buf)
                    if seq is None and ESC_PREFIX.match(buf) and buf != b"\x1b":
                        break  # the rest of the sequence is in the next read
                    if seq is not None:
                        buf = buf[seq.end() :]
                        in_paste = seq.group() == PASTE_START
                        if dialog and typing is None and options:
                            if seq.group() == b"\x1b[A":
                                cursor = max(0, cursor - 1)
                            elif seq.group() == b"\x1b[B":
                                cursor = min(len(options) - 1, cursor + 1)
                        continue  # focus in/out, other keys, query replies: not text
                ch, buf = buf[:1], buf[1:]
                if dialog:
                    if ch == b"\x1b":
                        if typing is not None:
                            typing = None  # back to the options
                        else:
                            answered("cancelled", cancelled=True)
                    elif args.dialog_style == "yn":
                        if ch == b"\r":
                            key = yn_key or "y"
                            answered(f"chose {key}", key=key)
                        elif ch in (b"\x7f", b"\x08"):
                            yn_key = ""
                        elif ch.isalpha():
                            yn_key = ch.decode().lower()
                    elif typing is not None:
                        if ch == b"\r":
                            answered(f"chose {len(options)}. {options[-1]}: {typing}",
                                     option=len(options), text=typing)
                        elif ch == b"\x7f":
                            typing = typing[:-1]
                        elif ch >= b" ":
                            need = {0xC0: 1, 0xE0: 2, 0xF0: 3}.get(
                                ch[0] & 0xF0 if ch[0] < 0xF0 else 0xF0, 0)
                            if ch[0] >= 0xC0 and len(buf) >= need:
                                ch, buf = ch + buf[:need], buf[need:]
                            typing += ch.decode("utf-8", "replace")
                    else:
                        picked = None
                        if ch == b"\r":
                            picked = cursor
                        elif ch.isdigit() and 1 <= int(ch) <= len(options):
                            picked = int(ch) - 1
                        if picked is not None and args.dialog_style == "choice" \
                                and picked == len(options) - 1:
                            cursor, typing = picked, ""  # the free-text option: type it
                        elif picked is not None:
                            answered(f"chose {picked + 1}. {options[picked]}", option=picked + 1,
                                     label=options[picked])
                    continue
                if ch == b"\x04" and not box:
                    return args.exit_code
                if ch == b"\x03":
                    box = ""
                elif ch == b"\r":
                    if ignore > 0:
                        ignore -= 1
                        continue
                    if not box.strip():
                        continue
                    msg = box
                    box = ""
                    with open(args.log, "a", encoding="utf-8") as f:
                        f.write(json.dumps({"t": time.time(), "text": msg}) + "\n")
                    transcript.append("❯ " + msg.replace("\n", "\n  "))
                    if args.die_on and args.die_on in msg:
                        os._exit(9)
                    if args.dialog_on and args.dialog_on in msg:
                        dialog, cursor, typing, yn_key = True, 0, None, ""
                    busy_until = time.monotonic() + args.busy
                    m = ACK_RE.findall(msg)
                    acks = not args.never_ack or bool(args.ack_on and args.ack_on in msg)
                    pending_reply = f"ACK {m[-1]}" if m and acks else "OK, noted."
                    read_next = bool(args.read_on and args.read_on in msg)
                elif ch == b"\n":
                    box += "\n"
                elif ch == b"\x7f":
                    box = box[:-1]
                elif ch == b"\x1b":
                    if args.esc_interrupts and pending_reply is not None:  # as Claude's Esc
                        pending_reply, busy_until = None, 0.0
                        transcript.append("⎿ Interrupted by user")
                else:
                    # collect a whole UTF-8 character
                    need = {0xC0: 1, 0xE0: 2, 0xF0: 3}.get(ch[0] & 0xF0 if ch[0] < 0xF0 else 0xF0, 0)
                    if ch[0] >= 0xC0 and len(buf) >= need:
                        ch, buf = ch + buf[:need], buf[need:]
                    box += ch.decode("utf-8", "replace")
            draw()
    finally:
        out.write("\x1b[?1004l\x1b[?2004l")
        out.flush()
        termios.tcsetattr(fd, termios.TCSAFLUSH, saved)
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
