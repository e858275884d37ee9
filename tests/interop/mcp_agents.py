"""Two agents of one team as an MCP client sees Switchboard: the official Python MCP SDK
(`mcp`, pinned in requirements.txt) over Streamable HTTP, unmodified.

Usage: mcp_agents.py SCENARIO BASE_URL TOKEN_A TOKEN_B [SWITCHBOARD_BINARY]
Prints one JSON object with what the clients saw; exits non-zero when a check fails.
The Rust test (tests/it/mcp.rs) runs it against a real server and checks the server side.
"""

import asyncio
import contextlib
import json
import sys

import httpx2
import jsonschema
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


class Agent:
    """One MCP session with an agent's token, as any MCP host opens it."""

    def __init__(self, session, init):
        self.session = session
        self.init = init

    async def call(self, name, **arguments):
        result = await self.session.call_tool(name, arguments)
        return {"error": bool(result.is_error), "data": result.structured_content,
                "text": result.content[0].text if result.content else None}


@contextlib.asynccontextmanager
async def agent(base, token, message_handler=None, extra_headers=None):
    headers = {"Authorization": f"Bearer {token}", **(extra_headers or {})}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(base + "/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write, message_handler=message_handler) as session:
                init = await session.initialize()
                yield Agent(session, init)


async def conversation(base, token_a, token_b):
    """A lists the tools, finds B, sends it a question; B reads its inbox and answers; A
    reads the answer; refusals come back as tool errors with our error codes."""
    async with agent(base, token_a) as a, agent(base, token_b) as b:
        tools = (await a.session.list_tools()).tools
        for tool in tools:
            # Every input schema is a valid JSON Schema (2020-12) of an object.
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            assert tool.input_schema["type"] == "object", tool.name
            assert tool.description, tool.name
        schemas = {t.name: t.input_schema for t in tools}
        me = await a.call("whoami")
        found = await a.call("find_agents", capability="review")
        sent = await a.call("send_message", recipient_agent_ids=["b"], message_type="request",
                            content={"text": "Can you review PR 7?"}, requires_response=True)
        assert not sent["error"], sent
        inbox = await b.call("get_messages", unread_only=True)
        message = inbox["data"]["messages"][0]
        answered = await b.call("respond", original_message_id=message["message_id"],
                                response_content={"text": "Approved", "status": "completed"})
        assert not answered["error"], answered
        marked = await b.call("mark_read", message_ids=[message["message_id"]])
        answers = await a.call("get_messages", kinds="response")
        unknown = await a.call("send_message", recipient_agent_ids=["nobody"],
                               message_type="information", content={"text": "hello?"})
        invalid = await a.call("send_message", recipient_agent_ids=["b"],
                               message_type="gossip", content={"text": "x"})
        other = await a.call("send_message", sender_agent_id="b", recipient_agent_ids=["b"],
                             message_type="information", content={"text": "as b"})
        task = await a.call("submit_task", description="Review PR 8",
                            target_agent_id="b")
        assert not task["error"], task
        progress = await b.call("report_progress", task_id=task["data"]["task"]["task_id"],
                                result_data={"done": "half"})
        done = await b.call("complete_task", task_id=task["data"]["task"]["task_id"],
                            result_data={"verdict": "ok"})
        status = await a.call("get_task", task_id=task["data"]["task"]["task_id"])
        return {
            "server": a.init.server_info.name,
            "tools": sorted(schemas),
            "send_schema": schemas["send_message"],
            "respond_required": schemas["respond"]["required"],
            "respond_original": schemas["respond"]["properties"]["original_message_id"],
            "whoami": me["data"],
            "found": [x["agent_id"] for x in found["data"]["agents"]],
            "sent": sent["data"],
            "sent_text": sent["text"],
            "inbox_text": inbox["text"],
            "received": message,
            "answered": answered["data"],
            "marked": marked["data"],
            "answers": answers["data"]["messages"],
            "unknown": unknown,
            "invalid": invalid,
            "other": other,
            "task": task["data"],
            "progress": progress,
            "done": done,
            "status": status["data"],
        }


async def waiting(base, token_a, token_b):
    """A waits for its inbox with wait_for_messages while B sends over REST: the wait is
    released by the send; a wait with nothing coming times out with progress
    notifications; bad arguments and an oversized call are errors, not crashes."""
    progress = []

    async def on_progress(done, total, message):
        progress.append({"progress": done, "total": total, "message": message})

    async with agent(base, token_a) as a:
        loop = asyncio.get_running_loop()
        acked = {}

        async def send_later():
            await asyncio.sleep(0.5)
            async with httpx2.AsyncClient() as http:
                res = await http.post(base + "/v1/messages",
                                      headers={"Authorization": f"Bearer {token_b}"},
                                      json={"sender_agent_id": "b", "recipient_agent_ids": ["a"],
                                            "message_type": "information",
                                            "content": {"text": "wake up"}})
                acked["at"] = loop.time()
                acked["status"] = res.status_code

        sender = asyncio.create_task(send_later())
        started = loop.time()
        woken = await a.call("wait_for_messages", timeout_ms=20000)
        released = loop.time()
        await sender
        again = await a.call("wait_for_messages", timeout_ms=6000,
                             after_seq=woken["data"]["next_after_seq"])
        ticked = await a.session.call_tool("wait_for_messages", {"timeout_ms": 5500,
                                           "after_seq": woken["data"]["next_after_seq"]},
                                           progress_callback=on_progress)
        too_long = await a.call("wait_for_messages", timeout_ms=999999)
        wrong_type = await a.call("wait_for_messages", timeout_ms="soon")
        unknown_arg = await a.call("get_task", task_id="task_x", colour="blue")
        try:
            huge = await a.call("send_message", recipient_agent_ids=["b"],
                                message_type="information", content={"text": "x" * 3_000_000})
        except Exception as e:  # the SDK raises on a transport-level refusal
            huge = {"raised": type(e).__name__, "message": str(e)[:300]}
        after_huge = await a.call("whoami")
        return {
            "woken": woken,
            "blocked_ms": (released - started) * 1000,
            "release_after_ack_ms": (released - acked["at"]) * 1000,
            "ack_status": acked["status"],
            "timed_out": again["data"],
            "ticked": ticked.structured_content,
            "progress": progress,
            "too_long": too_long,
            "wrong_type": wrong_type,
            "unknown_arg": unknown_arg,
            "huge": huge,
            "after_huge": after_huge,
        }


async def setup(base, team_key, agent_token):
    """A lead holding the team key adds a helper and the helper joins with the token it
    got; an agent token cannot add agents; the prompts teach the etiquette."""
    async with agent(base, team_key) as lead, agent(base, agent_token) as member:
        added = await lead.call("register_agent", agent_id="helper", role="Helper",
                                capabilities=["search"])
        refused = await member.call("register_agent", agent_id="rogue", role="Rogue",
                                   capabilities=[])
        lead_sends = await lead.call("send_message", recipient_agent_ids=["helper"],
                                     message_type="information", content={"text": "hi"})
        prompts = (await member.session.list_prompts()).prompts
        etiquette = await member.session.get_prompt("team_etiquette")
        focused = await member.session.get_prompt("check_inbox", {"focus": "PR 9"})
        async with agent(base, added["data"]["token"]) as helper:
            me = await helper.call("whoami")
        return {
            "added": added,
            "refused": refused,
            "lead_sends": lead_sends,
            "prompts": [p.name for p in prompts],
            "etiquette": etiquette.messages[0].content.text,
            "focused": focused.messages[0].content.text,
            "helper": me["data"],
        }


async def resources(base, token_a, token_b):
    """A subscribes to its inbox, then (unsubscribed from it) to a task it gave; B's REST
    send and B's progress on the task each bring notifications/resources/updated for the
    subscribed URI only; reading shows the change."""
    updates = []
    changed = asyncio.Condition()

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/resources/updated":
            async with changed:
                updates.append(message.params.uri)
                changed.notify_all()

    async def until(uri):
        async with changed:
            await asyncio.wait_for(changed.wait_for(lambda: uri in updates), 30)

    async with agent(base, token_a, on_message) as a, \
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token_b}"}) as http:
        listed = (await a.session.list_resources()).resources
        templates = (await a.session.list_resource_templates()).resource_templates
        task = await a.call("submit_task", description="Index the docs", target_agent_id="b")
        task_id = task["data"]["task"]["task_id"]
        task_uri = f"switchboard://tasks/{task_id}"
        before = json.loads((await a.session.read_resource("switchboard://inbox")).contents[0].text)
        await a.session.subscribe_resource("switchboard://inbox")
        message = {"sender_agent_id": "b", "recipient_agent_ids": ["a"],
                   "message_type": "information", "content": {"text": "news"}}
        await http.post(base + "/v1/messages", json=message)
        await until("switchboard://inbox")
        after = json.loads((await a.session.read_resource("switchboard://inbox")).contents[0].text)
        await a.session.unsubscribe_resource("switchboard://inbox")
        await a.session.subscribe_resource(task_uri)
        await asyncio.sleep(0.3)
        async with changed:
            updates.clear()
        # Neither a message (unsubscribed) nor anything but this task's change is news.
        await http.post(base + "/v1/messages", json=message)
        await http.post(base + f"/v1/tasks/{task_id}/result",
                        json={"status": "in-progress", "result_data": {"pages": 3}})
        await until(task_uri)
        await asyncio.sleep(0.3)
        task_now = json.loads((await a.session.read_resource(task_uri)).contents[0].text)
        try:
            await a.session.read_resource("switchboard://nothing")
            missing = None
        except Exception as e:
            missing = str(e)
        return {
            "resources": [r.uri for r in listed],
            "templates": [t.uri_template for t in templates],
            "before": before["total_count"],
            "after": after["total_count"],
            "task_updates": updates,
            "task_status": task_now["task"]["status"],
            "task_id": task_id,
            "missing": missing,
        }


