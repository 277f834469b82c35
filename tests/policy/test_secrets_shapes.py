"""Credential shapes: each family found by kind, ordinary text not, scrubbing keeps context."""

from __future__ import annotations

import pytest

from proctor.core.secrets_shapes import (
    has_secret_shape,
    scrub_secret_shapes,
    secret_kinds,
    secret_shapes,
)

# Shapes only: built from fixed filler, none is a real credential.
SAMPLES = {
    "aws_access_key": "AKIA" + "Q" * 16,
    "google_api_key": "AIza" + "x" * 35,
    "github_token": "ghp_" + "a" * 36,
    "github_fine_grained_token": "github_pat_" + "b" * 30,
    "gitlab_token": "glpat-" + "c" * 20,
    "npm_token": "npm_" + "d" * 36,
    "pypi_token": "pypi-AgE" + "e" * 60,
    "slack_token": "xoxb-" + "1" * 12,
    "slack_webhook": "https://hooks.slack.com/services/T000/B000/" + "f" * 24,
    "discord_token": "M" + "g" * 24 + ".abcdef." + "h" * 27,
    "stripe_key": "sk_live_" + "i" * 24,
    "anthropic_key": "sk-ant-" + "j" * 30,
    "openai_key": "sk-proj-" + "k" * 40,
    "private_key_block": "-----BEGIN EC PRIVATE KEY-----",
    "jwt": "eyJ" + "l" * 12 + ".eyJ" + "m" * 12 + "." + "n" * 12,
    "bearer_token": "Authorization: Bearer " + "o" * 24,
    "assigned_secret": "API_KEY=" + "p" * 20,
}


def test_every_shape_has_a_sample() -> None:
    assert set(SAMPLES) == {kind for kind, _p in secret_shapes()}


@pytest.mark.parametrize(("kind", "sample"), sorted(SAMPLES.items()))
def test_each_shape_is_found_by_kind(kind: str, sample: str) -> None:
    text = f"before {sample} after"
    assert has_secret_shape(text)
    assert kind in secret_kinds(text)
    scrubbed = scrub_secret_shapes(text)
    assert scrubbed.startswith("before ") and scrubbed.endswith(" after")
    assert "[REDACTED]" in scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello",
        "sha256:" + "0123456789abcdef" * 4,
        "123e4567-e89b-12d3-a456-426614174000",
        "The password policy is documented in SECURITY.md.",
        "ask the desk about the key to the shed",
        "src/proctor/policy/loader.py",
    ],
)
def test_ordinary_text_is_not_a_secret(text: str) -> None:
    assert not has_secret_shape(text)
    assert secret_kinds(text) == []
    assert scrub_secret_shapes(text) == text
