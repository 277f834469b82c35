"""Each shipped guard: what it denies (with its code) and what it lets through."""

from __future__ import annotations

import pytest

from proctor.policy import GuardRegistry
from proctor.policy.names import REFERENCE_GUARD_NAMES
from proctor.policy.shipped_guards import (
    SHIPPED_GUARDS,
    check_destructive_action,
    check_no_bulk_writes,
    check_no_raw_credentials,
    check_no_secrets_in_args,
    check_reason_not_empty,
    check_sensitive_paths,
    check_write_budget,
)
from tests.policy.conftest import ctx

GITHUB = "ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8"  # shape only, not a real token


def test_shipped_guards_are_registered_under_the_reference_names() -> None:
    assert set(SHIPPED_GUARDS) == set(REFERENCE_GUARD_NAMES)
    reg = GuardRegistry.with_shipped()
    assert reg.names() == tuple(sorted(REFERENCE_GUARD_NAMES))


def test_a_user_guard_cannot_take_a_shipped_name() -> None:
    from proctor.errors import PolicyLoadError

    reg = GuardRegistry.with_shipped()
    with pytest.raises(PolicyLoadError) as info:
        reg.register("check_sensitive_paths", lambda c: None)
    assert info.value.code == "duplicate_guard"
    assert reg.get("check_sensitive_paths") is check_sensitive_paths


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        "./.env",
        "config/.env.local",
        "a/../.env",
        "keys/id_rsa",
        ".git/config",
        "sub\\.netrc",
        ".ENV",
    ],
)
def test_sensitive_paths_refused(path: str) -> None:
    verdict = check_sensitive_paths(ctx("fs.read", {"path": path}))
    assert verdict is not None and not verdict.allowed
    assert verdict.code == "sensitive_path"


def test_sensitive_path_inside_a_bundle_member_and_resolved_paths() -> None:
    bundle = {"changes": [{"op": "create", "path": "ok.txt"}, {"op": "create", "path": ".npmrc"}]}
    verdict = check_sensitive_paths(ctx("fs.apply_bundle", bundle))
    assert verdict is not None and verdict.code == "sensitive_path"
    assert verdict.metadata is not None and verdict.metadata["field"] == "changes[1].path"
    resolved = check_sensitive_paths(ctx("fs.read", {"path": "link"}, workspace_relpaths=(".env",)))
    assert resolved is not None and resolved.code == "sensitive_path"


@pytest.mark.parametrize("path", ["src/main.py", "notes/env.md", ".env.example", "README"])
def test_ordinary_paths_pass(path: str) -> None:
    assert check_sensitive_paths(ctx("fs.read", {"path": path})) is None


@pytest.mark.parametrize(
    "args",
    [
        {"message": f"use {GITHUB} please"},
        {"headers": [{"X-Note": "Bearer " + "z" * 30}]},
        {GITHUB: "as a key"},
        {"content": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n"},
        {"nested": {"deep": ["AKIA" + "ABCDEFGHIJKLMNOP"]}},
    ],
)
def test_secrets_in_arguments_are_refused_without_echoing_them(args: dict[str, object]) -> None:
    verdict = check_no_secrets_in_args(ctx("echo", args))
    assert verdict is not None and verdict.code == "secret_detected"
    assert GITHUB not in verdict.message and GITHUB not in str(verdict.metadata)


def test_secret_in_the_reason_is_refused() -> None:
    verdict = check_no_secrets_in_args(ctx("echo", {"m": "hi"}, reason=f"token {GITHUB}"))
    assert verdict is not None and verdict.metadata is not None
    assert verdict.metadata["matched_field_labels"] == ["reason"]


def test_matched_fields_are_structured_paths() -> None:
    verdict = check_no_secrets_in_args(ctx("echo", {"a": {"b": [f"x {GITHUB}"]}}))
    assert verdict is not None and verdict.metadata is not None
    assert verdict.metadata["matched_fields"] == [["a", "b", 0]]
    assert verdict.metadata["matched_kinds"] == ["github_token"]


@pytest.mark.parametrize(
    "args",
    [
        {"message": "hello world"},
        {"expected_digest": "sha256:" + "ab" * 32},
        {"id": "123e4567-e89b-12d3-a456-426614174000"},
        {"content": "The quick brown fox. " * 200},
    ],
)
def test_ordinary_arguments_pass(args: dict[str, object]) -> None:
    assert check_no_secrets_in_args(ctx("echo", args)) is None


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (
            {"url": "https://api.example.com/", "headers": {"Authorization": "Bearer x"}},
            "headers.Authorization",
        ),
        ({"url": "https://api.example.com/", "headers": {"x-api-key": "k"}}, "headers.x-api-key"),
        ({"url": "https://api.example.com/", "headers": {"Cookie": "session=1"}}, "headers.Cookie"),
        ({"url": "https://api.example.com/?api_key=abc"}, "url"),
        ({"url": "https://user:pw@api.example.com/"}, "url"),
        ({"url": "https://api.example.com/", "json": {"password": "hunter2"}}, "json.password"),
    ],
)
def test_raw_credentials_refused(args: dict[str, object], field: str) -> None:
    verdict = check_no_raw_credentials(ctx("http.request", args))
    assert verdict is not None and verdict.code == "raw_credential"
    assert verdict.metadata is not None and verdict.metadata["field"] == field


