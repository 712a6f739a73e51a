"""Log set-up for the long-running commands: text or JSON lines, structured fields on each.

A call site attaches fields with ``extra=fields(pod=..., node=...)``. The text format writes them
after the message as ``key=value``; the JSON format writes one object per line with ``time``,
``level``, ``logger``, ``msg`` and the fields, for log pipelines (``--log-format json``).
Expected conditions are logged in one line by the code that meets them; only a bug (an
exception nobody expected) carries a traceback.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

FIELDS = "kai_ray_fields"
FORMATS = ("text", "json")


def fields(**values: Any) -> dict[str, dict[str, Any]]:
    """``extra=`` for a log call: structured fields, ``None`` values left out."""
    return {FIELDS: {k: v for k, v in values.items() if v is not None}}


def _quoted(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if not text or any(c in text for c in ' "=\n') else text


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = getattr(record, FIELDS, None)
        if extra:
            head, newline, rest = line.partition("\n")  # fields go on the message line, before a traceback
            head += " " + " ".join(f"{k}={_quoted(v)}" for k, v in extra.items())
            line = head + newline + rest
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(getattr(record, FIELDS, None) or {})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(verbose: bool, log_format: str = "text") -> None:
    """Root logging for `run` and `up`: debug with ``-v``, one handler on stderr, the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    # Libraries' own chatter stays at warning even with -v: -v is for the scheduler's decisions.
    for noisy in ("aiohttp", "asyncio", "kubernetes_asyncio", "urllib3", "ray"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
