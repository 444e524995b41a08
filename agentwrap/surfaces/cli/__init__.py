"""The ``agentwrap`` command (``app``: the parser, every sub-command and
:func:`app.main`, the console script's and ``python -m agentwrap``'s entry).
It imports the layers below and the foundation, nothing imports it but
``agentwrap.__main__``.
"""
