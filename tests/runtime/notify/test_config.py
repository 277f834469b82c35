"""``[notify]`` and ``[approvals]`` in proctor.toml: read strictly, refused with a code naming
the key, never echoing a webhook URL; fuzzed so only ProctorError escapes."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.errors import ConfigError
from proctor.runtime.notify.config import load_notify, parse_notify
from tests.fuzzing import FUZZ, mutated, only_proctor_errors, spliced

VALID: dict[str, Any] = {
    "approvals": {"expires_in": 3600},
    "notify": {
        "console_url": "https://console.example.com/",
        "team": {"webhook": "https://hooks.example.com/p", "secret": "team-hmac"},
        "chat": {"webhook": "https://hooks.example.com/s/T0/B0/xyz", "format": "slack"},
        "pager": {"command": ["notify-send", "proctor"], "after": 600, "kinds": ["approval"]},
    },
}

TOML = """
[approvals]
expires_in = 3600

[notify]
console_url = "https://console.example.com/"

[notify.team]
webhook = "https://hooks.example.com/p"
secret = "team-hmac"

[notify.chat]
webhook = "https://hooks.example.com/s/T0/B0/xyz"
format = "slack"

[notify.pager]
command = ["notify-send", "proctor"]
after = 600
kinds = ["approval"]
"""


def test_a_valid_document_reads_whole() -> None:
    config = parse_notify(VALID)
    assert config.console_url == "https://console.example.com"
    assert config.expires_in == 3600
    assert [c.name for c in config.channels] == ["team", "chat", "pager"]
    team, chat, pager = config.channels
    assert (team.format, team.secret, team.stage) == ("json", "team-hmac", "opened")
    assert chat.format == "slack" and chat.secret is None
    assert (pager.command, pager.after, pager.kinds, pager.stage) == (
        ("notify-send", "proctor"), 600, ("approval",), "escalated",
    )  # fmt: skip
    assert chat.describe()["target"] == "https://hooks.example.com"  # never the path


def test_no_file_and_no_table_mean_no_channels(tmp_path: Path) -> None:
    assert load_notify(tmp_path).channels == ()
    (tmp_path / "proctor.toml").write_text("[egress]\nallow = []\n")
    assert load_notify(tmp_path).channels == ()


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"team": {"webhook": "https://h.example.com", "secret": "s", "colour": "red"}}, "colour"),
        ({"team": {"secret": "s"}}, "exactly one of webhook, webhook_profile or command"),
        ({"team": {"webhook": "https://h.example.com", "command": ["x"]}}, "exactly one"),
        ({"team": {"webhook_profile": "p", "webhook": "https://h.example.com"}}, "exactly one"),
        ({"team": {"webhook_profile": "no spaces", "format": "slack"}}, "webhook_profile"),
        ({"team": {"webhook": "https://h.example.com"}}, "secret"),
        ({"team": {"webhook": "https://h.example.com", "format": "xml", "secret": "s"}}, "format"),
        ({"team": {"webhook": "ftp://h.example.com", "secret": "s"}}, "http(s)"),
        ({"team": {"webhook": "https://u:p@h.example.com", "format": "slack"}}, "user name"),
        ({"team": {"webhook": "https://h.example.com/\n", "format": "slack"}}, "control"),
        ({"team": {"command": []}}, "non-empty list"),
        ({"team": {"command": ["x"], "format": "slack"}}, "for webhooks"),
        ({"team": {"command": ["x"], "after": -1}}, "after"),
        ({"team": {"command": ["x"], "after": True}}, "after"),
        ({"team": {"command": ["x"], "kinds": ["agent_turn"]}}, "kinds"),
        ({"team": {"command": ["x"], "payload": "yes"}}, "payload"),
        ({"Team!": {"command": ["x"]}}, "channel name"),
        ({"stray": 3}, "unknown key"),
        ({"console_url": "javascript:alert(1)"}, "console_url"),
    ],
)
def test_every_mistake_is_refused_with_the_key_named(table: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_notify({"notify": table})
    assert caught.value.code == "notify_config_invalid"
    assert words in caught.value.message
    assert "h.example.com/\n" not in caught.value.message and "u:p@" not in caught.value.message


def test_approvals_refuses_approve_on_expiry_and_bad_seconds() -> None:
    for section, words in (
        ({"on_expiry": "approve"}, "only allowed on a step"),
        ({"expires_in": 0}, "expires_in"),
        ({"expires_in": "1h"}, "expires_in"),
    ):
        with pytest.raises(ConfigError) as caught:
            parse_notify({"approvals": section})
        assert words in caught.value.message


def test_invalid_toml_is_refused(tmp_path: Path) -> None:
    (tmp_path / "proctor.toml").write_text("[notify\n")
    with pytest.raises(ConfigError):
        load_notify(tmp_path)


@FUZZ
@given(mutated(VALID))
def test_fuzz_mutated_documents(doc: Any) -> None:
    only_proctor_errors(lambda: parse_notify(doc if isinstance(doc, dict) else {"notify": doc}))


@FUZZ
@given(st.one_of(spliced(TOML), st.text(max_size=200)))
def test_fuzz_text(text: str) -> None:
    def parse() -> None:
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return
        parse_notify(doc)

    only_proctor_errors(parse)
