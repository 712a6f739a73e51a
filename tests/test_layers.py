"""The layers of docs/architecture.md#layers, checked on every import of every module.

Every ``import`` and ``from ... import`` counts, wherever it stands: at the top, inside a
function (the lazy imports that keep ``schedule`` fast), or under ``TYPE_CHECKING`` (a type
that must come from a higher layer is a sign that the code sits in the wrong layer, so
those are not exempt either).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

PACKAGES = (
    "kai_ray",
    "pod_grouper",
    "placement",
    "shards",
    "coordinator",
    "k8s_adapter",
    "devcluster",
    "realcluster",
    "loadtests",
)

# Module prefixes of each layer; the longest matching prefix decides a module's layer.
LAYERS: dict[str, tuple[str, ...]] = {
    "model": (
        "kai_ray",  # the package itself: every import of kai_ray.<anything> runs it, so it stays at the bottom
        "kai_ray.model",
        "kai_ray.config",
        "kai_ray.deltas",
        "kai_ray.errors",
        "kai_ray.heap",
        "kai_ray.labels",
        "kai_ray.quantity",
    ),
    # The pod grouper in two sub-layers: its rules are pure and under the readers, which use them;
    # its live part talks to the API through the adapter and sits in the adapter's layer.
    "grouper rules": ("pod_grouper",),
    "readers": ("kai_ray.io",),
    "placement": ("placement",),
    "shards": ("shards",),
    "coordinator": ("coordinator",),
    "adapter": ("k8s_adapter", "pod_grouper.live"),
    "devcluster": ("devcluster",),
    "realcluster": ("realcluster",),  # the real control plane and KAI for tests and load tests: imports none of ours
    "wiring": (
        "kai_ray.app",  # the wiring subpackage: the CLI, the simulator, the runtime, the Ray actors
        "kai_ray.__main__",  # `python -m kai_ray` must stay at the package's top
        "loadtests",
    ),
}

# What each layer may import besides itself. Wiring may import anything.
MAY_IMPORT: dict[str, set[str]] = {
    "model": set(),
    "grouper rules": {"model"},
    "readers": {"model", "grouper rules"},
    "placement": {"model"},
    "shards": {"model", "placement"},
    "coordinator": {"model", "placement", "shards"},
    "adapter": {"model", "grouper rules", "readers", "placement", "shards", "coordinator"},
    "devcluster": set(),
    "realcluster": set(),
    "wiring": set(LAYERS),
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the module imported
    path: Path
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    base = REPO.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_in(source: str, module: str, path: Path) -> Iterator[Import]:
    """Every import of a project module in ``source``, at any depth of the syntax tree.
    ``from P import name`` counts as importing ``P.name`` when that is a module."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base for a in node.names]
        for target in targets:
            if target.split(".")[0] in PACKAGES:
                yield Import(module, target, path, node.lineno)


def project_imports() -> list[Import]:
    found: list[Import] = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            found.extend(imports_in(path.read_text(encoding="utf-8"), module_name(path), path))
    return found


def layer_of(module: str) -> str | None:
    best: tuple[int, str] | None = None
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), layer)
    return best[1] if best else None


def test_every_module_belongs_to_a_layer() -> None:
    modules = {module_name(p) for package in PACKAGES for p in (REPO / package).rglob("*.py")}
    assert sorted(m for m in modules if layer_of(m) is None) == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    wrong = []
    for imp in project_imports():
        source, target = layer_of(imp.module), layer_of(imp.target)
        assert source is not None and target is not None, imp
        if target != source and target not in MAY_IMPORT[source]:
            where = f"{imp.path.relative_to(REPO)}:{imp.line}"
            wrong.append(f"{where}: {imp.module} ({source}) imports {imp.target} ({target})")
    assert wrong == [], "\n".join(wrong)


def test_the_engine_coordinator_and_shards_never_reach_kubernetes_or_the_wiring() -> None:
    # The rule above, spelled out for the boundaries the architecture depends on.
    forbidden = ("k8s_adapter", "devcluster", "kai_ray.app", "kai_ray.io")
    leaks = [
        f"{imp.module} -> {imp.target}"
        for imp in project_imports()
        if imp.module.split(".")[0] in ("placement", "coordinator", "shards") and imp.target.startswith(forbidden)
    ]
    assert leaks == []


def test_the_import_walk_sees_lazy_relative_and_type_checking_imports() -> None:
    source = """
from typing import TYPE_CHECKING
import numpy
if TYPE_CHECKING:
    from coordinator.coordinator import CycleResult
def later():
    import kai_ray.app.sim.run
    from kai_ray import labels
    from . import constraints
"""
    path = REPO / "placement" / "example.py"
    found = {(i.target, i.line) for i in imports_in(source, "placement.example", path)}
    assert found == {
        ("coordinator.coordinator", 5),
        ("kai_ray.app.sim.run", 7),
        ("kai_ray.labels", 8),
        ("placement.constraints", 9),
    }
    assert layer_of("kai_ray.app.sim.run") == "wiring" and layer_of("kai_ray.model.fairshare") == "model"
