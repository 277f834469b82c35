"""Spend limits: prices, quotes and the ledger a run's whole tree spends from.

A priced call states its price (``cost: {usd_micro, per}`` in micro-dollars); before it is
sent, its quote is **reserved** against what the limit (``max_spend_micro_usd``) leaves; once
it ended, the reservation is **settled** with what it actually cost, or **released** when
nothing was sent. Every reservation is recorded through ``persist`` before ``reserve``
returns, so a driver killed after sending counts the call as spent (the ledger never forgets
a reservation it cannot prove unspent: it may over-count, never under-count).

Refusals (:class:`SpendRefused`, a refused call): ``cost_limit_exceeded`` when the quote does
not fit what is left; ``price_unknown`` when a limit is set and the call has no price
(missing is not zero). Without a limit, priced calls are counted and nothing is refused.

One ledger serves a run and every child run below it (their calls and their agent turns):
children take the root's ledger and can never widen it. Its interface is small on purpose, so
any priced act (a connector operation declaring ``cost: {usd_micro, per: call}``) can use it::

    held = ledger.reserve(quote, what="http.request at step fetch")   # may raise SpendRefused
    ...send...
    ledger.settle(held, actual)      # or ledger.release(held) when nothing was sent
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal

from proctor.contracts.values import dataclass
from proctor.errors import RefusedCall, UsageError

__all__ = [
    "MAX_SPEND_MICRO_USD",
    "PER_UNITS",
    "Price",
    "Reservation",
    "SpendLedger",
    "SpendRefused",
    "model_request_cost",
    "model_request_quote",
    "parse_price",
    "parse_prices",
    "parse_usd",
]

PER_UNITS = ("call", "1k_tokens_in", "1k_tokens_out")
MAX_SPEND_MICRO_USD = 2**53 - 1
"""The largest amount a limit or a price may state (exact in every JSON reader)."""

Per = Literal["call", "1k_tokens_in", "1k_tokens_out"]


class SpendRefused(RefusedCall):
    """A priced call refused before it was sent: ``cost_limit_exceeded`` or ``price_unknown``."""

    code = "cost_limit_exceeded"


@dataclass(frozen=True)
class Price:
    """What one unit of a priced act costs, in micro-dollars (``per`` names the unit)."""

    usd_micro: int
    per: Per = "call"

    def quote(self, units: int = 1) -> int:
        """The price of ``units`` units (calls, or thousands of tokens)."""
        return self.usd_micro * units

    def to_json(self) -> dict[str, Any]:
        """As declared: ``{usd_micro, per}``."""
        return {"usd_micro": self.usd_micro, "per": self.per}


def parse_price(doc: Any, where: str = "cost") -> Price:
    """Read a ``cost:`` declaration ``{usd_micro: N, per: call|1k_tokens_in|1k_tokens_out}``.

    Raises:
        UsageError: ``cost_invalid`` naming ``where`` and what is wrong (never the value).
    """
    if not isinstance(doc, Mapping) or set(doc) - {"usd_micro", "per"} or "usd_micro" not in doc:
        raise UsageError(
            f"{where} must be {{usd_micro: N, per: call|1k_tokens_in|1k_tokens_out}}",
            code="cost_invalid",
        )
    amount = doc["usd_micro"]
    if type(amount) is not int or not 0 <= amount <= MAX_SPEND_MICRO_USD:
        raise UsageError(
            f"{where}.usd_micro must be a whole number of micro-dollars from 0 to"
            f" {MAX_SPEND_MICRO_USD}",
            code="cost_invalid",
        )
    per = doc.get("per", "call")
    if per not in PER_UNITS:
        raise UsageError(f"{where}.per is one of {', '.join(PER_UNITS)}", code="cost_invalid")
    return Price(amount, per)


def parse_prices(doc: Any, where: str = "cost") -> tuple[Price, ...]:
    """Read a model provider's ``cost:``: one ``{usd_micro, per}`` or a list of them, each unit
    at most once (``[{usd_micro: 3000, per: 1k_tokens_in}, {usd_micro: 15000, per:
    1k_tokens_out}]``).

    Raises:
        UsageError: ``cost_invalid``: not a price or a list of prices, an empty list, or a
            unit priced twice.
    """
    items = list(doc) if isinstance(doc, list) else [doc]
    if not items:
        raise UsageError(f"{where} lists no price", code="cost_invalid")
    prices = tuple(parse_price(item, f"{where}[{n}]") for n, item in enumerate(items))
    units = [p.per for p in prices]
    if len(set(units)) != len(units):
        raise UsageError(f"{where} prices one unit twice", code="cost_invalid")
    return prices


def _per_thousand(usd_micro: int, tokens: int) -> int:
    """``usd_micro`` per 1,000 tokens for ``tokens`` tokens, rounded up (never under-counted)."""
    return -(-usd_micro * max(0, tokens) // 1000)


def model_request_quote(
    prices: tuple[Price, ...], body_bytes: int, max_tokens_out: int | None
) -> int | None:
    """The worst case of one model request, reserved before it is sent.

    Per call: the price. Per 1k input tokens: the request body's length in bytes stands for
    its tokens (a token is at least one byte of the text, and the JSON around the messages is
    longer than the markers a provider adds). Per 1k output tokens: the answer limit the
    request sends (``max_tokens``); with none the worst case is unbounded and the quote is
    ``None`` (under a limit: ``price_unknown``).
    """
    total = 0
    for price in prices:
        if price.per == "call":
            total += price.usd_micro
        elif price.per == "1k_tokens_in":
            total += _per_thousand(price.usd_micro, body_bytes)
        elif max_tokens_out is None:
            return None
        else:
            total += _per_thousand(price.usd_micro, max_tokens_out)
    return total


def model_request_cost(
    prices: tuple[Price, ...],
    tokens: tuple[int | None, int | None],
    *,
    body_bytes: int,
    max_tokens_out: int | None,
) -> int:
    """What one answered model request cost: the tokens the provider reported (``(in, out)``);
    a count it did not report is taken at its worst case (the bound of the quote)."""
    total = 0
    tokens_in, tokens_out = tokens
    for price in prices:
        if price.per == "call":
            total += price.usd_micro
        elif price.per == "1k_tokens_in":
            total += _per_thousand(price.usd_micro, body_bytes if tokens_in is None else tokens_in)
        else:
            used = tokens_out if tokens_out is not None else max_tokens_out
            total += _per_thousand(price.usd_micro, used or 0)
    return total


def parse_usd(text: str) -> int:
    """A dollar amount as people write it (``2``, ``0.50``) in micro-dollars.

    Raises:
        UsageError: ``max_spend_invalid`` for anything but a non-negative amount with at most
            six decimals, up to :data:`MAX_SPEND_MICRO_USD` micro-dollars.
    """
    problem = UsageError(
        "--max-spend takes an amount in US dollars, like 2 or 0.50 (at most 6 decimals)",
        code="max_spend_invalid",
    )
    cleaned = text.strip()
    if not cleaned or not all(c.isdigit() or c == "." for c in cleaned) or not cleaned.isascii():
        raise problem
    from decimal import Decimal, InvalidOperation  # only --max-spend is read with it

    try:
        amount = Decimal(cleaned)
    except InvalidOperation as exc:
        raise problem from exc
    micro = amount * 1_000_000
    if micro != micro.to_integral_value() or not 0 <= micro <= MAX_SPEND_MICRO_USD:
        raise problem
    return int(micro)


@dataclass
class Reservation:
    """A quote held against the limit until it is settled or released."""

    quote: int
    what: str
    open: bool = True


class SpendLedger:
    """What a run's tree spent and holds, against its limit (``None``: no limit).

    ``spent`` starts from what the run's record says (reservations a killed driver held count
    as spent); ``persist(state)`` records ``{"spent", "held", "limit"}`` and is called, under
    the ledger's lock, before ``reserve`` returns and after every settle or release. Safe to
    share between the threads of a fan-out.
    """

    def __init__(
        self,
        limit: int | None,
        *,
        spent: int = 0,
        persist: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.limit = limit
        self.spent = spent
        self.held = 0
        self._persist = persist
        self._lock = threading.Lock()

    @property
    def limited(self) -> bool:
        """Whether a limit is set (then an unknown price is refused)."""
        return self.limit is not None

    def state(self) -> dict[str, Any]:
        """What is recorded: spent, held (reserved, not settled) and the limit."""
        return {"spent": self.spent, "held": self.held, "limit": self.limit}

    def reserve(self, quote: int | None, *, what: str) -> Reservation:
        """Hold ``quote`` micro-dollars for ``what`` before it is sent.

        Raises:
            SpendRefused: ``price_unknown`` (a limit is set and ``quote`` is ``None``);
                ``cost_limit_exceeded`` (the quote does not fit what is left). Nothing is held.
        """
        with self._lock:
            if quote is None:
                if self.limit is None:
                    return Reservation(0, what, open=False)
                raise SpendRefused(
                    f"{what} has no declared price and this run has a spend limit; declare"
                    " cost: {usd_micro, per} (a missing price is never taken as zero)",
                    code="price_unknown",
                )
            if self.limit is not None and self.spent + self.held + quote > self.limit:
                left = max(0, self.limit - self.spent - self.held)
                raise SpendRefused(
                    f"{what} would cost {quote} micro-USD and this run's tree has {left} of"
                    f" its {self.limit} micro-USD limit (max_spend_micro_usd) left; nothing"
                    " was sent",
                    code="cost_limit_exceeded",
                )
            self.held += quote
            self._record()
            return Reservation(quote, what)

    def settle(self, held: Reservation, actual: int) -> None:
        """The act ended and cost ``actual``: the hold becomes spend (never below zero)."""
        with self._lock:
            if not held.open:
                self.spent += max(0, actual)
            else:
                held.open = False
                self.held -= held.quote
                self.spent += max(0, actual)
            self._record()

    def release(self, held: Reservation) -> None:
        """Nothing was sent: the hold is given back."""
        with self._lock:
            if held.open:
                held.open = False
                self.held -= held.quote
                self._record()

    def _record(self) -> None:
        if self._persist is not None:
            self._persist(self.state())