async def stdio(base, token_a, token_b, binary):
    """The same client over stdio, launching `switchboard mcp` as a host would (the
    server's URL and the token in the environment): tools, a conversation, a wait
    released by a REST send, a refusal, a prompt."""
    params = StdioServerParameters(command=binary, args=["mcp"],
                                   env={"SWITCHBOARD_URL": base, "SWITCHBOARD_TOKEN": token_a})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        a = Agent(session, init)
        tools = [t.name for t in (await session.list_tools()).tools]
        me = await a.call("whoami")
        sent = await a.call("send_message", recipient_agent_ids=["b"],
                            message_type="information", content={"text": "over stdio"})
        refused = await a.call("send_message", recipient_agent_ids=["nobody"],
                               message_type="information", content={"text": "x"})

        async def send_later():
            await asyncio.sleep(0.5)
            async with httpx2.AsyncClient() as http:
                await http.post(base + "/v1/messages",
                                headers={"Authorization": f"Bearer {token_b}"},
                                json={"sender_agent_id": "b", "recipient_agent_ids": ["a"],
                                      "message_type": "information",
                                      "content": {"text": "back over REST"}})

        later = asyncio.create_task(send_later())
        woken = await a.call("wait_for_messages", timeout_ms=20000)
        await later
        prompt = await session.get_prompt("team_etiquette")
        return {
            "server": init.server_info.name,
            "tools": len(tools),
            "whoami": me["data"],
            "sent": sent["data"],
            "refused": refused["data"],
            "woken": woken["data"],
            "prompt": prompt.messages[0].content.text[:40],
        }


