"""The readiness detector: screen (+ title, + structured state) -> state.

Signals are stacked, strongest first, and every verdict records which one
decided it, so ``agentwrap state --explain`` can say *why*:

1. process: the agent is gone -> ``exited``;
2. dialogs from the profile (permission prompts, trust questions) ->
   ``waiting_input``: nothing may be typed, whatever else says; a question the
   agent published itself (Codex's app-server) comes before the screen's, and
   while it is announced but not there yet the screen's is not read;
   Then overlays from the profile (pickers, menus, help drawn over or instead
   of the input box) -> ``unknown``: never ready, and nothing is asked;
3. the agent's own word, its hook's signal or the state it publishes (Claude
   Code's session file), whichever is newer, weighed against the screen by
   :data:`agentwrap.detect.precedence.TABLE` (issue 37): ``ready`` only with
   the input box on screen (a ready or draft rule matches: positive evidence
   that keys reach the box) and no busy rule matching on a moving screen (the
   session file still says "idle" for a frame after Enter, under the
   spinner), nor under a busy rule on a still screen till the screen agrees
   (rule ``hook:draw-due``, at most ``TURN_END_DUE_S``: Copilot CLI's
   agentStop comes before its footer stops saying "Working"), no longer
   once a prompt was typed and sent after the word; "it
   asks" only with a dialog on screen, ``busy`` (an expectation, rule
   ``hook:dialog-due`` / ``structured:dialog-due``) while the dialog is due
   (Claude says "waiting" ~0.5 s before drawing it), and without the input
   box an overlay is open (``unknown``, rule ``overlay``);
4. title rules, then region-scoped screen rules, in state priority order
   waiting_input > busy > draft > ready > starting;
5. a quiet window: ``ready`` is only believed once the screen has not changed
   for ``quiet_ms`` (Codex and Aider stream without any busy marker), and for
   profiles without usable rules, quiet alone means ready; an empty box
   whose text just went (a prompt submitted) is ``busy`` till the turn shows
   (a busy rule, the agent's word) or :data:`SUBMIT_DUE_S` passes;
6. nothing: a screen that matches no rule is ``busy`` while it changes (or
   ``starting`` before the agent was ever ready), but once it has been still
   for :data:`UNKNOWN_AFTER_MS` it is ``unknown`` - an agent that is truly
   busy shows a spinner or streams, so a still, unexplained screen is most
   likely a dialog the profile does not know, and calling it busy would keep
   a delivery waiting on it forever.

Draft is tracked separately from the state as well: an agent can be busy
*and* hold a person's queued text, and delivery must never overwrite it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..terminal.screen import Snapshot
from .precedence import DIALOG_DUE_S, TURN_END_DUE_S, Claim, Outcome, Seen, Source, resolve
from .profiles import Dialog, Profile, Rule
from .question import Question, parse_question
from .regions import ScreenRegions
from .states import Reading, Signal, State

UNKNOWN_AFTER_MS = 3000  # still, and no rule explains the screen

#: How long a prompt just submitted (the input box held text and is empty
#: now, no busy marker or word yet) keeps the agent ``busy``: its turn is
#: expected. Kimi Code 2.1.0 and Gemini CLI 0.61.0 show nothing of the turn
#: for 0.7-0.9 s after the first prompt's Enter (a new session made), and
#: the empty box read ``ready`` once still for quiet_ms: agentwrap's message
#: was typed into the starting turn (Qwen Code 0.15.10 took both as one
#: prompt). Bounded: a box emptied by hand is ready after this.
SUBMIT_DUE_S = 2.0
#: The same bound for an agent whose hooks are read: its prompt hook's word
#: ends the wait, and may come late (Kimi Code 2.1.0 drew its first turn
#: 3.5 s after Enter at a load of 30 on 2 cores, its UserPromptSubmit then).
SUBMIT_HOOK_DUE_S = 8.0

# Two readings of a word said within this of each other are the same word
# (a file's mtime against the wall clock, read twice).
_SAME_WORD_S = 0.1

# How long a dialog whose command has not been read may still be being drawn
# (Detector._drawn).
_DRAWING_S = 1.0

_STATE_ORDER = {
    State.WAITING_INPUT: 0,
    State.BUSY: 1,
    State.DRAFT: 2,
    State.READY: 3,
    State.STARTING: 4,
}


@dataclass(frozen=True)
class StructuredReading:
    """A state the agent published (a file it writes), ``age_s`` seconds ago
    (None: unknown), so it can be weighed against a hook's signal by time."""

    state: State  # READY, BUSY or WAITING_INPUT
    reason: str
    age_s: float | None = None
    # What the agent asks, as it published it (Codex's app-server: the approval
    # request's exact command): it wins over a dialog read off the screen.
    question: Question | None = None
    # The agent said it asks something and what it asks is on its way (Codex's
    # app-server: the request follows its status): the dialog on screen is not
    # read as the question meanwhile, so one question is never replaced by
    # another of different id for the same dialog.
    question_due: bool = False


