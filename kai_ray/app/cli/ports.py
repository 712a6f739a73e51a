"""A port the user asked for that cannot be opened: one line naming the port and the option."""

from __future__ import annotations

from kai_ray.errors import InputError


def port_error(port: int, what: str, option: str, exc: OSError) -> InputError:
    """``OSError`` from binding ``port`` as the user's error (exit 2), never a traceback."""
    text = str(exc).lower()
    why = "is already in use" if "in use" in text else f"cannot be opened ({exc.strerror or exc})"
    return InputError(f"port {port} for {what} {why}; choose another with {option} (0 picks a free one)")
