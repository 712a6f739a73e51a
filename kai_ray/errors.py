"""Errors that reach the user as one line, never as a traceback."""


class InputError(Exception):
    """Malformed input: the message names the object and the field."""


class ConfigError(InputError):
    """A scheduler configuration that cannot be used."""
