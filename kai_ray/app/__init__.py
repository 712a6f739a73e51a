"""The wiring: what puts the floor (``kai_ray``'s model, readers and config), the scheduler
(``placement``, ``shards``, ``coordinator``) and the adapter together into programs. ``cli`` is the
``kai-ray`` command, ``sim`` the embedded simulator, ``runtime`` a coordinator with its shards in
process or as Ray actors, ``actors`` the only module that imports Ray, ``process_memory`` the RSS
of a run. Modules are imported one at a time, so a command pays only for what it uses; this file
imports none of them. ``__all__`` names the modules other packages may use."""

__all__ = ["actors", "cli", "process_memory", "runtime", "sim"]
