"""Switchboard as tools for agent frameworks: `toolkits.agno`, `toolkits.crewai`,
`toolkits.langchain` (install the extra of the same name).

Each gives a framework's agent the same five tools, bound to one agent's client: send a
message, read its inbox, ask the team for assistance, submit a task, and follow a task.
They answer text (JSON), which is what a model reads; a refusal is answered as its error
body's text, so the model sees the `error_code` and `suggested_action` instead of the run
failing.
"""

from ._tools import AgentTools

__all__ = ["AgentTools"]