async def isolation(base, token_a, token_x, task_of_x):
    """An agent of one team reaches nothing of another: not its agents, not its tasks,
    not as a resource."""
    async with agent(base, token_a) as a:
        to_x = await a.call("send_message", recipient_agent_ids=["x"],
                            message_type="information", content={"text": "hello, other team"})
        task = await a.call("get_task", task_id=task_of_x)
        found = await a.call("find_agents")
        try:
            await a.session.read_resource(f"switchboard://tasks/{task_of_x}")
            resource = None
        except Exception as e:
            resource = str(e)
        return {"to_x": to_x["data"], "task": task["data"],
                "found": [x["agent_id"] for x in found["data"]["agents"]],
                "resource": resource}


def find_key(value, key):
    """The first value of `key` anywhere in a JSON value."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = find_key(item, key)
            if found is not None:
                return found
    return None


async def every_tool(base, token_a, token_b, token_c):
    """The tools the conversation does not use, each once, as three agents: broadcast,
    assistance, publish and watch, one message read, and a task asked about, answered,
    handed off and failed, another cancelled."""
    async with agent(base, token_a) as a, agent(base, token_b) as b, agent(base, token_c) as c:
        r = {}
        r["broadcast"] = await a.call("broadcast", update_type="progress", urgency="info",
                                      content={"summary": "halfway there"})
        r["assistance"] = await a.call("request_assistance", assistance_type="review",
                                       required_capabilities=["review"],
                                       request_details={"description": "look at PR 10"})
        r["set_watch"] = await b.call("set_watch", watch=["lint"])
        r["publish"] = await a.call("publish", cause_by="lint", content={"text": "3 warnings"})
        inbox = await b.call("get_messages", kinds="broadcast")
        r["get_message"] = await b.call("get_message",
                                        message_id=inbox["data"]["messages"][0]["message_id"])
        task = await a.call("submit_task", description="Fix the build", target_agent_id="b")
        task_id = task["data"]["task"]["task_id"]
        r["ask"] = await b.call("ask_clarification", task_id=task_id, question="Which branch?")
        r["answer"] = await a.call("answer_clarification", task_id=task_id,
                                   clarification_id=find_key(r["ask"]["data"], "clarification_id"),
                                   answer="main")
        r["hand_off"] = await b.call("hand_off", task_id=task_id, new_agent_id="c",
                                     reason="c owns the build")
        r["fail"] = await c.call("fail_task", task_id=task_id, result_data={"why": "no access"})
        other = await a.call("submit_task", description="Not needed after all",
                             target_agent_id="b")
        r["cancel"] = await a.call("cancel_task", task_id=other["data"]["task"]["task_id"],
                                   reason="changed plans")
        r["list"] = await a.call("list_tasks", role="originated")
        return r


async def listening(base, token_a, token_b):
    """The 2026-07-28 revision's `subscriptions/listen` (the SDK's high-level Client,
    stateless requests): the inbox and a task, updated by a REST send and by the task's
    progress; an unknown URI is not honored."""
    headers = {"Authorization": f"Bearer {token_a}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token_b}"}) as rest:
        transport = streamable_http_client(base + "/mcp", http_client=http)
        async with Client(transport, mode="auto") as client:
            version = client.session.protocol_version
            task = await client.call_tool("submit_task", {"description": "Tag the release",
                                                          "target_agent_id": "b"})
            task_id = task.structured_content["task"]["task_id"]
            task_uri = f"switchboard://tasks/{task_id}"
            wanted = ["switchboard://inbox", task_uri, "switchboard://bogus"]
            seen = []
            async with client.listen(resource_subscriptions=wanted) as sub:
                honored = list(sub.honored.resource_subscriptions or [])
                events = aiter(sub)
                # The stream reports changes from when it serves, just after the ack.
                await asyncio.sleep(0.3)
                await rest.post(base + "/v1/messages", json={
                    "sender_agent_id": "b", "recipient_agent_ids": ["a"],
                    "message_type": "information", "content": {"text": "ping"}})
                while "switchboard://inbox" not in seen:
                    seen.append((await asyncio.wait_for(anext(events), 30)).uri)
                await rest.post(base + f"/v1/tasks/{task_id}/result",
                                json={"status": "success", "result_data": {"tag": "v1"}})
                while task_uri not in seen:
                    seen.append((await asyncio.wait_for(anext(events), 30)).uri)
            return {"version": version, "honored": honored, "seen": seen, "task_uri": task_uri}


async def loop(base, token_a, token_b):
    """A and B answer each other (`in_reply_to`); with the team's `max_hops` at 2, A's
    answer to B's answer is refused: a tool error carrying LOOP_DETECTED."""
    async with agent(base, token_a) as a, agent(base, token_b) as b:
        first = await a.call("send_message", recipient_agent_ids=["b"],
                             message_type="request", content={"text": "ping"})
        second = await b.call("send_message", recipient_agent_ids=["a"],
                              message_type="response", content={"text": "pong"},
                              in_reply_to=first["data"]["message_id"])
        third = await a.call("send_message", recipient_agent_ids=["b"],
                             message_type="response", content={"text": "ping again"},
                             in_reply_to=second["data"]["message_id"])
        return {"first": first["error"], "second": second["error"], "third": third}


