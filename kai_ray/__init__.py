"""kai-ray: KAI Scheduler's semantics and API on Ray actors.

This package holds the shared model, the readers, configuration, the CLI and the embedded
simulator; scheduling logic lives in ``coordinator`` and ``shards``. Its modules sit in
different layers (docs/architecture.md#layers), so this file imports none of them: every
import of a ``kai_ray`` module runs it. ``__all__`` names the modules other packages may use.
"""

__version__ = "0.1.0"

__all__ = [
    "actors",
    "cli",
    "config",
    "deltas",
    "errors",
    "grouping",
    "io",
    "labels",
    "logs",
    "model",
    "plugins",
    "process_memory",
    "quantity",
    "runtime",
    "sim",
    "workloads",
]
