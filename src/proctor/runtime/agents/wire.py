"""What every provider dialect reads and writes, whatever its wire format.

A dialect turns a conversation into one provider's request body and turns the provider's
answer into a :class:`ModelReply`: the text the model wrote and the tool calls it asked for.
The managed loop (:mod:`proctor.runtime.agents.loop`) never sees a provider's JSON.
"""

from __future__ import annotations

from typing import Any, Protocol

from proctor.contracts import json_strict
from proctor.contracts.values import dataclass, field
from proctor.errors import AgentError, ParseError

__all__ = [
    "Dialect",
    "MalformedReply",
    "ModelReply",
    "ToolRequest",
    "ToolSpec",
    "read_document",
    "tool_request",
    "with_response_format",
]


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
        problem: why ``arguments`` is ``None``: ``arguments_unparsable``, or the strict
            reader's ``duplicate_key`` / ``too_deep``.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    problem: str | None = None


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

    def results(self) -> list[tuple[dict[str, Any], str]]:
        """The tool results of the conversation, oldest first: each as the dict holding it and
        the key its text is under (the context budget replaces older ones in place)."""
        ...

    @staticmethod
    def error_message(document: Any) -> str | None:
        """The provider's own error message in an error body, if it has the documented shape."""
        ...


def decode_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments given as a JSON text (OpenAI shapes) or an object (Anthropic), read strictly.

    Returns the arguments and ``None``, or ``None`` and why they cannot be used:
    ``duplicate_key`` or ``too_deep`` from :mod:`proctor.contracts.json_strict`, else
    ``arguments_unparsable`` (not JSON, or not an object).
    """
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None
        try:
            value = json_strict.loads(raw, source="the arguments")
        except ParseError as exc:
            if exc.code in ("duplicate_key", "too_deep"):
                return None, exc.code
            return None, "arguments_unparsable"
        return (value, None) if isinstance(value, dict) else (None, "arguments_unparsable")
    return None, "arguments_unparsable"


def tool_request(call_id: Any, name: Any, raw_arguments: Any) -> ToolRequest:
    """One tool call of a model's answer, its arguments decoded by :func:`decode_arguments`.

    A name that is not text becomes the empty name, which admission refuses as a call.
    """
    arguments, problem = decode_arguments(raw_arguments)
    return ToolRequest(
        id=str(call_id),
        name=name if isinstance(name, str) else "",
        arguments=arguments,
        problem=problem,
    )


def read_document(content: bytes) -> Any:
    """A provider's answer body, read by the strict JSON reader.

    Raises:
        ParseError: ``not_utf8``, ``not_json``, ``duplicate_key`` or ``too_deep``.
    """
    return json_strict.loads(content, source="the provider's answer")


def openai_error_message(document: Any) -> str | None:
    """``{"error": {"message": ...}}``, the OpenAI-compatible error shape."""
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return None


def with_response_format(
    dialect: str, body: dict[str, Any], name: str, schema: dict[str, Any]
) -> dict[str, Any]:
    """``body`` asking for an answer that fits ``schema``, where the dialect has a way to ask.

    ``chat_completions`` sends ``response_format: {type: json_schema, json_schema: {name,
    schema}}`` (honoured by OpenAI-compatible servers, llama.cpp's and vLLM's included, whose
    grammar then constrains what a small model can write); ``openai_responses`` sends
    ``text.format`` of type ``json_schema``. ``anthropic_messages`` has no such field: the body
    is returned as it is and the prompt alone asks for JSON. Non-strict, so a server never
    refuses the schema for an optional field.
    """
    if dialect == "chat_completions":
        wanted = {"name": name, "schema": schema, "strict": False}
        return {**body, "response_format": {"type": "json_schema", "json_schema": wanted}}
    if dialect == "openai_responses":
        text = dict(body.get("text") or {})
        text["format"] = {"type": "json_schema", "name": name, "schema": schema, "strict": False}
        return {**body, "text": text}
    return body