@pytest.mark.parametrize(
    "args",
    [
        {"url": "https://api.example.com/?q=cats", "headers": {"Accept": "text/plain"}},
        {"url": "https://api.example.com/", "auth_alias": "tracker"},
        {"url": "https://api.example.com/", "headers": {"Authorization": ""}},
    ],
)
def test_requests_without_raw_credentials_pass(args: dict[str, object]) -> None:
    assert check_no_raw_credentials(ctx("http.request", args)) is None


def _history(*entries: tuple[str, dict[str, object], str]) -> tuple[dict[str, object], ...]:
    return tuple({"tool": t, "args": a, "outcome": o} for t, a, o in entries)


def test_bulk_writes_flag_a_second_distinct_path() -> None:
    history = _history(("fs.write", {"path": "a.txt"}, "ok"))
    assert check_no_bulk_writes(ctx("fs.edit", {"path": "a.txt"}, history=history)) is None
    verdict = check_no_bulk_writes(ctx("fs.write", {"path": "b.txt"}, history=history))
    assert verdict is not None and verdict.code == "bulk_write"
    assert check_no_bulk_writes(ctx("fs.read", {"path": "b.txt"}, history=history)) is None
    bundle = {"changes": [{"op": "create", "path": "x"}, {"op": "create", "path": "y"}]}
    assert check_no_bulk_writes(ctx("fs.apply_bundle", bundle)) is not None
    refused = _history(("fs.write", {"path": "a.txt"}, "refused"))
    assert check_no_bulk_writes(ctx("fs.write", {"path": "b.txt"}, history=refused)) is None


@pytest.mark.parametrize(
    ("tool", "args", "flagged"),
    [
        ("fs.delete", {"path": "a", "expected_digest": "d"}, True),
        ("fs.restore", {"trash_id": "t"}, True),
        ("fs.write", {"path": "a", "expected_digest": "d", "content": ""}, True),
        ("fs.write", {"path": "a", "create": True, "content": ""}, False),
        ("fs.apply_bundle", {"changes": [{"op": "delete", "path": "a"}]}, True),
        ("fs.apply_bundle", {"changes": [{"op": "create", "path": "a"}]}, False),
        ("fs.read", {"path": "a"}, False),
    ],
)
def test_destructive_actions(tool: str, args: dict[str, object], flagged: bool) -> None:
    verdict = check_destructive_action(ctx(tool, args))
    assert (verdict is not None) is flagged
    if verdict is not None:
        assert verdict.code == "destructive_action"


def test_write_budget_counts_changing_calls_that_were_not_refused() -> None:
    history = _history(
        ("fs.write", {"path": "a"}, "ok"),
        ("fs.delete", {"path": "b"}, "failed"),
        ("fs.write", {"path": "c"}, "refused"),
        ("fs.read", {"path": "d"}, "ok"),
    )
    assert (
        check_write_budget(ctx("fs.edit", {"path": "a"}, history=history, write_budget=3)) is None
    )
    verdict = check_write_budget(ctx("fs.edit", {"path": "a"}, history=history, write_budget=2))
    assert verdict is not None and verdict.code == "write_budget_exceeded"
    assert verdict.metadata == {"count": 2, "budget": 2}
    assert check_write_budget(ctx("fs.read", {}, history=history, write_budget=0)) is None


@pytest.mark.parametrize(("reason", "denied"), [("", True), ("   ", True), ("tidy up", False)])
def test_reason_not_empty(reason: str, denied: bool) -> None:
    verdict = check_reason_not_empty(ctx("fs.write", {}, reason=reason))
    assert (verdict is not None) is denied
    if verdict is not None:
        assert verdict.code == "empty_reason"
