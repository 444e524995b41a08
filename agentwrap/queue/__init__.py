"""The queue: the durable store of messages and their attempts.

Here live the storage interface (``store``: ``MessageStore``), its SQLite
implementation (``sqlite``: the connection, its lock and transactions, each
operation's work in the module for its job: ``schema`` the tables,
``admission`` the limits that need the stored rows (rate, pending,
idempotency) with what the counts allow in ``rules``, ``transitions`` the
delivery side's status changes, ``reads`` and ``metrics``, ``writes`` a
transaction and its events), the stateless checks every message passes before it is
stored (``validate``: size, TTL, metadata, ids, reserved sources and
priorities), text sanitizing (``sanitize``) and the one place SQLite
connections are opened and their errors translated (``db``, which the session
registry uses too). The message types themselves (``agentwrap.message``) stay
at the top level, in the foundation: the configuration's ``[limits]`` section
is ``QueueLimits``, and ``config`` is imported by every layer, the terminal
included. Imports point down only: to the foundation (``message``, ``config``,
``paths``, ``errors``); never to ``detect`` (the two are independent),
``terminal``, ``delivery``, ``sessions`` or ``surfaces``.
"""
