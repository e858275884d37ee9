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


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    # Three in four valid requests use real ids; the rest keep the generated ones,
    # which exercise the not-found and forbidden paths.
    if not _positive(case) or _stateful(case) or RNG.random() < 0.25:
        return
    if case.method.upper() == "DELETE":
        # Removing the shared agents would turn every later request into a 404.
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
