"""``python -m agentwrap``: the same as the ``agentwrap`` command."""

import sys

from .cli import main

sys.exit(main())
