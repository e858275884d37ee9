"""Schemathesis hooks: point generated requests at the caller's own resources.

Generated ids almost never name a team, agent, message or task that exists, so without
help every request would stop at 404 or 403 and the success paths would go untried.
For requests generated as valid (positive mode) these hooks swap in the real ids that
spec_fuzz.py created, and name the caller where the contract says "must be the caller".
Requests generated as invalid are left exactly as generated, so that the
negative-data check still judges what was really sent.
"""

import json
import os
import random

import schemathesis

WORLD = json.loads(os.environ["SPEC_FUZZ_WORLD"])
# The same choices on every run with the same seed.
RNG = random.Random(WORLD.get("seed", 0))

PATH_IDS = {
    "team_id": lambda: WORLD["team_id"],
    "agent_id": lambda: RNG.choice(WORLD["agents"]),
    "message_id": lambda: WORLD["message_id"],
    "task_id": lambda: RNG.choice(WORLD["tasks"]),
    "clarification_id": lambda: WORLD.get("clarification_id", "clr_unknown"),
}
CALLER_FIELDS = (
    "sender_agent_id",
    "responder_agent_id",
    "requester_agent_id",
    "originating_agent_id",
    "current_agent_id",
)


def _positive(case) -> bool:
    meta = getattr(case, "meta", None)
    if meta is None:
        return False
    return all(c.mode.name == "POSITIVE" for c in meta.components.values())


def _stateful(case) -> bool:
    # The stateful phase fills ids from real responses itself: leave its chains alone.
    meta = getattr(case, "meta", None)
    return meta is not None and "STATEFUL" in str(meta.phase.name).upper()


# URLs the server would call. Generated ones may name any host, and the server must never
# be handed a public address here: every one becomes a closed loopback port (the fuzz
# server allows private callbacks), in valid and invalid requests alike (a URL that is
# a string is never what makes a request invalid).
URL_FIELDS = ("callback_url", "card_url")
LOOPBACK = "http://127.0.0.1:9/fuzz"


def _loopback_urls(body) -> None:
    if isinstance(body, dict):
        for field in URL_FIELDS:
            if isinstance(body.get(field), str):
                body[field] = LOOPBACK


# Fields that make the server hold a request open. A valid value may be as long as the
# contract allows (60 s), far past the fuzz's 10 s request timeout, so a valid request
# would be reported as a network error; the waits themselves are tested in tests/it.
# Invalid values are left alone: the server refuses those before it waits.
WAIT_FIELDS = {"wait_seconds": 1}


def _short_waits(case) -> None:
    if not _positive(case):
        return
    # In a body (a claim, an approval's request) or in the query (a read of an approval
    # that waits for its decision: the stateful phase finds real approval ids).
    for fields in (case.body, case.query):
        if not isinstance(fields, dict):
            continue
        for field, most in WAIT_FIELDS.items():
            value = fields.get(field)
            # A whole number may come as a float (13.0), or as text in a query.
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > most:
                fields[field] = most


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    _loopback_urls(case.body)
    _short_waits(case)
    # Three in four valid requests use real ids; the rest keep the generated ones,
    # which exercise the not-found and forbidden paths.
    if not _positive(case) or _stateful(case) or RNG.random() < 0.25:
        return
    if case.method.upper() == "DELETE":
        # Removing the shared agents would turn every later request into a 404.
        return
    if case.method.upper() == "POST" and case.path.endswith(("/key", "/token")):
        # Replacing the callers' own key or token would turn every later request into
        # a 401 (rotation is tested in tests/it/rotation.rs).
        return
    for name, pick in PATH_IDS.items():
        if case.path_parameters and name in case.path_parameters:
            case.path_parameters[name] = pick()
    caller = WORLD.get("caller")
    if caller and isinstance(case.body, dict):
        for field in CALLER_FIELDS:
            if isinstance(case.body.get(field), str):
                case.body[field] = caller
        if isinstance(case.body.get("agent_id"), str) and case.path == "/v1/messages/read":
            case.body["agent_id"] = caller
        recipients = case.body.get("recipient_agent_ids")
        if isinstance(recipients, list) and recipients and recipients != ["ALL"]:
            case.body["recipient_agent_ids"] = [a for a in WORLD["agents"] if a != caller]
        if isinstance(case.body.get("target_agent_id"), str):
            case.body["target_agent_id"] = RNG.choice(
                [a for a in WORLD["agents"] if a != caller]
            )


# The refusals of a request the document allows that no JSON Schema can state, by the
# field the error names. Any other VALIDATION_ERROR or MESSAGE_TOO_LONG of a request
# generated as valid is a rule the document should have said (issue 61: generated
# clients sent 23 kinds of request the server refused).
UNSTATEABLE = {
    "cursor": "a cursor must be one the server issued for this list and order",
    "upgrade": "/v1/ws and /v1/stomp need a WebSocket upgrade, which OpenAPI cannot describe",
    "request_details.deadline": "a deadline must be in the future: it depends on the clock",
    "response_deadline": "must be in the future: it depends on the clock",
    "loop_guard.supervisor_agent_id": "must be a member of the team: state, not shape",
    "budgets": "a team's budget is at most the operator's ceiling, a server setting",
    "original_message_id": "must be the message id in the path: a rule between path and body",
    "after_seq": "refused with sort_order=newest_first or a cursor: a rule between parameters",
    "card_url": "the agent card must be fetchable (here: a closed loopback port)",
    "callback_url": "checked against the address rules when it is resolved",
    "since_timestamp": "RFC 3339 as the server reads it; the generator's date-times are wider",
    "decision": "must be one of the approval's own options: state, not shape",
    "q": "at least one letter or digit, at most 10 terms, prefixes of two: Unicode classes and counts",
    "approvers": "each must be a member of the team: state, not shape",
}


def _unstateable(field: str) -> bool:
    return any(
        field == name or field.startswith(name + ".") or field.startswith(name + "[")
        for name in UNSTATEABLE
    )


@schemathesis.check
def schema_valid_request_refused(ctx, response, case):
    """A request generated as valid is not refused for a rule the document could state."""
    if not _positive(case) or response.status_code != 400:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    code = body.get("error_code")
    if code not in ("VALIDATION_ERROR", "MESSAGE_TOO_LONG"):
        return None
    details = body.get("details") or {}
    field = str(details.get("field", "")) if isinstance(details, dict) else ""
    if _unstateable(field):
        return None
    raise AssertionError(
        f"a request the document allows was refused: {code} on {field!r}: "
        f"{body.get('error_message')}"
    )
