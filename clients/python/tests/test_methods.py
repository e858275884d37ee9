"""Every generated method, called once against the real server, with what it answered
checked field by field as a typed object."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

from switchboard_client import AsyncClient, Client, models

from .conftest import Team, make_team
from .server import ADMIN, Server

HERE = Path(__file__)


def test_messages_and_publish_watch(team: Team) -> None:
    with team.client("planner") as planner, team.client("coder") as coder:
        assert coder.whoami().agent_id == "coder"
        sent = planner.send_message(
            sender_agent_id="planner",
            recipient_agent_ids=["coder"],
            message_type="request",
            content=models.Content(text="Review the parser change", data={"pr": 42}),
            requires_response=True,
            thread_id="parser",
        )
        assert isinstance(sent, models.SendResult)
        assert sent.delivery_status.pending_delivery == ["coder"]
        page = coder.get_messages(unread_only=True, thread_id="parser")
        (entry,) = page.messages
        assert isinstance(entry, models.MessageView)
        assert (entry.sender_agent_id, entry.content.text, entry.priority) == (
            "planner",
            "Review the parser change",
            "normal",
        )
        detail = coder.get_message(message_id=sent.message_id)
        assert detail.message.message_id == sent.message_id
        read = coder.mark_message_read(agent_id="coder", message_ids=[sent.message_id])
        assert read.marked_read == [sent.message_id]
        answered = coder.respond_to_message(
            original_message_id=sent.message_id,
            responder_agent_id="coder",
            response_content={"text": "Looks good", "status": "completed"},
        )
        assert answered.success and answered.original_message_updated
        update = planner.broadcast_update(
            sender_agent_id="planner",
            update_type="progress",
            urgency="info",
            content={"summary": "Parser reviewed", "details": "No findings"},
        )
        assert update.success and sorted(update.recipients) == ["coder", "tester"]
        help_asked = planner.request_assistance(
            requester_agent_id="planner",
            assistance_type="review",
            required_capabilities=["python"],
            request_details={"description": "A second pair of eyes", "context": "parser"},
        )
        assert help_asked.potential_responders[0].agent_id == "coder"
        found = coder.search_messages(q="parser")
        assert sent.message_id in [hit.message.message_id for hit in found.results]
        watched = coder.set_watch(watch=["WriteDesign"])
        assert watched.agent.watch == ["WriteDesign"]
        published = planner.publish(cause_by="WriteDesign", content={"text": "design v1"})
        assert published.success and published.news_for == ["coder"]
        assert coder.get_activity().team_id == team.team_id
        trace = planner.get_trace(trace_id=detail.message.traceparent.split("-")[1])  # type: ignore[union-attr]
        assert sent.message_id in [hop.message_id for hop in trace.hops]


def test_tasks(team: Team) -> None:
    with team.client("planner") as planner, team.client("coder") as coder:
        submitted = planner.submit_task(
            task_id="parse-logs",
            originating_agent_id="planner",
            description="Count the 5xx responses",
            data={"day": "2026-11-21"},
            required_capabilities=["python"],
        )
        assert submitted.task_response.status == "in-progress"
        assert submitted.task is not None and submitted.task.assignee_agent_id == "coder"
        asked = coder.request_clarification(task_id="parse-logs", question="Which timezone?")
        clarification = asked.task.open_clarification
        assert asked.task.status == "input-required" and clarification is not None
        planner.answer_clarification(
            task_id="parse-logs", clarification_id=clarification.clarification_id, answer="UTC"
        )
        assert coder.report_task(task_id="parse-logs", status="in-progress").task.status == (
            "in-progress"
        )
        handed = coder.handoff_task(task_id="parse-logs", new_agent_id="tester", reason="tooling")
        assert handed.task.assignee_agent_id == "tester"
        with team.client("tester") as tester:
            done = tester.report_task(
                task_id="parse-logs", status="success", result_data={"count": 4}
            )
        assert done.task.status == "success" and done.task.result_data == {"count": 4}
        detail = planner.get_task(task_id="parse-logs")
        kinds = [event.kind for event in detail.events]
        assert kinds[0] == "submitted" and "handed_off" in kinds and kinds[-1] == "succeeded"
        assert detail.task.context[0].answer == "UTC"
        listed = planner.list_tasks(role="originated")
        assert [t.task_id for t in listed.tasks] == ["parse-logs"]
        planner.submit_task(task_id="stale", originating_agent_id="planner", description="x")
        assert planner.cancel_task(task_id="stale", reason="not needed").task.status == "canceled"
    with Client(team.url, token=team.team_key) as operator:
        canceled = operator.team_tasks(team_id=team.team_id, status="canceled")
        assert [t.task_id for t in canceled.tasks] == ["stale"]


def test_claims_leases_and_approvals(team: Team) -> None:
    with team.client("planner") as planner, team.client("coder") as coder:
        planner.submit_task(
            task_id="role-task",
            originating_agent_id="planner",
            description="Anyone who codes",
            assignee_role="Coder",
        )
        claimed = coder.claim_task(wait_seconds=0, lease_seconds=60)
        assert claimed.task is not None and claimed.task.task_id == "role-task"
        assert coder.extend_claim(task_id="role-task", lease_seconds=120).task.attempts == 1
        released = coder.release_task(task_id="role-task", reason="busy")
        assert released.task.status == "open"
        lease = coder.acquire_lease(team_id=team.team_id, resource="src/**", ttl_seconds=60)
        assert lease.lease.holder == "coder"
        extended = coder.extend_lease(team_id=team.team_id, lease_id=lease.lease.lease_id)
        assert extended.lease.lease_id == lease.lease.lease_id
        listed = planner.list_leases(team_id=team.team_id, holder="coder")
        assert [item.resource for item in listed.leases] == ["src/**"]
        gone = coder.release_lease(team_id=team.team_id, lease_id=lease.lease.lease_id)
        assert gone.lease.lease_id == lease.lease.lease_id
        asked = coder.request_approval(summary="Deploy to staging?")
        assert asked.approval.status == "pending"
        assert [a.approval_id for a in coder.list_approvals(status="pending").approvals] == [
            asked.approval.approval_id
        ]
        with Client(team.url, token=team.team_key) as operator:
            decided = operator.decide_approval(
                approval_id=asked.approval.approval_id, decision="approve", comment="go"
            )
        assert decided.approval.decision == "approve"
        seen = coder.get_approval(approval_id=asked.approval.approval_id, wait_seconds=0)
        assert (seen.approval.status, seen.approval.comment) == ("decided", "go")


def test_teams_and_agents(server: Server) -> None:
    team = make_team(server.url)
    other = make_team(server.url)
    with Client(server.url, token=ADMIN) as admin:
        assert team.team_id in [t.team_id for t in admin.list_teams().teams]
        assert admin.health().status == "ok"
        created = admin.create_team(name="Made by the test")
        assert created.team_id and created.team_key
    with Client(server.url, token=team.team_key) as operator:
        assert operator.get_team(team_id=team.team_id).team_id == team.team_id
        updated = operator.update_team(team_id=team.team_id, max_attempts=5)
        assert updated.max_attempts == 5
        agents = operator.list_agents(team_id=team.team_id, capability="python")
        assert [a.agent_id for a in agents.agents] == ["coder"]
        operator.register_agent(
            team_id=team.team_id, agent_id="reviewer", role="Reviewer", capabilities=["review"]
        )
        changed = operator.update_agent(team_id=team.team_id, agent_id="reviewer", status="busy")
        assert changed.agent.status == "busy"
        assert operator.get_agent(team_id=team.team_id, agent_id="reviewer").agent.role == (
            "Reviewer"
        )
        rotated = operator.rotate_agent_token(team_id=team.team_id, agent_id="reviewer")
        with Client(server.url, token=rotated.token) as reviewer:
            assert reviewer.whoami().agent_id == "reviewer"
        removed = operator.remove_agent(team_id=team.team_id, agent_id="reviewer")
        assert removed.agent_id == "reviewer"
        secret = operator.get_callback_secret(team_id=team.team_id)
        assert operator.rotate_callback_secret(team_id=team.team_id).secret != secret.secret
        # An outside A2A agent: the other team's coder, by its card on this server.
        card = f"{server.url}/a2a/{other.team_id}/coder/.well-known/agent-card.json"
        remote = operator.register_remote_agent(
            team_id=team.team_id,
            card_url=card,
            agent_id="outside-coder",
            authorization=f"Bearer {other.tokens['planner']}",
        )
        assert remote.agent.agent_id == "outside-coder"
        assert operator.team_activity(team_id=team.team_id).team_id == team.team_id
        assert operator.team_metrics(team_id=team.team_id).team_id == team.team_id
        assert operator.team_messages(team_id=team.team_id, limit=10).entries == []
        key = operator.rotate_team_key(team_id=team.team_id)
    with Client(server.url, token=key.team_key) as operator:
        assert operator.get_team(team_id=team.team_id).team_id == team.team_id


def test_async_client(team: Team) -> None:
    async def scenario() -> None:
        async with (
            AsyncClient(team.url, token=team.tokens["planner"]) as planner,
            AsyncClient(team.url, token=team.tokens["coder"]) as coder,
        ):
            sends = [
                planner.send_message(
                    sender_agent_id="planner",
                    recipient_agent_ids=["coder"],
                    message_type="information",
                    content={"text": f"note {n}"},
                )
                for n in range(20)
            ]
            results = await asyncio.gather(*sends)
            assert len({r.message_id for r in results}) == 20
            page = await coder.get_messages(limit=100)
            assert page.total_count == 20

    asyncio.run(scenario())


def test_every_method_is_called() -> None:
    """Each operation the generator wrote is called by a test in this file."""
    called = {
        node.func.attr
        for node in ast.walk(ast.parse(HERE.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    methods = {name for name in vars(Client) | vars(Client.__mro__[1]) if not name.startswith("_")}
    operations = methods - {"url", "token", "listen", "close"}
    assert operations - called == set()
