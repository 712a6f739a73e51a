"""Fault injection for tests: failing or slow requests, matched by verb, resource and subresource.

A rule matches requests by Kubernetes verb (get, list, watch, create, update, patch, delete,
deletecollection), resource plural, subresource ("" for the object itself) and object name;
"*" matches anything. A matching rule delays the request by ``delay`` seconds and, when
``code`` is non-zero, answers it with that code and a Status body instead of serving it.
``times`` counts down per match (None: until cleared). Rules apply to resource requests
only, never to discovery, so clients can still find their way to the failing call.
Dropping watches and expiring history act on the store; see DevCluster.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from devcluster.errors import ApiError, from_code

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "*"})


@dataclass(slots=True)
class FaultRule:
    verb: str = "*"
    resource: str = "*"
    subresource: str = "*"
    code: int = 500
    times: int | None = 1
    delay: float = 0.0
    message: str = ""
    reason: str = ""
    name: str = "*"
    hits: int = 0

    def __post_init__(self) -> None:
        if self.verb not in VERBS:
            raise ValueError(f"unknown verb {self.verb!r}; one of {sorted(VERBS)}")
        if self.code and not 400 <= self.code <= 599:
            raise ValueError("code must be an HTTP error code (400-599), or 0 for a delay only")

    def matches(self, verb: str, resource: str, subresource: str, name: str) -> bool:
        return (
            self.verb in ("*", verb)
            and self.resource in ("*", resource)
            and self.subresource in ("*", subresource)
            and self.name in ("*", name)
        )

    def error(self) -> ApiError:
        return from_code(self.code, self.message, self.reason)

    def describe(self) -> dict[str, Any]:
        return asdict(self)


class Faults:
    def __init__(self) -> None:
        self.rules: list[FaultRule] = []
        self.injected = 0  # requests answered with an injected error

    def add(self, rule: FaultRule) -> FaultRule:
        self.rules.append(rule)
        return rule

    def fail(
        self,
        verb: str,
        resource: str,
        code: int = 500,
        *,
        subresource: str = "*",
        times: int | None = 1,
        message: str = "",
        name: str = "*",
    ) -> FaultRule:
        """The next ``times`` matching requests fail with ``code``."""
        return self.add(FaultRule(verb, resource, subresource, code, times, message=message, name=name))

    def delay(self, seconds: float, verb: str = "*", resource: str = "*", *, times: int | None = None) -> FaultRule:
        """Matching requests wait ``seconds`` before being served."""
        return self.add(FaultRule(verb, resource, code=0, times=times, delay=seconds))

    def clear(self) -> None:
        self.rules.clear()

    def check(self, verb: str, resource: str, subresource: str, name: str) -> tuple[float, ApiError | None]:
        """Consume the rules matching this request: the total delay and the first failure, if any."""
        delay, failure = 0.0, None
        for rule in list(self.rules):
            if not rule.matches(verb, resource, subresource, name):
                continue
            if rule.code and failure is not None:
                continue  # one failure per request; later failing rules keep their count
            rule.hits += 1
            delay += rule.delay
            if rule.code:
                failure = rule.error()
                self.injected += 1
            if rule.times is not None:
                rule.times -= 1
                if rule.times <= 0:
                    self.rules.remove(rule)
        return delay, failure
