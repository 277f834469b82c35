"""The schema ids of what ``--json`` prints, one per document a command prints.

Every JSON document the CLI prints on stdout names its shape in a top-level ``schema`` key,
so a program reading it can tell a result from an error and one version from the next. Errors
under ``--json`` are ``proctor.error.v1``: ``{"schema", "code", "message", "exit_code"}``
(plus ``details`` when the error has some), printed on stdout; stderr stays for people.
The list is in ``docs/cli-json.md``; a test runs every command and checks its id is here.
"""

from __future__ import annotations

__all__ = ["CLI_SCHEMAS", "ERROR_SCHEMA"]

ERROR_SCHEMA = "proctor.error.v1"

CLI_SCHEMAS: dict[str, str] = {
    "run / resume / run --directive": "proctor.run.v1",
    "run --submit / resume --submit": "proctor.submitted.v1",
    "approve / decline / directives run": "proctor.run.v1",
    "ask": "proctor.ask.v1",
    "audit verify": "proctor.audit_verify.v1",
    "audit tail": "proctor.audit_tail.v1",
    "audit forward --once": "proctor.audit_forward.v1",
    "audit accept-break": "proctor.audit_break.v1",
    "authority save / show": "proctor.authority_preset.v1",
    "authority list": "proctor.authority_list.v1",
    "check": "proctor.check.v1",
    "config set / show": "proctor.config.v1",
    "connector list": "proctor.connector.list.v1",
    "connector inspect": "proctor.connector.v1",
    "credential set": "proctor.credential_profile.v1",
    "credential list": "proctor.credential_list.v1",
    "directives list": "proctor.directives.v1",
    "history": "proctor.history.v1",
    "history RUN_ID": "proctor.history.run.v1",
    "init": "proctor.init.v1",
    "key show": "proctor.key.v1",
    "key rotate": "proctor.key_rotation.v1",
    "mcp pin": "proctor.mcp_pin.v1",
    "mcp diff": "proctor.mcp_diff.v1",
    "mcp approve": "proctor.mcp_approve.v1",
    "package": "proctor.package_projection.v1",
    "pending": "proctor.pending.v1",
    "process list": "proctor.process_list.v1",
    "process read": "proctor.process.output.v1",
    "process stop": "proctor.process.v1",
    "registry key": "proctor.registry.v1",
    "registry search": "proctor.registry_search.v1",
    "registry info": "proctor.registry_info.v1",
    "registry install / verify": "proctor.registry_install.v1",
    "registry publish": "proctor.registry_published.v1",
    "store init": "proctor.store_init.v1",
    "store migrate": "proctor.store_migrate.v1",
    "skill inspect": "proctor.skill_inspect.v1",
    "skill list": "proctor.skill_list.v1",
    "test": "proctor.test.v1",
    "tool list": "proctor.tool_list.v1",
    "trust": "proctor.trust.v1",
    "tool inspect": "proctor.tool.v1",
    "verify": "proctor.verify.v1",
    "worker list": "proctor.workers.v1",
    "errors under --json": ERROR_SCHEMA,
}
"""Command -> the schema id its ``--json`` document carries."""
