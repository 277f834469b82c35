"""A moment's text written from the second's kept head is the text ``isoformat`` (and, for a
receipt, each field formatted) writes, whatever the moment's zone, year or microseconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.core.moments import iso_text, second_head
from proctor.receipts.model import format_time

zones = st.sampled_from(
    [
        UTC,
        timezone(timedelta(0)),
        timezone(timedelta(hours=5, minutes=30)),
        timezone(-timedelta(hours=8)),
    ]
)
moments = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=zones
)


def _receipt_text(moment: datetime) -> str:
    """What format_time wrote before it kept heads: every field formatted for each moment."""
    m = moment.astimezone(UTC)
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{m.microsecond:06d}Z"
    )


class _Moment(datetime):
    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return "its own text"


@settings(max_examples=500, deadline=None)
@given(moments, st.integers(0, 999_999))
def test_texts_are_the_ones_isoformat_and_each_field_formatted_write(
    moment: datetime, micro: int
) -> None:
    for m in (moment, moment.replace(microsecond=micro), moment.replace(microsecond=0)):
        assert iso_text(m) == m.isoformat()
        assert format_time(m) == _receipt_text(m)
        naive = m.replace(tzinfo=None)
        assert iso_text(naive) == naive.isoformat()


def test_one_second_s_readings_and_its_neighbours_keep_their_own_texts() -> None:
    base = datetime(2026, 12, 7, 9, 48, 59, 999_999, tzinfo=UTC)
    for step in range(-3, 4):
        m = base + timedelta(microseconds=step)
        assert iso_text(m) == m.isoformat()
        assert second_head(m) == m.isoformat(timespec="microseconds")[:20]
    early = datetime(5, 1, 2, 3, 4, 5, 6, tzinfo=UTC)  # a year of one digit: four written
    assert iso_text(early) == early.isoformat() == "0005-01-02T03:04:05.000006+00:00"
    assert format_time(early) == "0005-01-02T03:04:05.000006Z"


def test_a_subclass_writes_its_own_text() -> None:
    moment = _Moment(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert iso_text(moment) == "its own text"
