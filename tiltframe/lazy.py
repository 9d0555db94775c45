"""A package's public names imported on first use (PEP 562 ``__getattr__``).

Spark starts new Python processes that import the module of what they run: a continuous query's processor
(on the driver to learn its state, then in each executor's worker), the clock's data source, a trickle
query's steps.  Importing a module imports every package ``__init__`` above it first, and a package that
imported its public API there brought the whole library into each of those processes: the API, the store's
SQLAlchemy, the answers' modules, about half a second apiece (docs/performance.md, "Python processes Spark
starts").  A package that re-exports does it through :func:`exports` instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable


def exports(
    package: str, where: dict[str, str], submodules: Iterable[str] = ()
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name of ``where`` is imported from its module
    (``where[name]``) when first asked for, each of ``submodules`` is that submodule (as ``package.api``
    was once the package imported it), then kept in the package like an eager import."""
    namespace = sys.modules[package].__dict__
    modules = frozenset(submodules)

    def __getattr__(name: str) -> object:
        if name in modules:
            return importlib.import_module(f"{package}.{name}")  # importing it sets it in the package
        module = where.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where, *modules})

    return __getattr__, __dir__


def names_in(module: str, names: Iterable[str]) -> dict[str, str]:
    """``{name: module}`` for each of ``names``: one module's part of an :func:`exports` table."""
    return dict.fromkeys(names, module)
