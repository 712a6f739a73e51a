"""Failures in the shape the Kubernetes API server answers them: a ``kind: Status`` body.

Clients branch on ``code`` and ``reason`` (kubernetes-asyncio raises ``ApiException`` with the
HTTP code; kubectl prints ``message``), so each constructor below reproduces the real server's
code, reason and message wording for that situation.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

# The reason Kubernetes puts next to each HTTP code it uses (metav1.StatusReason).
REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An answer other than success; ``status()`` is the body the server sends."""

    def __init__(
        self, code: int, reason: str, message: str, details: Obj | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(resource: str, name: str, group: str = "") -> Obj:
    details: Obj = {"name": name, "kind": resource}
    if group:
        details["group"] = group
    return details


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        404, "NotFound", f'{_qualified(resource, group)} "{name}" not found', _details(resource, name, group)
    )


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{_qualified(resource, group)} "{name}" already exists', _details(resource, name, group)
    )


def conflict(resource: str, name: str, why: str, group: str = "") -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
        _details(resource, name, group),
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
    """422 with one cause per (field, message), worded like the server's field errors."""
    text = "; ".join(f"{field}: {message}" for field, message in causes)
    prefix = f'{kind}.{group} "{name}"' if group else f'{kind} "{name}"'
    details = {
        "name": name,
        "kind": kind,
        "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field} for field, message in causes],
    }
    if group:
        details["group"] = group
    return ApiError(422, "Invalid", f"{prefix} is invalid: {text}", details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(message: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_many_requests(message: str, causes: list[Obj] | None = None, retry_after: int | None = None) -> ApiError:
    details: Obj | None = {"causes": causes} if causes else None
    if retry_after is not None:
        details = {**(details or {}), "retryAfterSeconds": retry_after}
    return ApiError(429, "TooManyRequests", message, details, retry_after)


def from_code(code: int, message: str = "", reason: str = "") -> ApiError:
    """An error for an arbitrary code, e.g. one injected by a test."""
    reason = reason or REASONS.get(code, "InternalError" if code >= 500 else "BadRequest")
    return ApiError(
        code, reason, message or f"injected failure ({code} {reason})", retry_after=1 if code == 429 else None
    )
