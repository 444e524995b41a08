"""What a start imports (issue 23): every command and every Python hook is a
new process the person or the agent waits for, so code that only some
commands need is imported by those commands, on first use. Codex's
app-server client (``agentwrap.codex_server``, issue 24) and the store's
migration (``agentwrap.service.moving``, both backends' code) put ~50 ms of
CPU on ``agentwrap run --help`` and on a hook's hand-over with no supervisor.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Loaded only by the commands that use them.
NOT_AT_START = ("agentwrap.codex_server", "agentwrap.service.moving",
                "agentwrap.app_server", "agentwrap.service.hosts")


def loaded_by(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("code", [
    # the CLI as `agentwrap run --help` starts it: the parser built, the help printed
    "import contextlib, io, sys\nfrom agentwrap.surfaces.cli.app import main\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
    "    main(['run', '--help'])",
    # the Python hook handing over with no supervisor opens a service
    "import sys, agentwrap.service, agentwrap.surfaces.hooks.handler",
    # a supervisor process (`agentwrap _supervise`): what cmd_supervise imports
    "import sys\nfrom agentwrap.surfaces.cli.app import main\n"
    "from agentwrap.feedback.companion import for_session\n"
    "from agentwrap.sessions.lifecycle import supervise\n"
    "from agentwrap.surfaces.hooks.server import for_session as hook_server",
])
def test_a_start_imports_no_code_only_some_commands_need(code: str) -> None:
    loaded = loaded_by(code)
    assert "agentwrap.surfaces.cli.app" in loaded or "agentwrap.service" in loaded
    assert not {m for m in loaded if m.startswith(NOT_AT_START)}


def test_the_migration_is_still_offered_by_the_service() -> None:
    """Imported on first use, the same names (``agentwrap store migrate``)."""
    import agentwrap.service as service
    from agentwrap.service import moving

    assert service.migrate_store is moving.migrate and service.store_place is moving.place
    assert service.MoveReport is moving.MoveReport
    from agentwrap.service import hosts

    assert service.HostView is hosts.HostView
    with pytest.raises(AttributeError):
        _ = service.no_such_name  # type: ignore[attr-defined]
