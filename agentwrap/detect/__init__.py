"""Detection: what state an agent is in, read from its screen.

Here live the agent profiles (``profiles``: the TOML files that say how to
recognise, read and type into one agent CLI, including its ``[syntax]``
table), the agent-syntax rules that table declares and the defusing of them
(``neutralise``, kept here because ``profiles`` parses and checks them), the
anchored screen regions (``regions``), the detector and its verdicts
(``detector``, ``states``) and the agents' own structured state files
(``structured``). The built-in profiles ship inside the wheel as
``detect/_patterns``. Imports point down only: to ``agentwrap.terminal``
(snapshots, process trees) and the foundation; never to ``queue`` (the two
are independent), ``delivery``, ``sessions`` or ``surfaces``.
"""
