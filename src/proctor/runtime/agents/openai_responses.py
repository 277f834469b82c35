"""The Responses dialect (``POST {endpoint}/responses``), OpenAI's current API.

proctor keeps the conversation itself and sends it whole each time (``store: false``, no
``previous_response_id``), so nothing of a run is kept by the provider between requests.
Instructions go in ``instructions``; the model's calls arrive as ``function_call`` items of
``output`` (``arguments`` as a JSON text) and each result goes back as a
``function_call_output`` item with the same ``call_id``.
"""

from __future__ import annotations

from typing import Any

from proctor.runtime.agents.wire import (
    MalformedReply,
    ModelReply,
    ToolRequest,
    ToolSpec,
    openai_error_message,
    tool_request,
)

__all__ = ["OpenAIResponses"]


class OpenAIResponses:
    """One conversation in the Responses format."""

    path = "/responses"

    def __init__(self, model: str, *, max_tokens: int | None = None) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.instructions = ""
        self.items: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []

    def headers(self, key: str | None) -> dict[str, str]:
        return {} if key is None else {"Authorization": f"Bearer {key}"}

    def begin(self, system: str, user: str, tools: list[ToolSpec]) -> None:
        self.instructions = system
        self.items = [{"role": "user", "content": user}]
        self.tools = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in tools
        ]

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "instructions": self.instructions,
            "input": self.items,
            "store": False,
        }
        if self.tools:
            body["tools"] = self.tools
        if self.max_tokens is not None:
            body["max_output_tokens"] = self.max_tokens
        return body

    def read(self, document: Any) -> ModelReply:
        try:
            output = document["output"]
            if not isinstance(output, list):
                raise TypeError
            texts: list[str] = []
            requests: list[ToolRequest] = []
            echo: list[dict[str, Any]] = []
            for item in output:
                kind = item["type"]
                if kind == "message":
                    for part in item.get("content") or []:
                        if part.get("type") == "output_text":
                            texts.append(str(part["text"]))
                    echo.append(item)
                elif kind == "function_call":
                    requests.append(
                        tool_request(item["call_id"], item["name"], item.get("arguments"))
                    )
                    echo.append(
                        {
                            "type": "function_call",
                            "call_id": item["call_id"],
                            "name": item["name"],
                            "arguments": item.get("arguments", ""),
                        }
                    )
                # Reasoning and other item kinds are not carried back: with store: false the
                # provider cannot resolve their ids, and they hold nothing the loop acts on.
        except (KeyError, TypeError, AttributeError) as exc:
            raise MalformedReply(
                "the model provider's answer is not a Responses object (no output items)"
            ) from exc
        return ModelReply(text="".join(texts), tool_requests=requests, echo=echo)

    def add_reply(self, reply: ModelReply) -> None:
        self.items.extend(reply.echo or [])

    def add_results(self, results: list[tuple[ToolRequest, str]]) -> None:
        for request, content in results:
            self.items.append(
                {"type": "function_call_output", "call_id": request.id, "output": content}
            )

    def add_user(self, text: str) -> None:
        self.items.append({"role": "user", "content": text})

    def results(self) -> list[tuple[dict[str, Any], str]]:
        return [(i, "output") for i in self.items if i.get("type") == "function_call_output"]

    @staticmethod
    def error_message(document: Any) -> str | None:
        return openai_error_message(document)