async def traced(base, token_a, token_b):
    """A's MCP host is instrumented: its HTTP client sends a W3C `traceparent` with every
    request of the session. What A sends joins that trace; B reads it with the
    `traceparent` naming A's message."""
    trace = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
             "tracestate": "congo=t61rcWkgMzE"}
    async with agent(base, token_a, extra_headers=trace) as a, agent(base, token_b) as b:
        sent = await a.call("send_message", recipient_agent_ids=["b"],
                            message_type="request", content={"text": "traced"})
        inbox = await b.call("get_messages")
        return {"sent": sent["data"]["message_id"], "read": inbox["data"]["messages"][0]}


async def leases(base, token_a, token_b):
    """A coding agent's day with leases, through the stock SDK: A takes src/**, B meets
    the conflict (a tool error with our code and the holder), lists who holds what, and
    gets the file once A releases; B renews its lease."""
    async with agent(base, token_a) as a, agent(base, token_b) as b:
        taken = await a.call("acquire_lease", resource="src/**", ttl_seconds=600,
                             reason="refactor")
        assert not taken["error"], taken
        conflict = await b.call("acquire_lease", resource="src/main.rs")
        held = await b.call("list_leases", resource="src/main.rs")
        released = await a.call("release_lease", lease_id=taken["data"]["lease"]["lease_id"])
        mine = await b.call("acquire_lease", resource="src/main.rs", exclusive=True)
        assert not mine["error"], mine
        extended = await b.call("extend_lease", lease_id=mine["data"]["lease"]["lease_id"],
                                ttl_seconds=900)
        bad = await b.call("acquire_lease", resource="src//x")
        return {"taken": taken["data"], "conflict": conflict, "held": held["data"],
                "released": released["data"], "mine": mine["data"],
                "extended": extended["data"], "bad": bad}


