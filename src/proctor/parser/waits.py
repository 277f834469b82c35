"""The time a wait step waits until, read from what its ``until`` states (pure).

A wait's ``until`` is milliseconds since the epoch, as the runx reference states it (a number,
or its digits as text, as ``-i`` gives it), or an ISO 8601 time that names its UTC offset
(``2027-01-02T03:04:05Z``); a time without an offset is refused, since it would mean a
different moment on each machine.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

__all__ = ["MAX_UNTIL_MS", "literal_until"]

MAX_UNTIL_MS = 253402300799999
"""The last millisecond of the year 9999: a later ``until`` is no time."""


def literal_until(value: Any) -> int:
    """``value`` as milliseconds since the epoch.

    Raises:
        ValueError: ``value`` is not an integer in ``0..MAX_UNTIL_MS`` (never a bool), nor an
            ISO 8601 time with its UTC offset. The message never repeats the value.
    """
    if isinstance(value, bool):
        raise ValueError("until is a time, not true or false")
    if isinstance(value, int):
        if not 0 <= value <= MAX_UNTIL_MS:
            raise ValueError("until in milliseconds since the epoch is between 0 and year 9999")
        return value
    if not isinstance(value, str) or len(value) > 64:
        raise ValueError(
            "until is milliseconds since the epoch or an ISO 8601 time with its UTC offset"
        )
    text = value.strip()
    if text.isascii() and text.isdigit() and len(text) <= 16:  # milliseconds given as text (-i)
        return literal_until(int(text))
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            "until is milliseconds since the epoch or an ISO 8601 time with its UTC offset"
        ) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("until names a time without its UTC offset (add Z or +HH:MM)")
    return int(moment.timestamp() * 1000)
