"""``[replay] retain`` in ``proctor.toml``: read strictly, any malformed setting refused with
``replay_config_invalid`` (never taken as on or off by accident)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ConfigError
from proctor.runtime.records.retention import replay_retain


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, False),
        ("", False),
        ("[egress]\nallow = []\n", False),
        ("[replay]\n", False),
        ("[replay]\nretain = false\n", False),
        ("[replay]\nretain = true\n", True),
    ],
)
def test_the_setting_is_read(tmp_path: Path, text: str | None, expected: bool) -> None:
    if text is not None:
        (tmp_path / "proctor.toml").write_text(text)
    assert replay_retain(tmp_path) is expected


@pytest.mark.parametrize(
    "text",
    [
        'replay = "on"\n',
        '[replay]\nretain = "true"\n',
        "[replay]\nretain = 1\n",
        "[replay]\nretain = true\nkeep = true\n",
        "[replay\n",
    ],
)
def test_a_malformed_setting_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "proctor.toml").write_text(text)
    with pytest.raises(ConfigError) as refused:
        replay_retain(tmp_path)
    assert refused.value.code == "replay_config_invalid"


_VALUES = st.one_of(
    st.booleans(),
    st.integers(),
    st.text(max_size=8),
    st.lists(st.booleans(), max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(
    table=st.dictionaries(st.sampled_from(["retain", "keep", "Retain", "x"]), _VALUES, max_size=3)
)
def test_any_replay_table_is_either_a_boolean_or_refused(
    tmp_path_factory: pytest.TempPathFactory, table: dict[str, object]
) -> None:
    import json

    folder = tmp_path_factory.mktemp("ws")
    lines = ["[replay]"] + [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    (folder / "proctor.toml").write_text("\n".join(lines) + "\n")
    valid = set(table) <= {"retain"} and isinstance(table.get("retain", False), bool)
    if valid:
        assert replay_retain(folder) is bool(table.get("retain", False))
    else:
        with pytest.raises(ConfigError) as refused:
            replay_retain(folder)
        assert refused.value.code == "replay_config_invalid"
