"""Sessions: supervised agents, from start to stop.

Here live starting, adopting, attaching to and stopping a session for both
backends (``lifecycle``), the supervisor loop that runs one agent (events ->
snapshot -> detector -> registry: ``supervisor``), the parts it gives turns to
(delivery, answers, telling ...: ``parts``), built in one place (``compose``), the
registry of sessions and their state transitions (``registry``) and the
wake-up socket that lets a sender reach a supervisor within milliseconds
(``wake``). This layer wires the ones below together: it may import
``delivery``, ``detect``, ``queue``, ``terminal`` and the foundation; only
``surfaces`` (and the application service) import it.
"""
