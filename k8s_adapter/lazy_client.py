"""kubernetes-asyncio's packages imported name by name, on first use.

``import kubernetes_asyncio.client`` runs the package's ``__init__``, which imports every API
class and all of its 800-odd models: about a second of a start on a quiet machine, and more on a
busy one, before the first list can leave. kai-ray calls the API through ``ApiClient.call_api``
with plain JSON and touches a handful of those names (the lease types of leader election).

``install`` puts the three package modules (``kubernetes_asyncio``, its ``client`` and
``client.models``) in ``sys.modules`` without running their ``__init__``; each resolves a name
the first time it is asked for, by importing the one submodule its ``__init__`` would have taken
that name from. What the code sees is the same objects, in the same modules, just later; a name
the ``__init__`` does not import this way raises ``AttributeError`` as before. Nothing is done
when the package was imported already, or when its ``__init__`` no longer reads as expected
(then the plain import runs, only slower).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGES = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")

# The two forms the package ``__init__`` files use, one name per line.
_FROM_IMPORT = re.compile(r"^from\s+([\w.]+)\s+import\s+(\w+)\s*$", re.MULTILINE)
_IMPORT_AS = re.compile(r"^import\s+([\w.]+)\s+as\s+(\w+)\s*$", re.MULTILINE)
_DUNDER = re.compile(r"^(__\w+__)\s*=\s*\"([^\"]*)\"\s*$", re.MULTILINE)  # __version__ and the like


def install() -> bool:
    """Make the packages lazy; True when they are (now or already), False when left alone."""
    if any(name in sys.modules for name in PACKAGES):
        return all(isinstance(sys.modules.get(name), _LazyPackage) for name in PACKAGES)
    made: list[_LazyPackage] = []
    for name in PACKAGES:
        package = _lazy(name)
        if package is None:
            for done in made:
                sys.modules.pop(done.__name__, None)
            return False
        made.append(package)
        sys.modules[name] = package
    for parent, child in zip(made, made[1:], strict=False):
        setattr(parent, child.__name__.rsplit(".", 1)[1], child)
    return True


class _LazyPackage(ModuleType):
    """A package whose ``__init__`` was read, not run: its names come in as they are asked for."""

    _sources: dict[str, tuple[str, str | None]]  # name -> (module, attribute in it, or None for the module)

    def __getattr__(self, name: str) -> Any:
        source = self._sources.get(name)
        if source is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        module_name, attribute = source
        module = importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        setattr(self, name, value)  # the next lookup is a plain attribute
        return value


def _lazy(name: str) -> _LazyPackage | None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or spec.submodule_search_locations is None:
        return None
    try:
        text = Path(spec.origin).read_text()
    except OSError:
        return None
    sources: dict[str, tuple[str, str | None]] = {}
    for module, attribute in _FROM_IMPORT.findall(text):
        if module == "__future__":
            continue
        if not module.startswith(name + "."):
            return None  # something this reading does not understand: import it the plain way
        sources[attribute] = (module, attribute)
    for module, alias in _IMPORT_AS.findall(text):
        sources[alias] = (module, None)
    if not sources:
        return None
    package = _LazyPackage(name)
    package.__spec__ = spec
    package.__file__ = spec.origin
    package.__path__ = list(spec.submodule_search_locations)
    package.__package__ = name
    package._sources = sources
    for dunder, value in _DUNDER.findall(text):
        setattr(package, dunder, value)
    return package
