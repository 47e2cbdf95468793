"""Module attributes loaded on first use, so that importing a dataset package stays cheap.

>>> import types
>>> module = types.ModuleType("demo_pkg")
>>> module.__getattr__ = lazy_attributes("demo_pkg", {}, {"ANSWER": lambda: 42}, module.__dict__)
>>> module.ANSWER
42
"""

from __future__ import annotations

from importlib import import_module
from typing import Callable, Mapping, MutableMapping


def lazy_attributes(
    package: str,
    submodules: Mapping[str, str],
    factories: Mapping[str, Callable[[], object]],
    namespace: MutableMapping[str, object],
) -> Callable[[str], object]:
    """A module ``__getattr__``: ``name`` from ``package.<submodules[name]>`` or ``factories[name]()``,
    stored in ``namespace`` (the module's globals) so that it is loaded once."""

    def __getattr__(name: str):
        if name in submodules:
            value = getattr(import_module(f".{submodules[name]}", package), name)
        elif name in factories:
            value = factories[name]()
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    return __getattr__
