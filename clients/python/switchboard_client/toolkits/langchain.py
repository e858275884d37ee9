"""Switchboard's tools as LangChain tools (`pip install 'switchboard-client[langchain]'`);
LangGraph's agents take them as they are.

    tools = switchboard_tools(Client(url, token=token), agent_id="planner")
    model.bind_tools(tools)
"""

from __future__ import annotations

from langchain_core.tools import BaseTool, StructuredTool

from ..client import Client
from ._tools import AgentTools


def switchboard_tools(client: Client, agent_id: str) -> list[BaseTool]:
    """The five tools of `AgentTools`, for the agent `agent_id` the client's token is."""
    return [
        StructuredTool.from_function(func=tool) for tool in AgentTools(client, agent_id).tools()
    ]
