"""A two-agent team with CrewAI: the planner is a CrewAI `Agent` with Switchboard's tools
(`switchboard_client.toolkits.crewai`), its LLM a scripted stand-in that answers in the
ReAct text CrewAI parses (`Action:` / `Action Input:` / `Final Answer:`) — CrewAI runs
each tool and hands back its `Observation:`; the coder is a `Worker`. Run after the
README's walkthrough:

    python clients/python/examples/crewai_team.py
"""

from __future__ import annotations

import json
import os

# No telemetry from an example (and this machine may have no way out).
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from typing import Any

from _team import URL, Script, coder
from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM

from switchboard_client import Client
from switchboard_client.toolkits.crewai import switchboard_tools


def last_observation(messages: Any) -> str | None:
    """The JSON a tool answered last, as CrewAI wrote it into the conversation."""
    if isinstance(messages, str):
        text = messages
    else:
        text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
    at = text.rfind("Observation:")
    if at < 0:
        return None
    rest = text[at + len("Observation:") :].lstrip()
    try:
        value, _ = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        return None
    return json.dumps(value)


class ScriptedLLM(BaseLLM):  # type: ignore[misc]  # CrewAI is not in the type-checked virtualenv
    """A CrewAI LLM whose turns come from `Script` instead of a language model."""

    script: Script

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        turn = self.script.next_call(last_observation(messages))
        if isinstance(turn, str):
            return f"Thought: I now know the final answer\nFinal Answer: {turn}"
        name, arguments = turn
        return f"Thought: I use a tool\nAction: {name}\nAction Input: {json.dumps(arguments)}"

    def supports_function_calling(self) -> bool:
        return False


def main() -> None:
    with coder(), Client(URL, token=os.environ["PLANNER_TOKEN"]) as client:
        planner = Agent(
            role="Planner",
            goal="Get work done by the team",
            backstory="Plans and hands work to the coder through Switchboard.",
            llm=ScriptedLLM(model="scripted", script=Script()),
            tools=switchboard_tools(client, "planner"),
            max_iter=200,
            verbose=False,
        )
        work = Task(
            description="Have the coder count some words.",
            expected_output="How many words the coder counted.",
            agent=planner,
        )
        print(Crew(agents=[planner], tasks=[work], verbose=False).kickoff().raw)


if __name__ == "__main__":
    main()
