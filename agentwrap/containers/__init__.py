"""Agents in containers (issue 39): ``agentwrap run --container NAME`` / ``--image IMAGE``.

The tmux pane runs the engine's ``exec -it`` into the container, so profiles, detection,
typing and ``--ack`` work unchanged; what differs is here, one job per module:

* :mod:`.engine`: the engine (docker or podman: ``[container] engine``, else found on
  PATH) and running its commands, its failures as :mod:`agentwrap.errors` classes;
* :mod:`.mounts`: the mounts the engine reports (``inspect``) and the translation of
  paths between the host and the container (a hook's payload too: ``host_payload``),
  refusing a path outside them;
* :mod:`.box`: the session's box folder (only its hook socket, its answer folder and
  the hook client, mounted at :data:`.box.INSIDE`), and the container's lifecycle:
  started for the session, the agent's exec line, stopped, its state read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exports import lazy, names

if TYPE_CHECKING:  # the names for the type checker; at run time: __getattr__
    from .box import HOOK_CLIENT as HOOK_CLIENT
    from .box import HOOK_SOCKET as HOOK_SOCKET
    from .box import INSIDE as INSIDE
    from .box import MOUNTS_FILE as MOUNTS_FILE
    from .box import Box as Box
    from .box import box_dir as box_dir
    from .box import box_mounts as box_mounts
    from .box import client_missing as client_missing
    from .box import hooks_reach as hooks_reach
    from .box import mounts_file as mounts_file
    from .box import prepare_box as prepare_box
    from .box import remove_box as remove_box
    from .box import save_mounts as save_mounts
    from .box import saved_mounts as saved_mounts
    from .box import write_guard as write_guard
    from .engine import Engine as Engine
    from .engine import find_engine as find_engine
    from .mounts import PATH_FIELDS as PATH_FIELDS
    from .mounts import Mount as Mount
    from .mounts import Mounts as Mounts
    from .mounts import host_payload as host_payload

#: What other packages may use, by the module that offers it (imported on first use).
EXPORTS: dict[str, tuple[str, ...]] = {
    "box": ("HOOK_CLIENT", "HOOK_SOCKET", "INSIDE", "MOUNTS_FILE", "Box", "box_dir", "box_mounts",
            "client_missing", "hooks_reach", "mounts_file", "prepare_box", "remove_box", "save_mounts",
            "saved_mounts", "write_guard"),
    "engine": ("Engine", "find_engine"),
    "mounts": ("PATH_FIELDS", "Mount", "Mounts", "host_payload"),
}
__all__ = names(EXPORTS)
__getattr__ = lazy(__name__, EXPORTS)
