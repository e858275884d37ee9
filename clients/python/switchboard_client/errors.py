"""Refusals, as the server sent them.

Every refusal raises a `SwitchboardError` carrying the server's error body field for
field: `error_code`, `status` (the HTTP status), `details` and `suggested_action`. The
subclasses group the codes by what a caller does about them, so `except NotFoundError`
reads as the intent; `error_code` stays the precise answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SwitchboardError(Exception):
    """A refusal from the server (or, as `ConnectionFailed`, no answer at all)."""

    def __init__(
        self,
        error_code: str,
        error_message: str,
        *,
        status: int,
        details: Mapping[str, Any] | None = None,
        suggested_action: str = "",
    ) -> None:
        super().__init__(f"{error_code}: {error_message}")
        self.error_code = error_code
        self.error_message = error_message
        self.status = status
        self.details: dict[str, Any] = dict(details or {})
        self.suggested_action = suggested_action


class NotFoundError(SwitchboardError):
    """An id that names nothing the caller may see (`*_NOT_FOUND`)."""


class AuthenticationError(SwitchboardError):
    """A missing, wrong or rotated token (`UNAUTHORIZED`), or one that may not do this
    (`FORBIDDEN`)."""


class InvalidRequestError(SwitchboardError):
    """A request the contract's rules refuse (`VALIDATION_ERROR`, `INVALID_RECIPIENT`,
    `MESSAGE_TOO_LONG`, `PAYLOAD_TOO_LARGE`, …): sending it again changes nothing."""


class ConflictError(SwitchboardError):
    """The request meets state that says no (`CONFLICT`, `LEASE_CONFLICT`,
    `APPROVAL_CLOSED`, `INVALID_TASK_TRANSITION`, …)."""


class LimitError(SwitchboardError):
    """A budget, the loop guard, or a disabled team (`RATE_LIMITED`, `LOOP_DETECTED`,
    `COMMUNICATION_DISABLED`): wait, or change the team's settings."""


class UnavailableError(SwitchboardError):
    """The server could not do it now (`UNAVAILABLE`, `REQUEST_TIMEOUT`,
    `INTERNAL_ERROR`); a retry may work."""


class ConnectionFailed(UnavailableError):
    """No answer from the server at all (refused, reset, timed out). `status` is 0 and
    `error_code` `UNAVAILABLE`, so one `except UnavailableError` covers both."""

    def __init__(self, message: str) -> None:
        super().__init__(
            "UNAVAILABLE",
            message,
            status=0,
            suggested_action="Check that the server runs at the client's URL, then retry.",
        )


_FAMILIES: dict[str, type[SwitchboardError]] = {
    **dict.fromkeys(
        [
            "AGENT_NOT_FOUND",
            "MESSAGE_NOT_FOUND",
            "TASK_NOT_FOUND",
            "LEASE_NOT_FOUND",
            "APPROVAL_NOT_FOUND",
            "NOT_FOUND",
        ],
        NotFoundError,
    ),
    **dict.fromkeys(["UNAUTHORIZED", "FORBIDDEN"], AuthenticationError),
    **dict.fromkeys(
        [
            "VALIDATION_ERROR",
            "INVALID_RECIPIENT",
            "MESSAGE_TOO_LONG",
            "NO_SUITABLE_AGENT",
            "METHOD_NOT_ALLOWED",
            "PAYLOAD_TOO_LARGE",
            "URI_TOO_LONG",
            "HEADERS_TOO_LARGE",
        ],
        InvalidRequestError,
    ),
    **dict.fromkeys(
        [
            "CONFLICT",
            "AGENT_ALREADY_REGISTERED",
            "LEASE_CONFLICT",
            "APPROVAL_CLOSED",
            "INVALID_TASK_TRANSITION",
            "RESPONSE_NOT_REQUIRED",
            "RESPONSE_DEADLINE_PASSED",
        ],
        ConflictError,
    ),
    **dict.fromkeys(["RATE_LIMITED", "LOOP_DETECTED", "COMMUNICATION_DISABLED"], LimitError),
    **dict.fromkeys(["UNAVAILABLE", "REQUEST_TIMEOUT", "INTERNAL_ERROR"], UnavailableError),
}


# The HTTP status the server answers each code with over REST; a refusal that came over
# the WebSocket (no HTTP status of its own) carries the same one.
STATUS: dict[str, int] = {
    **dict.fromkeys(["VALIDATION_ERROR", "MESSAGE_TOO_LONG", "INVALID_RECIPIENT"], 400),
    "UNAUTHORIZED": 401,
    **dict.fromkeys(["FORBIDDEN", "COMMUNICATION_DISABLED"], 403),
    **dict.fromkeys(
        [
            "NOT_FOUND",
            "AGENT_NOT_FOUND",
            "MESSAGE_NOT_FOUND",
            "TASK_NOT_FOUND",
            "LEASE_NOT_FOUND",
            "APPROVAL_NOT_FOUND",
        ],
        404,
    ),
    "METHOD_NOT_ALLOWED": 405,
    **dict.fromkeys(
        [
            "CONFLICT",
            "AGENT_ALREADY_REGISTERED",
            "RESPONSE_NOT_REQUIRED",
            "RESPONSE_DEADLINE_PASSED",
            "INVALID_TASK_TRANSITION",
            "NO_SUITABLE_AGENT",
            "LOOP_DETECTED",
            "LEASE_CONFLICT",
            "APPROVAL_CLOSED",
        ],
        409,
    ),
    "PAYLOAD_TOO_LARGE": 413,
    "URI_TOO_LONG": 414,
    "REQUEST_TIMEOUT": 408,
    "HEADERS_TOO_LARGE": 431,
    "RATE_LIMITED": 429,
    "UNAVAILABLE": 503,
    "INTERNAL_ERROR": 500,
}


def from_body(status: int, body: Any) -> SwitchboardError:
    """The exception for an error body (`CoreError` in the OpenAPI document)."""
    if not isinstance(body, Mapping) or "error_code" not in body:
        return UnavailableError(
            "UNAVAILABLE",
            f"the server answered {status} without an error body",
            status=status,
        )
    code = str(body["error_code"])
    family = _FAMILIES.get(code, SwitchboardError)
    details = body.get("details")
    return family(
        code,
        str(body.get("error_message", "")),
        status=status,
        details=details if isinstance(details, Mapping) else None,
        suggested_action=str(body.get("suggested_action", "")),
    )
