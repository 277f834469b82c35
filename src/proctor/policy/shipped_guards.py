"""The guards proctor ships, registered under the reference kernel's guard names.

Each is a pure function of its :class:`~proctor.policy.guards.GuardContext`: no I/O, no clock,
nothing kept between calls (a run's history arrives in the context; what the write guards need
of it they read as a tally the history carries on, :meth:`~proctor.policy.guards.GuardContext.
history_tally`, so a write costs the same late in a long run as early). They judge the call as
sent; containment (in admission) judges the resolved paths independently, so the two layers
fail independently.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from proctor.core.secrets_shapes import has_secret_shape, secret_kinds
from proctor.policy.guards import Distinct, GuardContext, GuardFn, GuardVerdict
from proctor.policy.names import WRITE_TOOLS

__all__ = [
    "CHANGING_TOOLS",
    "PRIOR_SHOWN",
    "SHIPPED_GUARDS",
    "check_destructive_action",
    "check_no_bulk_writes",
    "check_no_raw_credentials",
    "check_no_secrets_in_args",
    "check_reason_not_empty",
    "check_sensitive_paths",
    "check_write_budget",
]

CHANGING_TOOLS = frozenset({*WRITE_TOOLS, "fs.delete", "fs.restore"})
"""Tools whose calls count against the per-run write budget."""

FieldPath = tuple[str | int, ...]


def _label(path: FieldPath) -> str:
    out = ""
    for seg in path:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else str(seg))
    return out or "$"


# --- check_reason_not_empty ----------------------------------------------------------------


def check_reason_not_empty(ctx: GuardContext) -> GuardVerdict | None:
    """Deny a call whose stated reason is empty or blank (code ``empty_reason``)."""
    if ctx.reason.strip():
        return None
    return GuardVerdict(
        allowed=False,
        message=f"the call to {ctx.tool_name} states no reason; say why it is made",
        code="empty_reason",
    )


# --- check_no_secrets_in_args ---------------------------------------------------------------


def _walk_strings(node: object, prefix: FieldPath) -> Iterator[tuple[FieldPath, str, bool]]:
    """Every string in ``node`` with its field path; the flag says it is a mapping key."""
    if isinstance(node, str):
        yield prefix, node, False
    elif isinstance(node, Mapping):
        for key, value in node.items():
            if isinstance(key, str):
                yield prefix, key, True
            yield from _walk_strings(value, (*prefix, str(key)))
    elif isinstance(node, list | tuple):
        for index, item in enumerate(node):
            yield from _walk_strings(item, (*prefix, index))


def _holds_secret_shape(node: object) -> bool:
    """Whether any string in ``node`` (a mapping key included) holds a credential shape: what
    :func:`_walk_strings` would find, without building a field path for every string."""
    if isinstance(node, str):
        return has_secret_shape(node)
    if isinstance(node, Mapping):
        for key, value in node.items():
            if isinstance(key, str) and has_secret_shape(key):
                return True
            if _holds_secret_shape(value):
                return True
    elif isinstance(node, list | tuple):
        return any(_holds_secret_shape(item) for item in node)
    return False


def check_no_secrets_in_args(ctx: GuardContext) -> GuardVerdict | None:
    """Deny a call carrying a credential-shaped string anywhere (code ``secret_detected``).

    Argument keys are scanned as well as values (both come from the caller), and so is the
    reason. The verdict names kinds and field paths, never the value; ``matched_fields`` lists
    the paths (as segment lists) the audit writer must redact.
    """
    if not _holds_secret_shape(ctx.raw_args) and not has_secret_shape(ctx.reason):
        return None  # the common case, decided without the field paths the verdict names
    kinds: set[str] = set()
    paths: list[list[str | int]] = []
    labels: set[str] = set()
    for path, text, is_key in _walk_strings(ctx.raw_args, ()):
        if not has_secret_shape(text):
            continue
        kinds.update(secret_kinds(text))
        if is_key:
            labels.add(f"{_label(path)}.<key>" if path else "<key>")
        else:
            paths.append(list(path))
            labels.add(_label(path))
    if has_secret_shape(ctx.reason):
        kinds.update(secret_kinds(ctx.reason))
        labels.add("reason")
    if not kinds:
        return None
    return GuardVerdict(
        allowed=False,
        message=(
            f"the call's arguments or reason hold what looks like a credential "
            f"({', '.join(sorted(kinds))}); pass a credential by its alias, never its value"
        ),
        code="secret_detected",
        metadata={
            "matched_kinds": sorted(kinds),
            "matched_fields": paths,
            "matched_field_labels": sorted(labels),
        },
    )


# --- check_no_raw_credentials ---------------------------------------------------------------

_CREDENTIAL_KEYS = frozenset(
    {
        # argument names
        "api_key",
        "apikey",
        "token",
        "password",
        "passwd",
        "secret",
        "client_id",
        "client_secret",
        "tenant_id",
        "subscription_id",
        "access_token",
        "refresh_token",
        "id_token",
        "private_key",
        # header names (compared case-insensitively)
        "authorization",
        "proxy-authorization",
        "auth",
        "x-api-key",
        "x-auth-token",
        "api-key",
        "x-access-token",
        "cookie",
        "private-token",
    }
)

_CREDENTIAL_QUERY_KEYS = frozenset(
    {
        "api_key",
        "apikey",
        "api-key",
        "key",
        "token",
        "access_token",
        "auth",
        "auth_token",
        "password",
        "secret",
        "client_secret",
        "sig",
        "signature",
        "x-amz-signature",
        "x-amz-credential",
    }
)


def _find_raw_credential(node: object, prefix: FieldPath) -> tuple[FieldPath, str] | None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            name = str(key).lower()
            path = (*prefix, str(key))
            if name.endswith("_alias"):
                continue  # naming an alias is the sanctioned way to pass a credential
            if name in _CREDENTIAL_KEYS and isinstance(value, str) and value.strip():
                return path, "argument or header"
            found = _find_raw_credential(value, path)
            if found is not None:
                return found
    elif isinstance(node, list | tuple):
        for index, item in enumerate(node):
            found = _find_raw_credential(item, (*prefix, index))
            if found is not None:
                return found
    return None


def _url_credential(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password or (parts.username and "@" in parts.netloc):
        return "userinfo"
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if name.lower() in _CREDENTIAL_QUERY_KEYS and value.strip():
            return f"query parameter '{name}'"
    return None


def check_no_raw_credentials(ctx: GuardContext) -> GuardVerdict | None:
    """Deny a raw credential value where an alias belongs (code ``raw_credential``).

    Looks for credential-named arguments or headers (``Authorization``, ``X-Api-Key``,
    ``Cookie``, ``token`` ...) holding a non-empty string, at any depth, and for a ``url``
    carrying userinfo or a credential-named query parameter. Keys ending ``_alias`` are the
    sanctioned form and are skipped.
    """
    found = _find_raw_credential(ctx.raw_args, ())
    if found is not None:
        path, _kind = found
        label = _label(path)
        return GuardVerdict(
            allowed=False,
            message=(
                f"'{label}' carries a raw credential; name a credential alias instead so the "
                "value is injected at delivery and never enters the call"
            ),
            code="raw_credential",
            metadata={"field": label, "matched_fields": [list(path)]},
        )
    url = ctx.raw_args.get("url")
    if isinstance(url, str):
        where = _url_credential(url)
        if where is not None:
            return GuardVerdict(
                allowed=False,
                message=(
                    f"the url carries a raw credential in its {where}; name a credential "
                    "alias instead"
                ),
                code="raw_credential",
                metadata={"field": "url", "where": where, "matched_fields": [["url"]]},
            )
    return None


# --- check_sensitive_paths ------------------------------------------------------------------

_PATH_KEYS = frozenset(
    {"path", "paths", "source_path", "dest_path", "restore_to", "file_path", "directory", "to"}
)


def _path_arguments(node: object, prefix: FieldPath) -> list[tuple[FieldPath, str]]:
    """``(field path, value)`` of every string under a path-named key, at any depth (keys
    sorted at every level, depth first). A verdict renders the field path it names
    (:func:`_label`); the common call names nothing sensitive and renders none."""
    found: list[tuple[FieldPath, str]] = []
    _collect_paths(node, prefix, found)
    return found


def _collect_paths(node: object, prefix: FieldPath, found: list[tuple[FieldPath, str]]) -> None:
    if isinstance(node, Mapping):
        for key in sorted(node, key=str):
            value = node[key]
            path = (*prefix, str(key))
            if str(key) in _PATH_KEYS:
                if isinstance(value, str):
                    found.append((path, value))
                elif isinstance(value, list | tuple):
                    for index, item in enumerate(value):
                        if isinstance(item, str):
                            found.append(((*path, index), item))
            if isinstance(value, Mapping | list | tuple):
                _collect_paths(value, path, found)
    elif isinstance(node, list | tuple):
        for index, item in enumerate(node):
            _collect_paths(item, (*prefix, index), found)


@lru_cache(maxsize=2048)
def _sensitive_rule(value: str) -> str | None:
    # core.paths tries every spelling a file system may give a name (~10 µs); the answer is a
    # pure function of the string and runs share paths, so it is cached.
    from proctor.core.paths import sensitive_reason

    return sensitive_reason(value)


def check_sensitive_paths(ctx: GuardContext) -> GuardVerdict | None:
    """Deny a call whose path arguments name a sensitive file (code ``sensitive_path``).

    Judges every path-named argument as sent (any depth, so a bundle's members count) and every
    workspace-relative path containment resolved, against ``proctor.core.paths``.
    """
    candidates: list[tuple[FieldPath | str, str]] = [*_path_arguments(ctx.raw_args, ())]
    candidates.extend(("resolved path", p) for p in ctx.workspace_relpaths)
    for where, value in candidates:
        rule = _sensitive_rule(value)
        if rule is not None:
            label = where if isinstance(where, str) else _label(where)
            return GuardVerdict(
                allowed=False,
                message=f"path argument '{label}' names a sensitive file (rule {rule})",
                code="sensitive_path",
                metadata={"field": label, "rule": rule},
            )
    return None


# --- writes ---------------------------------------------------------------------------------


def _written_paths(tool: str, args: Mapping[str, Any]) -> list[str]:
    if tool not in WRITE_TOOLS:
        return []
    return [value for _label_, value in _path_arguments(args, ())]


def _counts(entry: Mapping[str, Any]) -> bool:
    # A refused call changed nothing; it does not spend the run's budget.
    return entry.get("outcome") != "refused"


# the write guards' tallies (proctor.policy.write_tally starts them from the run's data)
WRITTEN_PATHS, CHANGING_CALLS = "proctor.written_paths", "proctor.changing_calls"

PRIOR_SHOWN = 20
"""Prior paths a ``bulk_write`` verdict lists (the first in sorted order; ``prior_count``
counts them all)."""


def _add_written(written: Distinct, entry: Mapping[str, Any]) -> Distinct:
    args = entry.get("args")
    if _counts(entry) and isinstance(args, Mapping):
        written.update(_written_paths(str(entry.get("tool", "")), args))
    return written


def _changing(count: int, entry: Mapping[str, Any]) -> int:
    return count + (entry.get("tool") in CHANGING_TOOLS and _counts(entry))


def check_no_bulk_writes(ctx: GuardContext) -> GuardVerdict | None:
    """Deny writing a second distinct path in one run (code ``bulk_write``).

    Counts paths written by ``fs.write``, ``fs.edit`` and ``fs.apply_bundle`` (every member of
    a bundle), in prior calls and in this one. The verdict lists the first
    :data:`PRIOR_SHOWN` prior paths in sorted order and counts them all.
    """
    current = _written_paths(ctx.tool_name, ctx.args)
    if not current:
        return None
    written = ctx.history_tally(WRITTEN_PATHS, lambda: Distinct(PRIOR_SHOWN), _add_written)
    new = sorted(set(current) - written.values)
    total = written.count + len(new)
    if not new or total <= 1:
        return None
    prior = {"prior_paths": list(written.first), "prior_count": written.count}
    return GuardVerdict(
        allowed=False,
        message=(
            f"this run would write {total} distinct paths; writing "
            "several files needs a confirmation for each"
        ),
        code="bulk_write",
        metadata={**prior, "new_paths": new},
    )


def _is_destructive(tool: str, args: Mapping[str, Any]) -> bool:
    if tool in ("fs.delete", "fs.restore"):
        return True
    if tool == "fs.write":
        return args.get("create") is not True
    if tool == "fs.apply_bundle":
        for value in args.values():
            if isinstance(value, list | tuple):
                for member in value:
                    if isinstance(member, Mapping) and (
                        member.get("op") in ("delete", "replace")
                        or member.get("action") in ("delete", "replace")
                        or "expected_digest" in member
                    ):
                        return True
    return False


def check_destructive_action(ctx: GuardContext) -> GuardVerdict | None:
    """Flag a delete, a restore or an overwrite (code ``destructive_action``).

    An overwrite is ``fs.write`` replacing an existing file (no ``create: true``) or a bundle
    with a delete or replace member.
    """
    if not _is_destructive(ctx.tool_name, ctx.args):
        return None
    return GuardVerdict(
        allowed=False,
        message=f"{ctx.tool_name} deletes or overwrites data; confirm this was intended",
        code="destructive_action",
        metadata={"tool": ctx.tool_name},
    )


def check_write_budget(ctx: GuardContext) -> GuardVerdict | None:
    """Deny a changing call once the run made ``write_budget`` of them (``write_budget_exceeded``).

    Changing calls are those of :data:`CHANGING_TOOLS`; refused prior calls do not count.
    """
    if ctx.tool_name not in CHANGING_TOOLS:
        return None
    count = ctx.history_tally(CHANGING_CALLS, int, _changing)
    if count < ctx.write_budget:
        return None
    return GuardVerdict(
        allowed=False,
        message=(
            f"the run's write budget is spent: {count} changing calls made, the limit is "
            f"{ctx.write_budget} (PROCTOR_WRITE_BUDGET)"
        ),
        code="write_budget_exceeded",
        metadata={"count": count, "budget": ctx.write_budget},
    )


SHIPPED_GUARDS: dict[str, GuardFn] = {
    "check_destructive_action": check_destructive_action,
    "check_no_bulk_writes": check_no_bulk_writes,
    "check_no_raw_credentials": check_no_raw_credentials,
    "check_no_secrets_in_args": check_no_secrets_in_args,
    "check_reason_not_empty": check_reason_not_empty,
    "check_sensitive_paths": check_sensitive_paths,
    "check_write_budget": check_write_budget,
}
"""Every shipped guard by its registered name (the reference kernel's names)."""
