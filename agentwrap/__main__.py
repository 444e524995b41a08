"""``python -m agentwrap``: the same as the ``agentwrap`` command.

``hook`` is dispatched before the CLI is imported: an agent runs it at every
tool call and waits for it, so it loads only what a hook uses (see
:mod:`agentwrap.surfaces.hooks`).
"""

import sys

if sys.argv[1:2] == ["hook"]:
    from .surfaces.hooks import main as hook_main

    sys.exit(hook_main(sys.argv[2:]))

from .surfaces.cli.app import main  # after the hook fast path, on purpose

sys.exit(main())
