"""The ``kai-ray`` command line."""
