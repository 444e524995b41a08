"""Build the native helpers (agentwrap/terminal/_native/) into the wheel.

The pty backend copies the agent's output through this small C program
because a Python relay cannot keep up with ``script(1)`` on a fast stream
(see agentwrap/terminal/relay_helper.py). It is optional: with no C
compiler the wheel is pure Python and the pty backend relays in Python,
which ``agentwrap doctor`` reports. Set AGENTWRAP_NO_NATIVE=1 to skip it.

The hook client (hook.c) is the same kind of helper: a native program an
agent starts at every hook event in a millisecond, where a Python start costs
~50 ms (see agentwrap/surfaces/hooks/server.py); without it the hooks run
``python -m agentwrap hook`` as before.

The binary is built next to its source, so an editable install (whose
package directory is the source tree) finds it where a wheel puts it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ModuleNotFoundError:  # imported for build_helpers() by scripts/benchlib.py, which builds
    BuildHookInterface = object  # another commit's helpers to benchmark it (no hatchling there)

SOURCE = Path("agentwrap/terminal/_native/relay.c")
BINARY = Path("agentwrap/terminal/_native/agentwrap-relay")
HOOK_SOURCE = Path("agentwrap/terminal/_native/hook.c")
HOOK_BINARY = Path("agentwrap/terminal/_native/agentwrap-hook")
#: The hook client linked statically (issue 39): copied into a container, it runs
#: whatever libc the image has. Built where libc.a is (libc6-dev); optional.
HOOK_STATIC = Path("agentwrap/terminal/_native/agentwrap-hook-static")
#: (source, binary) of each native helper
HELPERS = ((SOURCE, BINARY), (HOOK_SOURCE, HOOK_BINARY))
CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra"]


class RelayBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        if os.environ.get("AGENTWRAP_NO_NATIVE"):
            for _, binary in HELPERS:
                (root / binary).unlink(missing_ok=True)  # a stale binary must not outlive the choice
            return
        cc = compiler()
        if cc is None:
            self.app.display_warning(
                "agentwrap: no C compiler found; the pty backend will relay in Python "
                "(slower on fast output) and hooks run in Python (~50 ms more each). "
                "Install gcc and reinstall for the native helpers."
            )
            return
        build_helpers(cc, root)
        build_data["pure_python"] = False
        platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        build_data["tag"] = f"py3-none-{platform}"  # a program, not an extension: any CPython
        if version != "editable":
            for _, binary in HELPERS:
                build_data["force_include"][str(root / binary)] = binary.as_posix()
            if (root / HOOK_STATIC).exists():
                build_data["force_include"][str(root / HOOK_STATIC)] = HOOK_STATIC.as_posix()


def compiler() -> str | None:
    """The C compiler: $CC, else cc or gcc on PATH."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def build_helpers(cc: str, root: Path) -> list[Path]:
    """Build every native helper whose source the tree ``root`` has, next to
    its source; the binaries built. scripts/benchlib.py builds another
    commit's tree with it (an older one may lack a helper)."""
    built = []
    for source, binary in HELPERS:
        if (root / source).exists():
            _build(cc, root / source, root / binary)
            built.append(root / binary)
    if (root / HOOK_SOURCE).exists():
        try:
            _build(cc, root / HOOK_SOURCE, root / HOOK_STATIC, ["-static"])
            built.append(root / HOOK_STATIC)
        except subprocess.CalledProcessError:
            pass  # no libc.a: a container gets the dynamic client (same libc) or none
    return built


def _build(cc: str, src: Path, out: Path, extra: list[str] | None = None) -> None:
    """Always rebuilt (a fraction of a second): an mtime check would trust
    a binary that is merely newer, not built from this source."""
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}-", dir=out.parent)
    os.close(fd)
    try:
        subprocess.run([cc, *CFLAGS, *(extra or []), "-o", tmp, str(src)], check=True)
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
