"""``python -m kai_ray`` is the same as the ``kai-ray`` command."""

from kai_ray.app.cli.main import entry

entry()
