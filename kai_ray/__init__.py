"""kai-ray: KAI Scheduler's semantics and API on Ray actors.

This package holds the shared model, input/output, configuration, the CLI and the
embedded simulator. Scheduling logic lives in ``coordinator`` and ``shards``.
"""

__version__ = "0.1.0"
