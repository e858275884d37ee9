"""`AsyncClient(transport="websocket")`: every operation that is a frame, over one
connection, answering the same typed objects and refusals as over HTTP."""

from __future__ import annotations

import asyncio

import pytest

from switchboard_client import AsyncClient, ConflictError, InvalidRequestError, NotFoundError

from .conftest import Team


def test_the_frames_answer_what_rest_answers(team: Team) -> None:
    async def scenario() -> None:
        async with (
            AsyncClient(team.url, token=team.tokens["planner"], transport="websocket") as planner,
            AsyncClient(team.url, token=team.tokens["coder"], transport="websocket") as coder,
            # The hub is the agents': a team key's client stays on HTTP.
            AsyncClient(team.url, token=team.team_key) as operator,
        ):
            sent = await planner.send_message(
                sender_agent_id="planner",
                recipient_agent_ids=["coder"],
                message_type="request",
                content={"text": "Review the parser", "data": {"pr": 42}},
                requires_response=True,
            )
            page = await coder.get_messages(unread_only=True)
            assert [m.message_id for m in page.messages] == [sent.message_id]
            assert (await coder.get_message(message_id=sent.message_id)).message.content.data == {
                "pr": 42
            }
            read = await coder.mark_message_read(agent_id="coder", message_ids=[sent.message_id])
            assert read.marked_read == [sent.message_id]
            answered = await coder.respond_to_message(
                original_message_id=sent.message_id,
                responder_agent_id="coder",
                response_content={"text": "Looks good", "status": "completed"},
            )
            assert answered.original_message_updated
            update = await planner.broadcast_update(
                sender_agent_id="planner",
                update_type="progress",
                urgency="info",
                content={"summary": "Reviewed", "details": "No findings"},
            )
            assert update.success
            helpers = await planner.request_assistance(
                requester_agent_id="planner",
                assistance_type="review",
                required_capabilities=["python"],
                request_details={"description": "eyes"},
            )
            assert helpers.potential_responders[0].agent_id == "coder"
            assert (await coder.search_messages(q="parser")).results
            await coder.set_watch(watch=["design"])
            assert (await planner.publish(cause_by="design", content={"text": "v1"})).news_for == [
                "coder"
            ]
            assert (await coder.get_activity()).team_id == team.team_id
            submitted = await planner.submit_task(
                task_id="ws-task",
                originating_agent_id="planner",
                description="count",
                target_agent_id="coder",
            )
            assert submitted.task_response.status == "in-progress"
            asked = await coder.request_clarification(task_id="ws-task", question="Which?")
            question = asked.task.open_clarification
            assert question is not None
            await planner.answer_clarification(
                task_id="ws-task", clarification_id=question.clarification_id, answer="All"
            )
            await coder.report_task(task_id="ws-task", status="in-progress")
            await coder.handoff_task(task_id="ws-task", new_agent_id="tester", reason="tests")
            assert (await planner.get_task(task_id="ws-task")).task.assignee_agent_id == "tester"
            assert [t.task_id for t in (await planner.list_tasks(role="originated")).tasks] == [
                "ws-task"
            ]
            assert (await planner.cancel_task(task_id="ws-task")).task.status == "canceled"
            await planner.submit_task(
                task_id="ws-role",
                originating_agent_id="planner",
                description="x",
                assignee_role="Coder",
            )
            claimed = await coder.claim_task(wait_seconds=0)
            assert claimed.task is not None and claimed.task.task_id == "ws-role"
            await coder.extend_claim(task_id="ws-role", lease_seconds=60)
            assert (await coder.release_task(task_id="ws-role")).task.status == "open"
            lease = await coder.acquire_lease(team_id=team.team_id, resource="src/**")
            await coder.extend_lease(team_id=team.team_id, lease_id=lease.lease.lease_id)
            assert (await coder.list_leases(team_id=team.team_id)).leases
            await coder.release_lease(team_id=team.team_id, lease_id=lease.lease.lease_id)
            approval = await coder.request_approval(summary="Ship it?")
            assert (await coder.list_approvals(status="pending")).approvals
            decided = await operator.decide_approval(
                approval_id=approval.approval.approval_id, decision="approve"
            )
            assert decided.approval.decision == "approve"
            got = await coder.get_approval(approval_id=approval.approval.approval_id)
            assert got.approval.status == "decided"
            # A team operation is not a frame: it goes over HTTP, on the same client.
            assert (await coder.list_agents(team_id=team.team_id)).total_count == 3

    asyncio.run(scenario())


def test_refusals_over_the_socket_are_the_same(team: Team) -> None:
    async def scenario() -> None:
        async with AsyncClient(
            team.url, token=team.tokens["planner"], transport="websocket"
        ) as planner:
            with pytest.raises(InvalidRequestError) as refused:
                await planner.send_message(
                    sender_agent_id="planner",
                    recipient_agent_ids=["nobody"],
                    message_type="information",
                    content={"text": "hi"},
                )
            assert (refused.value.error_code, refused.value.status) == ("INVALID_RECIPIENT", 400)
            assert refused.value.details["invalid_ids"] == ["nobody"]
            with pytest.raises(NotFoundError) as missing:
                await planner.get_task(task_id="nope")
            assert (missing.value.error_code, missing.value.status) == ("TASK_NOT_FOUND", 404)
            await planner.acquire_lease(team_id=team.team_id, resource="a/**")
        async with AsyncClient(team.url, token=team.tokens["coder"], transport="websocket") as c:
            with pytest.raises(ConflictError) as conflict:
                await c.acquire_lease(team_id=team.team_id, resource="a/b")
            assert (conflict.value.error_code, conflict.value.status) == ("LEASE_CONFLICT", 409)

    asyncio.run(scenario())


def test_sends_without_keys(team: Team) -> None:
    """`idempotency_keys=False`: each send is its own message (no key to make two one)."""

    async def scenario() -> int:
        async with AsyncClient(
            team.url, token=team.tokens["planner"], transport="websocket", idempotency_keys=False
        ) as planner:
            for _ in range(3):
                await planner.send_message(
                    sender_agent_id="planner",
                    recipient_agent_ids=["coder"],
                    message_type="information",
                    content={"text": "same words"},
                )
        async with AsyncClient(team.url, token=team.tokens["coder"]) as coder:
            return (await coder.get_messages()).total_count

    assert asyncio.run(scenario()) == 3
