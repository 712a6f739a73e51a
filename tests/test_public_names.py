"""Each package's public names: its ``__all__`` is honest, and other packages keep to it.

A package's ``__all__`` lists what other packages may use (docs/architecture.md#public-names):
names its ``__init__`` re-exports, which may be imported from the package or from the module
that defines them, and public modules, for packages whose modules are imported one at a time.
Tests may reach inside any package; the packages themselves may not reach inside each other.
"""

from __future__ import annotations

import ast
import importlib
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_layers import PACKAGES, is_module, module_name

UNITS = sorted(
    module_name(init) for package in PACKAGES for init in (REPO / package).rglob("__init__.py") if init.is_file()
)


def public_all(unit: str) -> list[str]:
    names = getattr(importlib.import_module(unit), "__all__", None)
    assert isinstance(names, list | tuple), f"{unit} has no __all__"
    return list(names)


@pytest.mark.parametrize("unit", UNITS)
def test_all_names_exist_and_every_public_name_is_in_all(unit: str) -> None:
    package = importlib.import_module(unit)
    names = public_all(unit)
    assert len(names) == len(set(names)), f"{unit}.__all__ repeats a name"
    for name in names:
        if not hasattr(package, name):  # a public module the package does not import itself
            assert is_module(f"{unit}.{name}"), f"{unit}.__all__ names {name!r}, which does not exist"
            importlib.import_module(f"{unit}.{name}")
    # Like httpx's test_exported_members: what the package defines or re-exports is declared.
    # Submodules appear as attributes once imported; they are public only when listed.
    undeclared = [
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name not in names
    ]
    assert undeclared == [], f"{unit} exports names missing from its __all__"


@dataclass(frozen=True)
class Use:
    importer: str
    target: str  # the module imported from
    names: tuple[str, ...]  # empty for `import target`
    where: str


def cross_package_uses() -> list[Use]:
    uses = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            importer = module_name(path)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
                if isinstance(node, ast.Import):
                    uses += [Use(importer, a.name, (), where) for a in node.names if a.name.split(".")[0] in PACKAGES]
                elif (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and (node.module or "").split(".")[0] in PACKAGES
                ):
                    uses.append(Use(importer, str(node.module), tuple(a.name for a in node.names), where))
    return uses


def owning_unit(module: str) -> str:
    return max((u for u in UNITS if module == u or module.startswith(u + ".")), key=len)


def inside(module: str, unit: str) -> bool:
    return module == unit or module.startswith(unit + ".")


def breaches(use: Use) -> list[str]:
    """The names ``use`` takes from a package it does not belong to, and that package does not offer."""
    unit = owning_unit(use.target)
    if inside(use.importer, unit):
        return []
    offered = set(public_all(unit))
    if use.target == unit:
        return [n for n in use.names if n not in offered]
    module = use.target[len(unit) + 1 :].split(".")[0]
    if module in offered:  # a public module: everything in it may be used
        return []
    if not use.names:  # `import unit.module` of a module that is not public
        return [f"module {module}"]
    return [n for n in use.names if n not in offered]


def test_packages_import_only_what_other_packages_offer() -> None:
    wrong = [
        f"{use.where}: {use.importer} takes {', '.join(names)} from {use.target}"
        for use in cross_package_uses()
        if (names := breaches(use))
    ]
    assert wrong == [], "\n".join(wrong)


def test_the_judge_refuses_private_names_and_modules() -> None:
    private = Use("coordinator.coordinator", "placement.gpu_groups", ("GpuGroups",), "x:1")
    public = Use("coordinator.coordinator", "placement.placer", ("Placer",), "x:1")
    own = Use("placement.node_table", "placement.gpu_groups", ("GpuGroups",), "x:1")
    internal_module = Use("kai_ray.app.cli.run_cmd", "k8s_adapter.binder", (), "x:1")
    assert breaches(private) == ["GpuGroups"]
    assert breaches(public) == [] and breaches(own) == []
    assert breaches(internal_module) == ["module binder"]
    assert Path(REPO / "placement" / "gpu_groups.py").is_file()
