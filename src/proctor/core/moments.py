"""The ISO 8601 texts of moments, the date and time of day written once per second.

A run writes its clock's readings as text several times (a call's start and end, a step's, a
run's, each receipt's): formatting the date and the time of day is most of the cost of each,
and the readings of one run share a few seconds. :func:`second_head` keeps that part per
second; :func:`iso_text` is ``datetime.isoformat()`` built on it.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["iso_text", "second_head"]

_HEADS: dict[tuple[int, int, int, int, int, int], str] = {}
_HEADS_MAX = 256


def second_head(moment: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.`` of ``moment`` (its own fields, whatever its zone), written once
    per second."""
    m = moment
    second = (m.year, m.month, m.day, m.hour, m.minute, m.second)
    head = _HEADS.get(second)
    if head is None:
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        head = _HEADS[second] = (
            f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}."
        )
    return head


def iso_text(moment: datetime) -> str:
    """``moment.isoformat()``, the same text: a UTC moment with microseconds (a clock's reading,
    mostly) is written from :func:`second_head`, any other by ``isoformat`` itself."""
    if type(moment) is not datetime or moment.tzinfo is not UTC or not moment.microsecond:
        return moment.isoformat()
    return f"{second_head(moment)}{moment.microsecond:06d}+00:00"
