"""The OpenAPI document, generated from the code (the models and routes).

``python -m agentwrap.surfaces.http.openapi > docs/openapi.json`` writes the
copy kept in the repository; a test fails when that copy is stale.
"""

from __future__ import annotations

import json
import sys

from ...message import QueueLimits
from ...paths import Paths
from .app import create_app


def document() -> str:
    """The document as committed: stable key order, two-space indent, final newline."""
    # no request runs: the paths are neither read nor written, the config not consulted
    app = create_app(Paths.from_env(), "unused", limits=QueueLimits())
    return json.dumps(app.openapi(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(document())
