"""kai-ray: KAI Scheduler's semantics and API on Ray actors.

This package is the floor: the shared model, the readers and the configuration; its ``app``
subpackage is the roof (the CLI, the embedded simulator, the runtime wiring and the Ray actors).
Scheduling logic lives in ``placement``, ``shards`` and ``coordinator``. Its modules sit in
different layers (docs/architecture.md#layers), so this file imports none of them: every
import of a ``kai_ray`` module runs it. ``__all__`` names the modules other packages may use.
"""

__version__ = "0.1.0"

__all__ = [
    "app",
    "config",
    "deltas",
    "errors",
    "heap",
    "io",
    "labels",
    "logs",
    "model",
    "plugins",
    "quantity",
]
