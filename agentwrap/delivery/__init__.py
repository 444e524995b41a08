"""Delivery: queued messages into the agent's input, provably.

Here live the delivery engine (``engine``: window, batch, verified submit, ACK,
retry), the framing of a batch as one marked, quoted block (``framing``) and
the last resort, the marked section of the agent's instruction file and the
notifications about it (``fallback``). Imports point down: to ``detect``
(profiles, regions, states), ``queue`` (the store), ``terminal`` (snapshots)
and the foundation; never to ``sessions`` or ``surfaces``. The engine is
driven by a supervisor it is handed; that type is named only for the type
checker (see the import-linter contract in ``pyproject.toml``).
"""
