"""The Python client for Switchboard: `Client`, `AsyncClient`, `listen()` and `Worker`.

    from switchboard_client import Client

    with Client("http://localhost:8080", token=PLANNER_TOKEN) as sb:
        sb.send_message(sender_agent_id="planner", recipient_agent_ids=["coder"],
                        message_type="request", content={"text": "Review the parser"})

Methods are the contract's operations in snake_case; their keyword arguments are the REST
body's fields; they return the answer as a typed object (`switchboard_client.models`) and
raise `SwitchboardError` on a refusal. See docs/python.md in the repository.
"""

from . import models
from .client import AsyncClient, Client
from .errors import (
    AuthenticationError,
    ConflictError,
    ConnectionFailed,
    InvalidRequestError,
    LimitError,
    NotFoundError,
    SwitchboardError,
    UnavailableError,
)
from .listen import AsyncListener, Frame, Listener
from .worker import TaskContext, TaskFailed, Worker

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncListener",
    "AuthenticationError",
    "Client",
    "ConflictError",
    "ConnectionFailed",
    "Frame",
    "InvalidRequestError",
    "LimitError",
    "Listener",
    "NotFoundError",
    "SwitchboardError",
    "TaskContext",
    "TaskFailed",
    "UnavailableError",
    "Worker",
    "__version__",
    "models",
]
