"""How much memory a run takes: this process and everything it started (Ray's processes too)."""

from __future__ import annotations

import os


def rss_bytes() -> int:
    """Resident memory of this process and its children, in bytes."""
    import psutil

    me = psutil.Process(os.getpid())
    total = me.memory_info().rss
    for child in me.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:  # a worker that exited between listing and reading
            continue
    return int(total)