@dataclass(frozen=True)
class HookReading:
    """A state the agent's own hook reported ``age_s`` seconds ago."""

    state: State  # READY, BUSY or WAITING_INPUT
    reason: str
    age_s: float
    # The agent signals just before it draws its input box (Aider's
    # notifications command runs, then the prompt is drawn): while the box is
    # not on screen yet, the screen decides (busy), not an overlay.
    box_follows: bool = False


class HookSource(Protocol):
    """The latest state signal of the agent's hooks, or None (none, or not this launch's)."""

    def read(self) -> HookReading | None: ...


#: A hook signal counts while the screen has not changed more than this after it
#: (the agent's own redraw that follows the event) ...
HOOK_GRACE_MS = 1500
#: ... and for at most this long: after that the screen alone decides again.
HOOK_FRESH_S = 30.0


class QuestionSource(Protocol):
    """Exact text for the question read off the screen, where the agent's own hook
    told it (:class:`agentwrap.answers.hook_questions.HookQuestions`): the screen
    still says a dialog is open and where the cursor is."""

    def refine(self, question: Question) -> Question: ...


class StructuredSource(Protocol):
    """An agent-published state (file, socket); None when unknown or stale."""

    def read(self) -> StructuredReading | None: ...

    def stamp(self) -> float | None:
        """When the agent last published (cheap: a stat), or None: the
        supervisor looks again when it changes, output or not."""
        ...


@dataclass(frozen=True)
class _Word:
    """The agent's latest word about itself, from its hook or its published state."""

    source: Source
    state: State
    reason: str
    age_s: float | None
    box_follows: bool = False  # a turn end said before its prompt is drawn (Aider's turn-end mark)


_CLAIMS = {State.READY: Claim.IDLE, State.BUSY: Claim.BUSY, State.WAITING_INPUT: Claim.ASKS}
_OUTCOMES = {Outcome.READY: State.READY, Outcome.BUSY: State.BUSY, Outcome.WAITING: State.WAITING_INPUT}


@dataclass(frozen=True)
class Match:
    rule: Rule
    line: str


def evaluate_rules(profile: Profile, snap: Snapshot, regions: ScreenRegions | None = None) -> list[Match]:
    """Every rule that matches, in decision order (title rules first)."""
    regions = regions if regions is not None else ScreenRegions(profile, snap)
    cache: dict[tuple[str, bool], list[str] | None] = {}
    hits: list[Match] = []
    ordered = sorted(
        enumerate(profile.rules),
        key=lambda ir: (ir[1].region != "title", _STATE_ORDER[ir[1].state], ir[0]),
    )
    for _, rule in ordered:
        key = (rule.region, rule.ignore_dim)
        if key not in cache:
            cache[key] = regions.get(rule.region, bright=rule.ignore_dim)
        body = cache[key]
        if body is None:
            continue
        text = "\n".join(body)
        m = rule.pattern.search(text)
        if m is None or (rule.unless is not None and rule.unless.search(text)):
            continue
        hits.append(Match(rule, _line_of(text, m.start())))
    return hits


def _line_of(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)].strip()


