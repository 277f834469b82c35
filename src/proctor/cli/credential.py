"""``proctor credential``: store, list, remove and bind local credential profiles.

No command here takes secret material on its command line: ``set`` reads it from stdin with
``--from-stdin``. A stray argument (which may be a pasted secret) is refused without echoing it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from proctor.errors import UsageError

_STRAY = (
    "credential commands never take secret material as an argument; pipe it instead: "
    "printf '%s' \"$TOKEN\" | proctor credential set PROVIDER --profile NAME --from-stdin"
)
_LENIENT = {"ignore_unknown_options": True, "allow_extra_args": True}


def _refuse_stray(ctx: click.Context) -> None:
    # Never echo ctx.args: an unexpected argument is exactly where a pasted secret would be.
    if ctx.args:
        raise UsageError(_STRAY, code="secret_on_argv")


def _workspace_root(path: str | None) -> Path:
    from proctor.runtime.boundary.workspace import Workspace

    return Workspace(Path(path)).root if path else Workspace.discover(Path.cwd()).root


@click.group()
def credential() -> None:
    """Store and select credential profiles (material is read from stdin only).

    \b
    Example:
      proctor credential list
    """


@credential.command("set", context_settings=_LENIENT)
@click.argument("provider")
@click.option("--profile", "profile", required=True, help="Profile name to store.")
@click.option("--auth-mode", "auth_mode", default=None, help="Auth mode this material is for.")
@click.option("--audience", default=None, help="Bind the material to one https:// host.")
@click.option("--from-stdin", "from_stdin", is_flag=True, help="Read the material from stdin.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored profile as JSON.")
@click.pass_context
def set_(
    ctx: click.Context,
    provider: str,
    profile: str,
    auth_mode: str | None,
    audience: str | None,
    from_stdin: bool,
    as_json: bool,
) -> None:
    """Store a profile for PROVIDER from stdin and make it the provider's default.

    \b
    Example:
      printf %s "$TOKEN" | proctor credential set github --profile work --from-stdin
    """
    _refuse_stray(ctx)
    if not from_stdin:
        raise UsageError(_STRAY, code="secret_needs_stdin")
    if sys.stdin.isatty():
        raise UsageError(
            "pipe the material on stdin; nothing was stored", code="secret_needs_stdin"
        )
    value = sys.stdin.read()
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    from proctor.runtime.home.credentials import CredentialStore

    info = CredentialStore().set(provider, profile, value, auth_mode=auth_mode, audience=audience)
    if as_json:
        from proctor.cli.render import dump_json

        dump_json(info.to_dict(), schema="proctor.credential_profile.v1")
    else:
        click.echo(f"stored profile {info.name} for {info.provider} (default for {info.provider})")


@credential.command("list", context_settings=_LENIENT)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """List stored profiles (names, providers, modes, audiences; never material).

    \b
    Example:
      proctor credential list --json
    """
    _refuse_stray(ctx)
    from proctor.cli.paint import inert
    from proctor.runtime.home.credentials import CredentialStore

    profiles = [p.to_dict() for p in CredentialStore().list()]
    if as_json:
        from proctor.cli.render import dump_json

        dump_json({"profiles": profiles}, schema="proctor.credential_list.v1")
        return
    if not profiles:
        click.echo("no stored profiles")
    for row in profiles:
        marks = " (default)" if row["default"] else ""
        extra = "".join(f" {k}={row[k]}" for k in ("auth_mode", "audience") if row[k] is not None)
        if row["audience"] is None:
            extra += " packages=" + (",".join(row["packages"]) or "(none: bind one)")
        click.echo(inert(f"{row['profile']}: {row['provider']}{marks}{extra} [{row['backend']}]"))


@credential.command("remove", context_settings=_LENIENT)
@click.argument("profile")
@click.pass_context
def remove(ctx: click.Context, profile: str) -> None:
    """Remove a stored profile and its material.

    \b
    Example:
      proctor credential remove work
    """
    _refuse_stray(ctx)
    from proctor.runtime.home.credentials import CredentialStore

    info = CredentialStore().remove(profile)
    click.echo(f"removed profile {info.name} ({info.provider})")


@credential.command("bind", context_settings=_LENIENT)
@click.argument("profile")
@click.argument("identity", required=False)
@click.option("--provider", default=None, help="Bind for every requirement of this provider.")
@click.option("--skill", default=None, help="Bind for one skill's requirement (with --credential).")
@click.option("--credential", "credential_name", default=None, help="The requirement name.")
@click.option("--workspace", default=None, help="Workspace folder (default: discovered).")
@click.option("--yes", is_flag=True, help="Bind PROFILE to IDENTITY without asking (scripts).")
@click.pass_context
def bind(
    ctx: click.Context,
    profile: str,
    identity: str | None,
    provider: str | None,
    skill: str | None,
    credential_name: str | None,
    workspace: str | None,
    yes: bool,
) -> None:
    """Bind PROFILE to a package IDENTITY, or in this workspace by provider or requirement.

    A profile stored without --audience goes only to the package identities it is bound to
    (core:NAME, registry:PUBLISHER/NAME, local:PATH; a refusal credential_unbound names the
    identity). Binding one shows the profile and the identity and asks you to confirm; --yes
    skips the question.

    \b
    Examples:
      proctor credential bind work local:skills/triage
      proctor credential bind work --provider github
    """
    _refuse_stray(ctx)
    from proctor.errors import CredentialError
    from proctor.runtime.home.credentials import CredentialStore, bind_provider, bind_skill

    by_provider = provider is not None
    by_skill = skill is not None or credential_name is not None
    if identity is not None:
        if by_provider or by_skill:
            raise UsageError(
                "give IDENTITY, or --provider X, or --skill S with --credential C",
                code="usage_error",
            )
        _bind_package(profile, identity, yes)
        return
    if by_provider == by_skill or (by_skill and (skill is None or credential_name is None)):
        raise UsageError(
            "give IDENTITY, or --provider X, or --skill S with --credential C", code="usage_error"
        )
    info = CredentialStore().get(profile)
    if info is None:
        raise CredentialError(f"no stored profile {profile!r}", code="credential_profile_unknown")
    root = _workspace_root(workspace)
    if provider is not None:
        if info.provider != provider:
            raise CredentialError(
                f"profile {profile!r} is for provider {info.provider!r}, not {provider!r}",
                code="credential_provider_mismatch",
            )
        bind_provider(root, profile, provider)
        click.echo(f"bound {profile} for provider {provider} in this workspace")
        return
    assert skill is not None and credential_name is not None
    bind_skill(root, profile, skill, credential_name)
    click.echo(f"bound {profile} for {skill} credential {credential_name} in this workspace")


def _bind_package(profile: str, identity: str, yes: bool) -> None:
    """Show what the binding gives (through the terminal's rendering boundary: an identity
    is a path a package's author chose), ask, and bind.

    Raises:
        CredentialError: ``credential_profile_unknown``, ``credential_identity_invalid``.
        UsageError: ``terminal_required`` without a terminal and without --yes.
    """
    from proctor.cli.paint import inert, note
    from proctor.errors import CredentialError
    from proctor.runtime.home.credentials import CredentialStore
    from proctor.runtime.home.credentials.model import check_identity

    check_identity(identity)
    store = CredentialStore()
    info = store.get(profile)
    if info is None:
        raise CredentialError(f"no stored profile {profile!r}", code="credential_profile_unknown")
    err = sys.stderr
    err.write(inert(f"profile {info.name} (provider {info.provider}) will be given to:\n"))
    err.write(inert(f"  package {identity}\n"))
    where = info.audience or "any host the package's connection is allowed to reach"
    err.write(inert(f"  sent to: {where}\n"))
    if info.packages:
        err.write(inert(f"  already bound to: {', '.join(info.packages)}\n"))
    note()
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(
                "no terminal to ask y/N on; to bind without asking: proctor credential bind"
                f" {profile} {identity} --yes",
                code="terminal_required",
            )
        if not click.confirm("Bind?", default=False, err=True):
            click.echo("nothing was bound", err=True)
            sys.exit(1)
    bound = store.bind_package(profile, identity)
    click.echo(inert(f"bound profile {bound.name} to {identity}"))
