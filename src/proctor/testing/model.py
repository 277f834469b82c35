"""The model stand-in: a managed agent whose model answers from a test's script.

The agent is proctor's own :class:`~proctor.runtime.agents.ManagedAgent` (its dialect, its
turn loop, every call admitted through the run's governor); only its model client's transport
is replaced, after the pinned-endpoint check, by :class:`ScriptedModel`, which answers each
request with the next scripted document. A request after the last one fails the turn
(``model_fixture_exhausted``); a response never asked for fails the test.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from proctor.contracts.testfile import ModelProvider
from proctor.errors import AgentError
from proctor.runtime.agents import ManagedAgent
from proctor.runtime.boundary.egress import StaticResolver

__all__ = ["MODEL_ENDPOINT", "ScriptedModel", "scripted_agent"]

MODEL_ENDPOINT = "https://model.fixture.invalid/v1"
"""The endpoint a test's managed agent is configured with (``.invalid``: never a real host)."""


class ScriptedModel(httpx.BaseTransport):
    """Answers model requests with scripted documents, in order.

    Attributes:
        served: how many responses were given.
        requests: the JSON bodies the agent sent, in order (for failure messages).
    """

    def __init__(self, responses: list[dict[str, Any]]) -> None:
        self.responses = responses
        self.served = 0
        self.requests: list[Any] = []
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """The next scripted response.

        Raises:
            AgentError: (``model_fixture_exhausted``) every scripted response was used.
        """
        content = request.read()
        with self._lock:
            try:
                self.requests.append(json.loads(content))
            except (ValueError, UnicodeDecodeError):
                self.requests.append(None)
            if self.served >= len(self.responses):
                raise AgentError(
                    f"the test's providers.model has {len(self.responses)} responses and the "
                    "agent asked for another",
                    code="model_fixture_exhausted",
                )
            document = self.responses[self.served]
            self.served += 1
        return httpx.Response(200, json=document)


def scripted_agent(
    provider: ModelProvider, tools: Any = None
) -> tuple[ManagedAgent, ScriptedModel]:
    """A managed agent speaking ``provider.dialect`` to a :class:`ScriptedModel`."""
    from proctor.runtime.home.config import AgentConfig

    script = ScriptedModel(list(provider.responses))
    config = AgentConfig(
        provider="fixture",
        model=provider.model,
        dialect=provider.dialect,
        endpoint_url=MODEL_ENDPOINT,
        secret=None,
        max_retries=0,
    )
    agent = ManagedAgent(
        config,
        tools=tools,
        resolver=StaticResolver({httpx.URL(MODEL_ENDPOINT).host: ["192.0.2.1"]}),
        pool_factory=lambda _verify: script,
    )
    return agent, script
