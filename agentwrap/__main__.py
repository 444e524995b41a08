"""``python -m agentwrap``: the same as the ``agentwrap`` command."""

import sys

from .surfaces.cli.app import main

sys.exit(main())
