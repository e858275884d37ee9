"""Refusals raise `SwitchboardError` subclasses carrying the server's error body as sent;
retries happen only where sending twice cannot do anything twice."""

from __future__ import annotations

import asyncio

import pytest

from switchboard_client import (
    AsyncClient,
    AuthenticationError,
    Client,
    ConflictError,
    ConnectionFailed,
    InvalidRequestError,
    NotFoundError,
    SwitchboardError,
    UnavailableError,
)

from .conftest import Team
from .server import free_port


def test_unknown_recipient_carries_the_error_body(team: Team) -> None:
    with team.client("planner") as planner, pytest.raises(InvalidRequestError) as refused:
        planner.send_message(
            sender_agent_id="planner",
            recipient_agent_ids=["nobody"],
            message_type="information",
            content={"text": "hello"},
        )
    error = refused.value
    assert isinstance(error, SwitchboardError)
    assert (error.error_code, error.status) == ("INVALID_RECIPIENT", 400)
    assert error.details["invalid_ids"] == ["nobody"]
    assert error.suggested_action


def test_validation_error_names_the_field(team: Team) -> None:
    with team.client("planner") as planner, pytest.raises(InvalidRequestError) as refused:
        planner.send_message(
            sender_agent_id="planner",
            recipient_agent_ids=["coder"],
            message_type="information",
            content={"text": "x" * 2001},
        )
    assert refused.value.error_code == "MESSAGE_TOO_LONG"
    assert refused.value.status == 400


def test_not_found(team: Team) -> None:
    with team.client("planner") as planner, pytest.raises(NotFoundError) as refused:
        planner.get_task(task_id="no-such-task")
    assert (refused.value.error_code, refused.value.status) == ("TASK_NOT_FOUND", 404)


def test_wrong_token(team: Team) -> None:
    with (
        Client(team.url, token="not-a-token") as stranger,
        pytest.raises(AuthenticationError) as refused,
    ):
        stranger.whoami()
    assert (refused.value.error_code, refused.value.status) == ("UNAUTHORIZED", 401)


def test_forbidden(team: Team) -> None:
    with team.client("coder") as coder, pytest.raises(AuthenticationError) as refused:
        coder.send_message(
            sender_agent_id="planner",
            recipient_agent_ids=["tester"],
            message_type="information",
            content={"text": "in someone else's name"},
        )
    assert (refused.value.error_code, refused.value.status) == ("FORBIDDEN", 403)


def test_conflict(team: Team) -> None:
    with team.client("coder") as coder, team.client("tester") as tester:
        coder.acquire_lease(team_id=team.team_id, resource="src/**")
        with pytest.raises(ConflictError) as refused:
            tester.acquire_lease(team_id=team.team_id, resource="src/main.rs")
    assert (refused.value.error_code, refused.value.status) == ("LEASE_CONFLICT", 409)
    assert refused.value.details["conflicts"][0]["holder"] == "coder"


def test_decided_twice(team: Team) -> None:
    with team.client("coder") as coder, Client(team.url, token=team.team_key) as operator:
        asked = coder.request_approval(summary="Merge?")
        operator.decide_approval(approval_id=asked.approval.approval_id, decision="approve")
        with pytest.raises(ConflictError) as refused:
            operator.decide_approval(approval_id=asked.approval.approval_id, decision="deny")
    assert refused.value.error_code == "APPROVAL_CLOSED"


def test_a_send_with_one_key_is_stored_once(team: Team) -> None:
    with team.client("planner") as planner, team.client("coder") as coder:
        first, second = (
            planner.send_message(
                sender_agent_id="planner",
                recipient_agent_ids=["coder"],
                message_type="information",
                content={"text": "once"},
                idempotency_key="the-same-send",
            )
            for _ in range(2)
        )
        assert first.message_id == second.message_id
        assert coder.get_messages().total_count == 1


def test_no_server_is_connection_failed_after_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, token="x", retries=2) as nowhere, pytest.raises(ConnectionFailed) as failed:
        nowhere.whoami()
    assert isinstance(failed.value, UnavailableError)
    assert (failed.value.error_code, failed.value.status) == ("UNAVAILABLE", 0)

    async def asynchronous() -> None:
        async with AsyncClient(url, token="x", retries=1) as nowhere:
            await nowhere.whoami()

    with pytest.raises(ConnectionFailed):
        asyncio.run(asynchronous())
