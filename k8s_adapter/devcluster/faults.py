"""Fault injection for tests: failing requests, slow requests, dropped watches, expired history."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(slots=True)
class FailRule:
    code: int
    method: str = "*"  # GET, POST, ... or *
    resource: str = "*"  # plural, or *
    subresource: str = "*"  # binding, eviction, status, "" for the object itself, or *
    times: int = 1
    watch: bool | None = None  # only watches (True), only non-watch requests (False), or both

    def matches(self, method: str, resource: str, subresource: str, watch: bool) -> bool:
        return (self.method in ("*", method) and self.resource in ("*", resource)
                and self.subresource in ("*", subresource) and (self.watch is None or self.watch == watch))


REASONS = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
           410: "Expired", 404: "NotFound", 403: "Forbidden"}


class Faults:
    def __init__(self) -> None:
        self._rules: list[FailRule] = []
        self.latency = 0.0
        self._lock = threading.Lock()
        self.injected = 0

    def fail(self, rule: FailRule) -> None:
        with self._lock:
            self._rules.append(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self.latency = 0.0

    def take(self, method: str, resource: str, subresource: str, watch: bool) -> FailRule | None:
        """The first rule matching this request, used up by one."""
        with self._lock:
            for rule in self._rules:
                if rule.times > 0 and rule.matches(method, resource, subresource, watch):
                    rule.times -= 1
                    self.injected += 1
                    if rule.times == 0:
                        self._rules.remove(rule)
                    return rule
            return None
