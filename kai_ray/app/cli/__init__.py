"""The ``kai-ray`` command line: ``main`` parses it and runs one sub-command module; ``output``
prints tables and JSON (the simulator and the benchmarks print with it too). Modules are
imported one at a time, so a sub-command pays only for what it uses."""

__all__ = ["main", "output"]
