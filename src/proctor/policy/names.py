"""How the reference Python kernel's names map to proctor's, so its policy files keep their meaning.

A policy file written for the reference kernel scopes rules with that kernel's tool names
(``read_file``, ``write_file`` ...). proctor reads those files unchanged: when a rule's ``tools``
list names a reference tool, the rule covers every proctor tool in the table below.

| reference tool       | proctor tools                            |
| -------------------- | ---------------------------------------- |
| `read_file`          | `fs.read`                                |
| `write_file`         | `fs.write`, `fs.edit`, `fs.apply_bundle` |
| `list_dir`           | `fs.list`                                |
| `delete_file`        | `fs.delete`                              |
| `restore_file`       | `fs.restore`                             |
| `http_request`       | `http.request`                           |
| `echo`               | `echo`                                   |
| `list_tools`         | `tool.list`                              |
| `list_directives`    | `directive.list`                         |
| `validate_directive` | `directive.validate`                     |
| `resolve_secret`     | `credential.resolve`                     |

``write_file`` covers every proctor tool that writes a file's content: a reference rule on
writes (sensitive paths, bulk writes) must not be sidestepped by editing or bundling instead.

``fs.search`` has no reference counterpart (the reference has no search tool); proctor's own
shipped rules cover it. Guard names need no table: proctor's shipped guards are registered under
exactly the reference kernel's guard names.

A name in a rule's ``tools`` list is resolved as: a proctor tool name first, then a reference
name from this table; anything else is a load error.
"""

from __future__ import annotations

__all__ = ["REFERENCE_GUARD_NAMES", "REFERENCE_TOOL_NAMES", "WRITE_TOOLS"]

WRITE_TOOLS: tuple[str, ...] = ("fs.write", "fs.edit", "fs.apply_bundle")
"""Every proctor tool that writes a file's content (what the reference's ``write_file`` means)."""

REFERENCE_TOOL_NAMES: dict[str, tuple[str, ...]] = {
    "read_file": ("fs.read",),
    "write_file": WRITE_TOOLS,
    "list_dir": ("fs.list",),
    "delete_file": ("fs.delete",),
    "restore_file": ("fs.restore",),
    "http_request": ("http.request",),
    "echo": ("echo",),
    "list_tools": ("tool.list",),
    "list_directives": ("directive.list",),
    "validate_directive": ("directive.validate",),
    "resolve_secret": ("credential.resolve",),
}
"""Reference tool name -> the proctor tools a rule naming it covers."""

REFERENCE_GUARD_NAMES: tuple[str, ...] = (
    "check_destructive_action",
    "check_no_bulk_writes",
    "check_no_raw_credentials",
    "check_no_secrets_in_args",
    "check_reason_not_empty",
    "check_sensitive_paths",
    "check_write_budget",
)
"""The reference kernel's shipped guard names; proctor registers its shipped guards under them."""
