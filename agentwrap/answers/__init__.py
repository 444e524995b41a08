"""Answers to the questions an agent asks: the whole feature in one place.

An agent asks (a permission dialog on its screen, a question told by a hook);
somebody answers: a person (``agentwrap answer``, HTTP, the page, a file in the
answer folder) or a rule of the person's policy. Every answer passes the same
checks (:mod:`.intake`), becomes a typed action (:mod:`.actions`), is stored
(:mod:`.store`), and the session's supervisor
types it with the agent's own keys (:mod:`.keys`) only while the same question
is open, or replies to the hook that asked (:mod:`.hook_questions`). The rules
(:mod:`.rules`) never approve what the deny-list (:mod:`.denylist`) calls
destructive; :mod:`.auto` is where a rule's decision has effects, and
:mod:`.telling` tells the person what waits for them.

This layer sits between ``sessions`` (which wires it into a supervisor) and
``delivery``; reading the question off a screen stays in
:mod:`agentwrap.detect.question`. Importing the package is free: a hook
imports :mod:`.hook_questions` alone, within its start-up budget.
"""
