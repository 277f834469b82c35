"""What every provider dialect reads and writes, whatever its wire format.

A dialect turns a conversation into one provider's request body and turns the provider's
answer into a :class:`ModelReply`: the text the model wrote and the tool calls it asked for.
The managed loop (:mod:`proctor.runtime.agents.loop`) never sees a provider's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from proctor.errors import AgentError

__all__ = ["Dialect", "MalformedReply", "ModelReply", "ToolRequest", "ToolSpec"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model is shown it: a wire-safe name, a description, a JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolRequest:
    """One tool call the model asked for.

    Attributes:
        id: the provider's id for the call (answered with the result).
        name: the wire name the model used.
        arguments: the decoded arguments, or ``None`` when they were not a JSON object.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None


@dataclass
class ModelReply:
    """One answer of the model: what it wrote and which tools it called.

    ``echo`` is the provider-shaped record of the answer that the dialect appends to the
    conversation, so the next request carries it back exactly as the provider gave it.
    """

    text: str
    tool_requests: list[ToolRequest] = field(default_factory=list)
    echo: Any = None


class MalformedReply(AgentError):
    """The provider answered 2xx with a body that is not its documented shape."""

    code = "provider_malformed"


class Dialect(Protocol):
    """A provider wire format holding one conversation."""

    path: str
    """The request path under the endpoint, e.g. ``/chat/completions``."""

    def headers(self, key: str | None) -> dict[str, str]:
        """Request headers, with the key where the provider expects it."""
        ...

    def begin(self, system: str, user: str, tools: list[ToolSpec]) -> None:
        """Start the conversation."""
        ...

    def body(self) -> dict[str, Any]:
        """The next request's JSON body."""
        ...

    def read(self, document: Any) -> ModelReply:
        """Decode a 2xx answer.

        Raises:
            MalformedReply: it is not the provider's documented shape.
        """
        ...

    def add_reply(self, reply: ModelReply) -> None:
        """Append the model's answer to the conversation."""
        ...

    def add_results(self, results: list[tuple[ToolRequest, str]]) -> None:
        """Append the results of the tool calls of the last answer."""
        ...

    def add_user(self, text: str) -> None:
        """Append a message from proctor (a format reminder)."""
        ...

    @staticmethod
    def error_message(document: Any) -> str | None:
        """The provider's own error message in an error body, if it has the documented shape."""
        ...


def decode_arguments(raw: Any) -> dict[str, Any] | None:
    """Arguments given as a JSON text (OpenAI shapes) or an object (Anthropic), or ``None``."""
    import json

    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None
    return None


def openai_error_message(document: Any) -> str | None:
    """``{"error": {"message": ...}}``, the OpenAI-compatible error shape."""
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return None