async def offer_heard(base, token_b, offer):
    """B listens to its inbox (`subscriptions/listen`, no live connection) while `offer()`
    offers a task to its role: the offer reaches its inbox, as it reaches a connected
    agent's. Answers what `offer()` answered and the TaskOffer entries B then reads."""
    headers = {"Authorization": f"Bearer {token_b}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(base + "/mcp", http_client=http)
        async with Client(transport, mode="auto") as client:
            async with client.listen(resource_subscriptions=["switchboard://inbox"]) as sub:
                events = aiter(sub)
                await asyncio.sleep(0.3)
                offered = await offer()
                while (await asyncio.wait_for(anext(events), 30)).uri != "switchboard://inbox":
                    pass
            inbox = await client.call_tool("get_messages", {})
    entries = inbox.structured_content["messages"]
    return offered, [m for m in entries if m["content"]["text"].startswith("TaskOffer")]


async def claims(base, token_a, token_b):
    """Work offered to a role, through the stock SDK: A offers a task to B's role while B
    listens (B hears the offer), B claims it, reports progress, gives it back, claims it
    again (its second attempt) and completes it; a further claim finds nothing."""
    async with agent(base, token_a) as a, agent(base, token_b) as b:
        offered, heard = await offer_heard(base, token_b, lambda: a.call(
            "submit_task", description="Triage the new issues", assignee_role="role of b"))
        first = await b.call("claim_task", wait_seconds=5, lease_seconds=120)
        task_id = first["data"]["task"]["task_id"]
        progress = await b.call("report_progress", task_id=task_id, result_data={"done": 3})
        extended = await b.call("extend_claim", task_id=task_id, lease_seconds=600)
        released = await b.call("release_task", task_id=task_id, reason="lunch")
        second = await b.call("claim_task")
        done = await b.call("complete_task", task_id=task_id, result_data={"triaged": 12})
        empty = await b.call("claim_task")
        return {"offered": offered["data"], "heard": heard, "first": first["data"],
                "progress": progress, "extended": extended["data"],
                "released": released["data"], "second": second["data"], "done": done["data"],
                "empty": empty["data"]}


async def approvals(base, token_a, token_b):
    """A asks a person over the stock SDK and waits in one tool call (`request_approval`);
    B, an approver, finds it with `list_approvals` and decides it with `decide_approval`:
    A's call returns the decision. A deciding its own is refused."""
    async with agent(base, token_a) as a, agent(base, token_b) as b:
        async def approver():
            for _ in range(200):
                listed = await b.call("list_approvals", status="pending")
                if listed["data"]["approvals"]:
                    found = listed["data"]["approvals"][0]
                    return await b.call("decide_approval", approval_id=found["approval_id"],
                                        decision="approve", comment="go ahead")
                await asyncio.sleep(0.05)
            raise AssertionError("no pending approval")

        asked, decided = await asyncio.gather(
            a.call("request_approval", summary="Deploy 4.2?", wait_seconds=20), approver())
        approval_id = asked["data"]["approval"]["approval_id"]
        read = await a.call("get_approval", approval_id=approval_id)
        own = await a.call("decide_approval", approval_id=approval_id, decision="deny")
        return {"asked": asked, "decided": decided, "read": read["data"], "own": own}


SCENARIOS = {"approvals": approvals, "leases": leases, "claims": claims, "traced": traced, "loop": loop, "every_tool": every_tool, "listening": listening, "conversation": conversation, "waiting": waiting, "setup": setup,
             "resources": resources, "stdio": stdio, "isolation": isolation}


def main():
    scenario, base, token_a, token_b, *more = sys.argv[1:]
    result = asyncio.run(SCENARIOS[scenario](base, token_a, token_b, *more))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
