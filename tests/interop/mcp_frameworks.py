"""What a model reads of Switchboard's tools through the agent frameworks' own MCP
adapters, unmodified: LangChain (`langchain-mcp-adapters`, pinned in
requirements-frameworks.txt: its own virtualenv, since it needs `mcp` 1.x) and Agno
(`MCPTools`, pinned in requirements.txt beside `mcp` 2.x).

Both adapters hand a model only a tool result's text blocks, never `structuredContent`;
so for each, agent A sends B a message, B reads its inbox, and A sends to an agent that
does not exist — all through the adapter — and the text the model would receive is
printed for the Rust test (tests/it/mcp.rs) to check: the message, its id, its delivery
status, and the refusal's code and details.

CrewAI (`MCPServerAdapter`) and Google ADK (`McpToolset`) each need a virtualenv of their
own (requirements-crewai.txt, requirements-adk.txt): their pins conflict with the others'.

Usage: mcp_frameworks.py langchain|agno|crewai|adk BASE_URL TOKEN_A TOKEN_B
"""

import asyncio
import contextlib
import json
import sys

from mcp.client.session import ClientSession


@contextlib.asynccontextmanager
async def session(base, token):
    """An MCP session as each SDK line opens one (1.x: headers; 2.x: an HTTP client)."""
    headers = {"Authorization": f"Bearer {token}"}
    try:
        from mcp.client.streamable_http import streamablehttp_client
    except ImportError:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            async with streamable_http_client(base + "/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as opened:
                    await opened.initialize()
                    yield opened
        return
    async with streamablehttp_client(base + "/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as opened:
            await opened.initialize()
            yield opened


async def exchange(call, tools_a, tools_b, n):
    """A sends B a question, B reads its inbox, A sends to nobody: what the model reads
    of each, through the adapter's own `call`."""
    return {
        "sent": await call(tools_a, "send_message", {
            "recipient_agent_ids": ["b"], "message_type": "request",
            "content": {"text": f"{n} question"}, "requires_response": True}),
        "inbox": await call(tools_b, "get_messages", {"unread_only": True}),
        "refused": await call(tools_a, "send_message", {
            "recipient_agent_ids": ["nobody"], "message_type": "information",
            "content": {"text": "hello?"}}),
    }


async def langchain_texts(base, token_a, token_b, n):
    """Each call as a model's tool call: the ToolMessage's content is what it reads."""
    from langchain_mcp_adapters.tools import load_mcp_tools

    async def call(tools, name, args):
        tool = next(t for t in tools if t.name == name)
        message = await tool.ainvoke({"type": "tool_call", "id": f"call-{name}", "name": name, "args": args})
        content = message.content
        if isinstance(content, str):
            return content
        return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))

    async with session(base, token_a) as a, session(base, token_b) as b:
        tools_a, tools_b = await load_mcp_tools(a), await load_mcp_tools(b)
        return {"tools": len(tools_a), **await exchange(call, tools_a, tools_b, n)}


async def agno_texts(base, token_a, token_b, n):
    """Each call through the toolkit's function entrypoint: its ToolResult's content is
    what Agno puts before the model."""
    from agno.tools.mcp import MCPTools

    async def toolkit(opened):
        tools = MCPTools(session=opened)
        await tools.initialize()
        return tools

    async def call(tools, name, args):
        result = await tools.functions[name].entrypoint(**args)
        return result.content if hasattr(result, "content") else str(result)

    async with session(base, token_a) as a, session(base, token_b) as b:
        tools_a, tools_b = await toolkit(a), await toolkit(b)
        return {"tools": len(tools_a.functions), **await exchange(call, tools_a, tools_b, n)}


def crewai_texts(base, token_a, token_b, n):
    """CrewAI's `MCPServerAdapter` (crewai-tools, through mcpadapt): each tool is a CrewAI
    tool whose `run` returns what the agent's model reads. Synchronous, as CrewAI's
    tools are: the adapter runs the MCP session on a thread of its own."""
    from crewai_tools import MCPServerAdapter

    def params(token):
        return {"url": base + "/mcp", "transport": "streamable-http",
                "headers": {"Authorization": f"Bearer {token}"}}

    async def call(tools, name, args):
        tool = next(t for t in tools if t.name == name)
        return str(tool.run(**args))

    with MCPServerAdapter(params(token_a), connect_timeout=30) as tools_a, \
            MCPServerAdapter(params(token_b), connect_timeout=30) as tools_b:
        texts = asyncio.run(exchange(call, list(tools_a), list(tools_b), n))
        return {"tools": len(list(tools_a)), **texts}


async def adk_texts(base, token_a, token_b, n):
    """Google ADK's `McpToolset`: a tool's run answers the whole `CallToolResult` as a
    dict, which ADK hands the model as the function response; its text block is what a
    model reads first, and what is checked."""
    from google.adk.tools.mcp_tool.mcp_session_manager import StreamableHTTPConnectionParams
    from google.adk.tools.mcp_tool.mcp_toolset import McpToolset

    def toolset(token):
        return McpToolset(connection_params=StreamableHTTPConnectionParams(
            url=base + "/mcp", headers={"Authorization": f"Bearer {token}"}))

    async def call(tools, name, args):
        tool = next(t for t in tools if t.name == name)
        result = await tool._run_async_impl(args=args, tool_context=None, credential=None)
        return "\n".join(block.get("text", "") for block in result.get("content", []))

    set_a, set_b = toolset(token_a), toolset(token_b)
    try:
        tools_a, tools_b = await set_a.get_tools(), await set_b.get_tools()
        return {"tools": len(tools_a), **await exchange(call, tools_a, tools_b, n)}
    finally:
        await set_a.close()
        await set_b.close()


FRAMEWORKS = {"langchain": langchain_texts, "agno": agno_texts, "adk": adk_texts}
SYNC_FRAMEWORKS = {"crewai": crewai_texts}

if __name__ == "__main__":
    framework, base, token_a, token_b = sys.argv[1:5]
    if framework in SYNC_FRAMEWORKS:
        out = SYNC_FRAMEWORKS[framework](base, token_a, token_b, framework)
    else:
        out = asyncio.run(FRAMEWORKS[framework](base, token_a, token_b, framework))
    print(json.dumps(out))
