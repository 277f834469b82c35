"""What a managed turn's model requests cost, metered against the run tree's spend limit.

A provider declares its price in the home's ``config.json`` (``agent.cost``: per ``call``, per
``1k_tokens_in``, per ``1k_tokens_out``). Before each model request the worst case of that
request is reserved on the tree's ledger (:class:`~proctor.core.spend.SpendLedger`): the price
per call, the request body's bytes standing for its input tokens, and the answer limit it sends
(``max_tokens``) for its output tokens. A quote that does not fit is refused
``cost_limit_exceeded`` and nothing is sent; an output price with no answer limit cannot be
bounded and is refused ``price_unknown`` under a limit. Once the provider answered, the hold is
settled with the tokens it reports (``usage``), the rest given back; a count it does not report
is charged at its worst case.

A request that failed is settled by what may have happened: an HTTP error answer or an endpoint
that could not be reached was not worked (the hold is released); a timeout, a cancellation or a
malformed answer may have been (it is charged at the worst case: over-counted, never under).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import dataclass, field
from proctor.errors import AgentError

if TYPE_CHECKING:
    from proctor.core.spend import Price, Reservation, SpendLedger

__all__ = ["ModelMeter", "reported_tokens"]

_NOT_WORKED = frozenset({"provider_error", "provider_unreachable"})


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def reported_tokens(document: Any) -> tuple[int | None, int | None]:
    """The input and output tokens a provider's answer reports under ``usage`` (chat
    completions' ``prompt_tokens``/``completion_tokens``, the Responses and Messages APIs'
    ``input_tokens``/``output_tokens``, Anthropic's cache tokens counted as input); ``None``
    for a count it does not report as a non-negative integer."""
    usage = document.get("usage") if isinstance(document, dict) else None
    if not isinstance(usage, dict):
        return None, None
    tokens_in = _count(usage.get("prompt_tokens"))
    if tokens_in is None:
        tokens_in = _count(usage.get("input_tokens"))
        if tokens_in is not None:
            for extra in ("cache_creation_input_tokens", "cache_read_input_tokens"):
                tokens_in += _count(usage.get(extra)) or 0
    tokens_out = _count(usage.get("completion_tokens"))
    if tokens_out is None:
        tokens_out = _count(usage.get("output_tokens"))
    return tokens_in, tokens_out


@dataclass
class _Held:
    reservation: Reservation
    body_bytes: int
    max_tokens_out: int | None


@dataclass
class ModelMeter:
    """Meters one turn's model requests on ``ledger`` at ``prices`` (see the module docstring).

    ``spent`` is what the turn's requests cost so far (the step's receipt states it).
    """

    ledger: SpendLedger
    prices: tuple[Price, ...]
    what: str
    spent: int = 0
    requests: int = field(default=0)

    def before(self, body: dict[str, Any]) -> _Held:
        """Reserve the worst case of sending ``body``.

        Raises:
            SpendRefused: ``cost_limit_exceeded`` (it does not fit what is left) or
                ``price_unknown`` (an output price and no answer limit, under a limit).
                Nothing is held and nothing may be sent.
        """
        from proctor.core.spend import model_request_quote

        self.requests += 1
        body_bytes = len(json.dumps(body).encode("utf-8"))
        limit = body.get("max_tokens", body.get("max_output_tokens"))
        max_out = limit if type(limit) is int and limit > 0 else None
        quote = model_request_quote(self.prices, body_bytes, max_out)
        what = f"model request {self.requests} of {self.what}"
        if quote is None and not self.ledger.limited:
            quote = 0  # unbounded, and nothing to hold it against: counted from the answer
        held = self.ledger.reserve(quote, what=what)
        return _Held(held, body_bytes, max_out)

    def after(self, held: _Held, document: Any) -> None:
        """The provider answered ``document``: settle the hold with the tokens it reports."""
        from proctor.core.spend import model_request_cost

        cost = model_request_cost(
            self.prices,
            reported_tokens(document),
            body_bytes=held.body_bytes,
            max_tokens_out=held.max_tokens_out,
        )
        self.ledger.settle(held.reservation, cost)
        self.spent += cost

    def failed(self, held: _Held, error: BaseException) -> None:
        """The request failed: released when it cannot have been worked, else charged at its
        worst case."""
        if isinstance(error, AgentError) and error.code in _NOT_WORKED:
            self.ledger.release(held.reservation)
            return
        cost = held.reservation.quote
        self.ledger.settle(held.reservation, cost)
        self.spent += cost
