"""``proctor trust``: a person trusts the guard modules this workspace names, by digest.

A workspace's guard modules are Python that proctor runs in its own process, with the
person's rights; a repository someone cloned brings its own. Until a person trusted exactly
their bytes, every command that would load them refuses ``guards_untrusted``. This command
shows the config and every module in full, through the terminal's rendering boundary
(:mod:`proctor.cli.paint`: control characters, escapes and bidirectional overrides shown as
escapes, so what you read is what runs), asks, audits ``guards_trusted`` in the workspace's
audit log and records the digest in the home (:mod:`proctor.runtime.home.trust`). The bytes
shown, hashed and recorded are read once: a file changed while you read is a new digest, asked
again. ``--json`` prints ``proctor.trust.v1``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from proctor.errors import ProctorError, UsageError

SCHEMA = "proctor.trust.v1"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")

_HELP = """Review the guard modules this workspace names and trust them to run.

Guard modules (named in proctor.toml's [policy] guards) are Python that proctor runs in its
own process. Until you trust their exact bytes, run, check, mcp, worker and the console refuse
them (guards_untrusted); after any change they are asked again. The trust is kept in your
proctor home, never in the workspace, and recorded in the audit log.

\b
Example:
  proctor trust                  # show every file, then ask
  proctor trust --show --json    # what is trusted now, and what would be
  proctor trust --yes --digest sha256:...   # a script trusting exactly what it reviewed

CI and tests may set PROCTOR_TRUST_WORKSPACE=1 instead (each use is audited).
"""


@click.command("trust", help=_HELP)
@click.option("--show", is_flag=True, help="Show what is and would be trusted; change nothing.")
@click.option("--revoke", is_flag=True, help="Withdraw this workspace's trust.")
@click.option("--yes", is_flag=True, help="Do not ask (scripts).")
@click.option(
    "--digest",
    metavar="sha256:HEX",
    help="Trust only if the guard files' digest is this one (from --show --json).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.trust.v1 document.")
def trust(show: bool, revoke: bool, yes: bool, digest: str | None, as_json: bool) -> None:
    from proctor.policy.guard_files import read_guard_files
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.home.trust import trust_record, trust_state

    if show + revoke > 1 or ((show or revoke) and (yes or digest)):
        raise UsageError(
            "--show and --revoke change nothing but what they say; give one, without --yes or"
            " --digest",
            code="trust_usage",
        )
    if digest is not None and not _DIGEST.match(digest):
        raise UsageError("--digest is sha256: and 64 lowercase hex digits", code="digest_invalid")
    root = Workspace.discover(Path.cwd()).root
    environ = os.environ
    if revoke:
        _revoke(root, as_json)
        return
    files = read_guard_files(root)
    state = trust_state(files, environ)
    held = trust_record(files.root, environ)
    doc = _document(files, state, held)
    out = sys.stderr if as_json else sys.stdout
    if show or state in ("none", "trusted"):
        if not as_json:
            _summary(out, files, state, held)
        _finish(doc, "shown" if show else "already_trusted" if state == "trusted" else "none",
                as_json)  # fmt: skip
        return
    _render(out, files, state, held)
    if digest is not None and digest != files.digest:
        raise UsageError(
            f"--digest is not the digest of the guard files as they are now ({files.digest});"
            " nothing was trusted",
            code="digest_mismatch",
        )
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(
                "no terminal to ask y/N on; to trust exactly the files shown above without"
                f" asking: proctor trust --yes --digest {files.digest}",
                code="terminal_required",
            )
        if not click.confirm(
            "Trust these guard modules to run as Python in proctor's process?",
            default=False,
            err=True,
        ):
            click.echo("nothing was trusted", err=True)
            _finish(doc, "declined", as_json)
            sys.exit(1)
    record = _record(root, files, "yes" if yes else "prompt")
    doc["state"] = "trusted"
    doc["trusted"] = {"workspace": record.workspace, **record.to_json()}
    if not as_json:
        click.echo(f"trusted {files.digest}")
    _finish(doc, "trusted", as_json)


def _document(files: Any, state: str, held: Any) -> dict[str, Any]:
    return {
        "workspace": str(files.root),
        "state": state,
        "digest": files.digest if files.modules else None,
        "files": [
            {
                "path": f.path,
                "kind": "config" if f in files.config else "module",
                "sha256": f.sha256,
                "bytes": len(f.data),
            }
            for f in files.files
        ],
        "trusted": None if held is None else {"workspace": held.workspace, **held.to_json()},
    }


def _finish(doc: dict[str, Any], action: str, as_json: bool) -> None:
    if as_json:
        from proctor.cli.render import dump_json

        dump_json({**doc, "action": action}, schema=SCHEMA)


def _changed(files: Any, held: Any) -> list[str]:
    """The paths whose bytes differ from the trusted record's (added, changed or gone)."""
    now = {f.path: f.sha256 for f in files.files}
    then = dict(held.files) if held is not None else {}
    return sorted(p for p in now.keys() | then.keys() if now.get(p) != then.get(p))


def _summary(out: Any, files: Any, state: str, held: Any) -> None:
    from proctor.cli.paint import inert

    words = {
        "none": "names no guard module: nothing to trust",
        "trusted": "guard modules are trusted",
        "changed": "guard files changed since they were trusted: they will not run",
        "untrusted": "guard modules are not trusted: they will not run",
    }
    out.write(f"workspace {inert(files.root)}: {words[state]}\n")
    for f in files.files:
        out.write(f"  {inert(f.path)}  {f.sha256}  {len(f.data)} bytes\n")
    if files.modules:
        out.write(f"digest {files.digest}\n")
    if held is not None:
        when, who = inert(held.trusted_at), inert(held.trusted_by)
        out.write(f"trusted {held.digest} at {when} by {who}\n")
        if state == "changed":
            out.write(f"changed since: {inert(', '.join(_changed(files, held)))}\n")


def _render(out: Any, files: Any, state: str, held: Any) -> None:
    """Every file the digest covers, whole, through the rendering boundary, then the digest."""
    from proctor.cli.paint import inert, note

    _summary(out, files, state, held)
    for f in files.files:
        out.write(f"\n--- {inert(f.path)} ({f.sha256})\n")
        text = f.data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            out.write(f"{number:5} | {inert(line)}\n")
    out.write(f"\nthese files run as Python in proctor's process; digest {files.digest}\n")
    out.flush()
    note(out)  # before the question: the person knows what they read was escaped


def _record(root: Path, files: Any, how: str) -> Any:
    """Audit the trust in the workspace's log, then record it in the home; a trust the log
    could not keep is not recorded."""
    from proctor.runtime.engine.approvals import os_author
    from proctor.runtime.home.trust import record_trust
    from proctor.runtime.records.audit import AuditLog, audit_path

    author = os_author()
    audit = AuditLog(audit_path(root, os.environ))
    try:
        written = audit.emit(
            "guards_trusted",
            run_id=None,
            step_index=None,
            fsync=True,
            digest=files.digest,
            files=[[f.path, f.sha256] for f in files.files],
            trusted_by=author,
            how=how,
        )
        if written.get("audit_persisted") is False:
            raise ProctorError(
                "the trust could not be recorded in the audit log, so nothing was trusted; free"
                " the disk or fix the log's permissions and run it again",
                code="audit_unwritable",
            )
        return record_trust(files, os.environ, trusted_by=author, how=how)
    finally:
        audit.close()


def _revoke(root: Path, as_json: bool) -> None:
    from proctor.runtime.home.trust import revoke_trust
    from proctor.runtime.records.audit import AuditLog, audit_path

    had = revoke_trust(root, os.environ)
    if had:
        audit = AuditLog(audit_path(root, os.environ))
        try:
            audit.emit("guards_trust_revoked", run_id=None, step_index=None, fsync=True)
        finally:
            audit.close()
    if as_json:
        from proctor.cli.render import dump_json

        dump_json(
            {"workspace": str(root.resolve()), "action": "revoked" if had else "none"},
            schema=SCHEMA,
        )
    else:
        click.echo("trust withdrawn" if had else "nothing was trusted here")
