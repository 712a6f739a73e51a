"""Device selectors: Kubernetes' CEL over one device, evaluated by cel-python (``celpy``).

An expression sees ``device.driver``, ``device.attributes[<domain>].<name>`` and
``device.capacity[<domain>].<name>``, as the DRA allocator gives them, with the Kubernetes CEL
library functions selectors use (``placement.cel_values``, imported with ``celpy`` on the first
selector). An expression that does not
compile, or fails on a device (a missing attribute, a wrong type), does not select it, and
the error is kept for the pending reason. Programs and verdicts are cached: one compile per
expression, one evaluation per (expression, device).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from kai_ray.model import Device

if TYPE_CHECKING:
    import celpy

log = logging.getLogger(__name__)
# celpy sets the interpreter's recursion limit to this whenever an environment is made (lazily,
# on the first selector). Raised here, at import, the limit does not change in the middle of a
# running scheduler (or of a test that checks it did not).
CEL_RECURSION_LIMIT = 2500
sys.setrecursionlimit(max(sys.getrecursionlimit(), CEL_RECURSION_LIMIT))
Seen = tuple[str, tuple[tuple[str, str, bool | int | str], ...], tuple[tuple[str, str, float], ...]]
MAX_VERDICTS = 200_000  # cached (expression, device) verdicts before the cache starts over


class Selectors:
    """Compiled selectors and their verdicts per device, shared by every table of the process
    (a session builds tables every cycle; compiling and evaluating again each time would waste
    it). An expression sees a device's driver, attributes and capacity, nothing else, so a
    verdict is keyed by those: the same GPU model on a thousand nodes is evaluated once, and a
    device whose slice changed its attributes is evaluated anew."""

    def __init__(self) -> None:
        self._env: celpy.Environment | None = None
        self._programs: dict[str, Any] = {}
        self._errors: dict[str, str] = {}  # expression -> why it selects nothing (compile or runtime error)
        self._verdicts: dict[tuple[str, Seen], bool] = {}
        self._activations: dict[Seen, dict[str, Any]] = {}

    @property
    def env(self) -> celpy.Environment:
        # Made on the first selector, not at import: building CEL's parser takes ~0.5 s, which
        # every scheduler start (and every CLI call) paid although most clusters have no DRA
        # selectors. celpy sets the recursion limit when one is made (see CEL_RECURSION_LIMIT).
        if self._env is None:
            import celpy

            self._env = celpy.Environment()
        return self._env

    def forget(self) -> None:
        """Drop every cached verdict (benchmarks measure each system from a cold cache)."""
        self._verdicts.clear()
        self._activations.clear()

    def error(self, expression: str) -> str | None:
        return self._errors.get(expression)

    def matches(self, expressions: tuple[str, ...], device: Device) -> bool:
        return all(self._matches(e, device) for e in expressions)

    def _matches(self, expression: str, device: Device) -> bool:
        key = (expression, (device.driver, device.attributes, device.capacity))
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._evaluate(expression, device)
            if len(self._verdicts) >= MAX_VERDICTS:
                self._verdicts.clear()
                self._activations.clear()
            self._verdicts[key] = verdict
        return verdict

    def _evaluate(self, expression: str, device: Device) -> bool:
        program = self._program(expression)
        if program is None:
            return False
        from celpy import celtypes

        from placement.cel_values import device_activation

        seen = (device.driver, device.attributes, device.capacity)
        activation = self._activations.get(seen)
        if activation is None:
            activation = self._activations[seen] = device_activation(device)
        try:
            result = program.evaluate(activation)
        except Exception as exc:  # celpy raises its own errors and Python ones from our functions
            self._errors.setdefault(expression, f"CEL error on device {device.name}: {exc.__class__.__name__}")
            return False
        if isinstance(result, Exception):
            self._errors.setdefault(expression, f"CEL error on device {device.name}")
            return False
        return bool(result) if isinstance(result, celtypes.BoolType | bool) else False

    def _program(self, expression: str) -> Any:
        if expression in self._programs:
            return self._programs[expression]
        try:
            from placement.cel_values import FUNCTIONS

            program = self.env.program(self.env.compile(expression), functions=FUNCTIONS)
        except Exception as exc:  # a selector that does not compile selects nothing
            self._errors[expression] = f"CEL selector does not compile: {str(exc).splitlines()[0][:120]}"
            log.warning("device selector %r does not compile: %s", expression, exc)
            program = None
        self._programs[expression] = program
        return program


SELECTORS = Selectors()