class Detector:
    """Turns a stream of snapshots into state readings for one agent."""

    def __init__(
        self,
        profile: Profile,
        structured: StructuredSource | None = None,
        clock: Callable[[], float] = time.monotonic,
        hooks: HookSource | None = None,
        questions: QuestionSource | None = None,
        start_pending: Callable[[], str | None] | None = None,
    ) -> None:
        self.profile = profile
        self.questions = questions
        # Why the agent's own start-up is not complete yet (its SessionStart
        # hook has not run: Gemini draws its prompt before it), or None: a
        # screen that looks ready is only ``starting`` till then, since what
        # is sent meanwhile would race the hook (issue 25).
        self.start_pending = start_pending
        self.structured = structured
        self.hooks = hooks
        self.clock = clock
        self._digest = ""
        self._last_change = clock()
        self._seen_ready = False
        self.reading = Reading(State.STARTING, Signal.PROCESS, "launch", "just launched", 0, clock())
        self.draft = False
        self.evidence = ""  # the screen line that decided the last verdict
        # What a waiting agent asks (read once per screen and dialog), else None.
        self.question: Question | None = None
        self._screen_question: Question | None = None  # as read off the screen
        self._question_key: tuple[str, str] = ("", "")
        self._dialog_at: float | None = None  # last time a dialog was on screen
        self._draft_at: float | None = None  # last time text was seen in the input box
        # When the box's text went and left it empty, with no sign of the turn
        # since (None: no prompt awaiting its turn): see SUBMIT_DUE_S
        self._submitted_at: float | None = None
        # When the turn end held back till the screen agrees was said (None: none)
        self._held_said: float | None = None
        # When the dialog on screen now was first seen (None: no dialog), so that
        # keys wait for a dialog's ``settle_ms`` (agentwrap.answers.keys)
        self.dialog_since: float | None = None
        self._dialog_name = ""
        # The profile can see its input box (a ready or draft rule): then a
        # ``ready`` from any signal needs the box on screen (profiles read by
        # quiet alone, generic REPLs, cannot tell).
        self._box_rules = any(r.state in (State.READY, State.DRAFT) for r in profile.rules)

    @property
    def state(self) -> State:
        return self.reading.state

    def note_output(self, at: float | None = None) -> None:
        """Output arrived (pty bytes, tmux pipe-pane): the screen is not quiet,
        even before the next snapshot shows it."""
        self._last_change = at if at is not None else self.clock()

    @property
    def last_change(self) -> float:
        """Monotonic time of the last screen change or output."""
        return self._last_change

    def quiet_ms(self, now: float | None = None) -> int:
        now = self.clock() if now is None else now
        return max(0, int((now - self._last_change) * 1000))

    def _drawn(self, dialog: Dialog, quiet: int, now: float) -> bool:
        """Whether the question read off ``dialog`` can be told: a dialog that
        shows the command it asks about (``subject``) but whose command was not
        read may still be being drawn. OpenCode draws "Permission required"
        and its tool line a frame before the ``$ command`` under a loaded
        machine, and the question told then (tool and command unknown) was
        replaced a frame later by one with another id, so an answer to the
        first was stale. Such a question waits until the screen has been quiet
        for the profile's ``quiet_ms`` (the supervisor looks again then) or
        the dialog has been up :data:`_DRAWING_S`; one that is really without
        a command (another tool's dialog) is told then, as read."""
        question = self.question
        if question is None or dialog.subject is None or question.command is not None:
            return True
        since = self.dialog_since if self.dialog_since is not None else now
        return quiet >= self.profile.quiet_ms or now - since >= _DRAWING_S

    def exited(self, exit_code: int | None) -> Reading:
        code = "unknown" if exit_code is None else str(exit_code)
        self.question, self.dialog_since = None, None
        return self._set(
            State.EXITED, Signal.PROCESS, "process", f"process exited with code {code}", None
        )

    def update(self, snap: Snapshot, now: float | None = None) -> Reading:
        now = self.clock() if now is None else now
        if snap.digest != self._digest:
            self._digest = snap.digest
            self._last_change = now
        quiet = self.quiet_ms(now)
        text = snap.text()

        published = self.structured.read() if self.structured is not None else None
        if published is not None and published.question is not None:
            return self._asked(published, quiet, now)
        if published is not None and published.question_due:
            self.draft, self._dialog_at = False, now
            self.question, self._question_key = None, ("", "")
            return self._set(State.WAITING_INPUT, Signal.STRUCTURED, "structured:question-due",
                             published.reason, None, quiet, now)
        regions = ScreenRegions(self.profile, snap)
        for dialog in self.profile.dialogs:
            lines = text if dialog.region == "screen" else "\n".join(regions.get(dialog.region) or [])
            m = dialog.pattern.search(lines)
            if m:
                self.draft = False
                self._dialog_at = now
                if self._dialog_name != dialog.name or self.dialog_since is None:
                    self._dialog_name, self.dialog_since = dialog.name, now
                if self._question_key != (snap.digest, dialog.name):
                    self._question_key = (snap.digest, dialog.name)
                    self._screen_question = parse_question(
                        text, dialog=dialog.name, kind=dialog.kind, subject=dialog.subject,
                        tool=dialog.tool, described=dialog.described)
                self.question = self._screen_question
                if self.question is not None and self.questions is not None:
                    self.question = self.questions.refine(self.question)
                if not self._drawn(dialog, quiet, now):
                    self.question = None
                return self._set(
                    State.WAITING_INPUT, Signal.SCREEN, f"dialog:{dialog.name}", dialog.message,
                    _line_of(lines, m.start()), quiet, now,
                )

        self.question, self._question_key = None, ("", "")
        self.dialog_since, self._dialog_name = None, ""
        for overlay in self.profile.overlays:
            lines = text if overlay.region == "screen" else "\n".join(regions.get(overlay.region) or [])
            m = overlay.pattern.search(lines)
            if m:
                self.draft = False
                return self._set(State.UNKNOWN, Signal.SCREEN, f"overlay:{overlay.name}",
                                 overlay.message, _line_of(lines, m.start()), quiet, now)
        matches = evaluate_rules(self.profile, snap, regions)
        draft_match = next((m for m in matches if m.rule.state is State.DRAFT), None)
        was_draft, self.draft = self.draft, draft_match is not None
        self._note_submit(was_draft, matches, published, quiet, now)
        # Positive evidence that the input box is on screen (a ready or draft rule
        # matched): the agent's own word that it is idle (a turn end, its session
        # file) says nothing about what is drawn over the box meanwhile.
        boxed = not self._box_rules or any(
            m.rule.state in (State.READY, State.DRAFT) for m in matches)

        word = self._word(quiet, published, now)
        decided = None if word is None else self._weigh(word, matches, draft_match, boxed, quiet, now)
        if draft_match is not None:
            self._draft_at = now
        if decided is not None:
            return decided

        for match in matches:
            rule = match.rule
            signal = Signal.TITLE if rule.region == "title" else Signal.SCREEN
            reason = rule.explain or f"rule {rule.name} matched"
            if rule.state is State.READY and self._submitted_at is not None:
                return self._set(
                    State.BUSY, Signal.SCREEN, f"{rule.name}:submitted",
                    f"{reason}, but the text it held went {now - self._submitted_at:.1f} s ago"
                    " with no sign of the turn yet: a prompt submitted, its turn expected"
                    " (nothing is typed till the agent shows it)", match.line, quiet, now,
                )
            if rule.state is State.READY and quiet < self.profile.quiet_ms:
                # Matched, but the screen is still moving: output may be streaming.
                held = State.BUSY if self._seen_ready else State.STARTING
                return self._set(
                    held, Signal.QUIET, rule.name,
                    f"{reason}, but the screen changed {quiet} ms ago "
                    f"(< {self.profile.quiet_ms} ms)", match.line, quiet, now,
                )
            return self._set(rule.state, signal, rule.name, reason, match.line, quiet, now)

        if self.profile.quiet_fallback:
            if quiet >= self.profile.quiet_ms:
                return self._set(
                    State.READY, Signal.QUIET, "quiet",
                    f"no rule matched; screen unchanged for {quiet} ms", None, quiet, now,
                )
            return self._set(
                State.BUSY if self._seen_ready else State.STARTING, Signal.QUIET, "quiet",
                "screen still changing", None, quiet, now,
            )
        if self._seen_ready and quiet >= max(UNKNOWN_AFTER_MS, 2 * self.profile.quiet_ms):
            return self._set(
                State.UNKNOWN, Signal.QUIET, "none",
                f"no rule matched and the screen has been still for {quiet} ms"
                " (a dialog the profile does not know?)", None, quiet, now,
            )
        held = State.BUSY if self._seen_ready else State.STARTING
        return self._set(held, Signal.SCREEN, "none", "no rule matched", None, quiet, now)

    def _note_submit(self, was_draft: bool, matches: list[Match],
                     published: StructuredReading | None, quiet: int, now: float) -> None:
        """Track a prompt submitted and its turn not begun (:data:`SUBMIT_DUE_S`):
        set when the box that held text is empty now (a ready rule, no draft, no
        busy rule); over once the turn shows (a busy rule, text again), the
        agent says anything after it (its prompt hook's busy, a turn end), or
        the bound passes."""
        states = {m.rule.state for m in matches}
        if was_draft and State.READY in states and not states & {State.DRAFT, State.BUSY}:
            self._submitted_at = now
            return
        at = self._submitted_at
        if at is None:
            return
        word = self._word(quiet, published, now)
        spoke = word is not None and word.age_s is not None and now - word.age_s > at
        if states & {State.BUSY, State.DRAFT} or spoke or now - at >= self.submit_due_s:
            self._submitted_at = None

    @property
    def submit_due_s(self) -> float:
        """How long a prompt submitted waits for its turn to show (:data:`SUBMIT_DUE_S`)."""
        return SUBMIT_DUE_S if self.hooks is None else SUBMIT_HOOK_DUE_S

    def _no_box(self, why: str, quiet: int, now: float) -> Reading:
        """The agent says it is idle (or waits), but the screen shows neither its
        input box nor a dialog: a picker, menu or full-screen view the profile
        does not know is open (Claude Code's rewind picker, Esc Esc). Unknown is
        not ready: ``unknown`` with rule ``overlay``, and delivery waits."""
        return self._set(
            State.UNKNOWN, Signal.SCREEN, "overlay",
            f"{why}: an overlay or picker is open (nothing is typed until it closes)",
            None, quiet, now)

    def _asked(self, published: StructuredReading, quiet: int, now: float) -> Reading:
        """The agent published what it asks (exact, no screen read): waiting on it,
        whatever its dialog on screen looks like meanwhile."""
        assert published.question is not None
        self.draft, self._dialog_at = False, now
        if self._dialog_name != published.question.id or self.dialog_since is None:
            self._dialog_name, self.dialog_since = published.question.id, now
        self.question, self._question_key = published.question, ("", "")
        return self._set(State.WAITING_INPUT, Signal.STRUCTURED, "structured:question",
                         published.reason, None, quiet, now)

    def _word(self, quiet: int, structured: StructuredReading | None, now: float) -> _Word | None:
        """The agent's latest word about itself: the hook's signal when it is
        fresh (younger than :data:`HOOK_FRESH_S`, and the screen has not changed
        more than :data:`HOOK_GRACE_MS` after it: a newer screen wins) and no
        state was published since, else the published state (Claude's session
        file, Codex's app-server status). Both are the agent's own word and the
        later one is true now: Claude Code writes its session file's ``idle``
        as its turn ends, before its Stop hook, which it starts only after its
        end-of-turn work, so the prompt's ``busy`` signal must not hold the
        turn's end back till then (issue 27). A file of unknown age never
        outweighs a fresh signal. A turn end held back till the screen agrees
        (``hook:draw-due``) still counts when the screen changes later than the
        grace: that change is the agreement awaited (Copilot CLI 1.0.102 idles
        its "Working" footer 2-3 s after agentStop at a load of 15), for the
        bound and the grace after it (then the screen's own rules agree too)."""
        got = self.hooks.read() if self.hooks is not None else None
        held = got is not None and self._held_said is not None \
            and abs(now - got.age_s - self._held_said) < _SAME_WORD_S \
            and got.age_s * 1000 <= TURN_END_DUE_S * 1000 + HOOK_GRACE_MS
        if got is not None and got.age_s <= HOOK_FRESH_S \
                and (got.age_s * 1000 <= quiet + HOOK_GRACE_MS or held) \
                and not (structured is not None and structured.age_s is not None
                         and structured.age_s < got.age_s):
            return _Word(Source.HOOK, got.state, got.reason, got.age_s, got.box_follows)
        if structured is not None:
            return _Word(Source.FILE, structured.state, structured.reason, structured.age_s)
        return None

    def _weigh(self, word: _Word, matches: list[Match], draft_match: Match | None, boxed: bool,
               quiet: int, now: float) -> Reading | None:
        """The agent's word against the screen, by :data:`~.precedence.TABLE`
        (None: the word says nothing now, the screen's rules decide). A dialog
        or overlay on screen was decided before this.

        A turn's end is the agent itself saying its turn is over, so it is
        ``ready`` at once, with no quiet window (that window is for readings
        from the screen alone, which cannot tell a pause from an end), unless
        the screen contradicts it: text in the input box (``draft``), or a busy
        rule that matches while the screen still moves (``quiet_ms``): the
        spinner of the prompt just sent while the session file still says
        ``idle`` (issue 37: it outranked the spinner for ~0.1 s after Enter, and a
        message queued then was typed into a busy agent), a spinner still
        turning, or the turn end drawn before the agent redraws. A busy rule on
        a still screen is the turn's end said before it is drawn (Copilot
        CLI's agentStop, ~0.7 s early): ``busy`` (rule ``hook:draw-due``) for
        up to :data:`~.precedence.TURN_END_DUE_S`; after that it is a leftover
        line the redraw has not cleared: the word wins. Text seen in the box after the word, and gone now, was a
        prompt submitted (or cleared): that turn's end no longer says anything
        (Gemini's prompt start sends no signal of its own). The agent saying it
        asks is an expectation until its dialog is drawn (Claude Code 2.1.332
        says so ~0.5 s before): ``busy``, with nothing typed, for up to
        :data:`~.precedence.DIALOG_DUE_S`."""
        claim = _CLAIMS.get(word.state)
        if claim is None:
            return None
        if claim is Claim.IDLE and word.box_follows and not boxed:
            return None  # the prompt is drawn next (Aider's turn end): till then the screen decides
        said = None if word.age_s is None else now - word.age_s
        busy = next((m for m in matches if m.rule.state is State.BUSY), None)
        seen = set()
        if draft_match is not None:
            seen.add(Seen.DRAFT)
        if busy is not None and quiet < self.profile.quiet_ms:
            seen.add(Seen.SPINNING)
        if busy is not None and word.age_s is not None and word.age_s < TURN_END_DUE_S:
            seen.add(Seen.DRAWING)
        if said is not None and self._draft_at is not None and said <= self._draft_at:
            seen.add(Seen.SUBMITTED)
        if said is not None and self._dialog_at is not None and said <= self._dialog_at:
            seen.add(Seen.ANSWERED)
        if not boxed:
            seen.add(Seen.NO_BOX)
        if word.age_s is not None and word.age_s < DIALOG_DUE_S:
            seen.add(Seen.DUE)
        row = resolve(word.source, claim, frozenset(seen))
        signal, rule = (Signal.HOOK, "hook") if word.source is Source.HOOK \
            else (Signal.STRUCTURED, "structured")
        reason = word.reason
        if row.outcome is Outcome.SCREEN:
            return None
        if row.outcome is Outcome.OVERLAY:
            if claim is Claim.ASKS:
                return self._no_box(f"{reason}, but no dialog the profile knows is on screen",
                                    quiet, now)
            return self._no_box(f"{reason}, but the input box is not on screen", quiet, now)
        if row.outcome is Outcome.DRAFT:
            assert draft_match is not None
            return self._set(State.DRAFT, signal, rule,
                             f"{reason}; {draft_match.rule.explain or 'text in the input box'}",
                             None, quiet, now)
        if row.seen is Seen.SPINNING:
            assert busy is not None
            return self._set(State.BUSY if self._seen_ready else State.STARTING, signal, rule,
                             f"{reason}; but {busy.rule.explain or 'rule ' + busy.rule.name} and the"
                             f" screen changed {quiet} ms ago (< {self.profile.quiet_ms} ms)",
                             busy.line, quiet, now)
        if row.seen is Seen.DRAWING:
            assert busy is not None
            if said is not None:
                self._held_said = said
            return self._set(State.BUSY, signal, f"{rule}:draw-due",
                             f"{reason}; but {busy.rule.explain or 'rule ' + busy.rule.name}:"
                             f" the screen does not agree yet (expected: nothing is typed till it"
                             f" does, or {TURN_END_DUE_S:.0f} s pass)", busy.line, quiet, now)
        if row.seen is Seen.DUE:
            return self._set(State.BUSY, signal, f"{rule}:dialog-due",
                             f"{reason}; its dialog is not drawn yet (expected: nothing is typed"
                             f" till it is)", None, quiet, now)
        return self._set(_OUTCOMES[row.outcome], signal, rule, reason, None, quiet, now)

    def _set(
        self,
        state: State,
        signal: Signal,
        rule: str,
        reason: str,
        evidence: str | None,
        quiet: int = 0,
        now: float | None = None,
    ) -> Reading:
        now = self.clock() if now is None else now
        if state is State.READY and not self._seen_ready and self.start_pending is not None:
            pending = self.start_pending()
            if pending is not None:
                state, reason = State.STARTING, f"{reason}, but {pending}"
        if state in (State.READY, State.DRAFT):
            self._seen_ready = True
        self.evidence = evidence or ""
        self.reading = Reading(state, signal, rule, reason, quiet, now)
        return self.reading
