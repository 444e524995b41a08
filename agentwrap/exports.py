"""What a package offers other packages, imported when first used.

Each package's ``__init__`` declares the names other packages may use
(``__all__``) and the module that defines each; :func:`lazy` turns that table
into the package's module ``__getattr__`` (PEP 562), so ``from
agentwrap.delivery import DeliveryEngine`` works while importing the package
itself imports nothing more. That matters: an agent's hook is a new process at
every tool call, which the agent waits for, and it imports a few modules of
several packages (``sessions.signals``, ``answers.hook_questions``): an
``__init__`` that imported its package's API eagerly would put the store and
the detector on that path. ``tests/test_architecture.py`` checks that every
import across packages names something its package declares.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy(package: str, exports: Mapping[str, tuple[str, ...]]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: ``exports`` maps a module of the
    package (``"engine"``) to the names it offers (``("DeliveryEngine",)``); a
    module named in its own tuple is offered whole."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        found = importlib.import_module(f"{package}.{module}")
        return found if name == module else getattr(found, name)

    return __getattr__


def names(exports: Mapping[str, tuple[str, ...]]) -> list[str]:
    """``__all__`` for ``exports``, sorted."""
    return sorted({name for offered in exports.values() for name in offered})


__all__ = ["lazy", "names"]
