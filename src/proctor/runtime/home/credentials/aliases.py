"""Credential aliases: the reference kernel's ``auth_alias``, resolved when the call is made.

A directive declares no credential requirements (its format has no place for them): its
``http_request`` names an alias (``auth_alias: github_token``) and the value is found when the
call runs, in the reference kernel's order:

1. a value the host handed this run for that name (``request_secrets``);
2. ``AURO_SECRET_<ALIAS>`` in the process environment (the alias upper-cased, the value
   stripped, an empty value counts as unset), read exactly as the reference kernel reads it,
   so a deployment that injects those variables keeps working; the workspace ``.env`` is not
   read for it, as the reference does not;
3. a stored profile: the one a workspace binding names (``.proctor/credentials.json``: the
   directive's skill binding for the alias, else the provider binding named like the alias),
   else the profile named exactly like the alias.

An alias is an identifier (letters, digits, ``_`` and ``-``); anything else resolves to
nothing. The value is never returned to the model, written to a record or logged: it is
delivered into the ``Authorization`` header by ``http.request`` alone, and added to the run's
taint set (scrubbed from every output) before it is sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from proctor.runtime.home.credentials.bindings import load_bindings
from proctor.runtime.home.credentials.model import ResolvedCredential, Secret, Source
from proctor.runtime.home.credentials.store import CredentialStore

__all__ = ["ALIAS", "ENV_PREFIX", "resolve_alias"]

ENV_PREFIX = "AURO_SECRET_"
"""The reference kernel's environment prefix for an alias's value."""
ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
"""What an alias may be (the reference keeps aliases to letters, digits, ``_`` and ``-``)."""


def resolve_alias(
    alias: str,
    *,
    skill: str,
    workspace_root: Path,
    environ: Mapping[str, str],
    store: CredentialStore,
    host_secrets: Mapping[str, str] | None = None,
) -> ResolvedCredential | None:
    """The credential ``alias`` names now, or ``None`` when no source has it.

    Raises:
        CredentialError: a binding names a profile that is not stored
            (``credential_profile_unknown``), the bindings file is invalid, or a stored
            profile does not decrypt (``credential_decrypt_failed``): a broken store is not
            an absent alias.
    """
    if not ALIAS.match(alias):
        return None
    host = (host_secrets or {}).get(alias)
    if host is not None and host.strip():
        return _made(alias, "host", Secret(host.strip()))
    value = environ.get(ENV_PREFIX + alias.upper())
    if value is not None and value.strip():
        return _made(alias, "env", Secret(value.strip()))
    bindings = load_bindings(workspace_root)
    bound = bindings.skills.get(skill, {}).get(alias) or bindings.providers.get(alias)
    source: Source = "binding"
    if bound is None:
        bound, source = alias, "profile"
        if store.get(alias) is None:
            return None
    if store.get(bound) is None:
        from proctor.errors import CredentialError

        raise CredentialError(
            f"the binding for credential alias {alias!r} names profile {bound!r}, which is not"
            " stored here",
            code="credential_profile_unknown",
        )
    info = store.get(bound)
    assert info is not None
    return ResolvedCredential(
        name=alias,
        provider=info.provider,
        mode=info.auth_mode or "api_key",
        env=ENV_PREFIX + alias.upper(),
        source=source,
        profile=info.name,
        audience=info.audience,
        secret=store.material(info.name),
    )


def _made(alias: str, source: Source, secret: Secret) -> ResolvedCredential:
    return ResolvedCredential(
        name=alias,
        provider=alias,
        mode="api_key",
        env=ENV_PREFIX + alias.upper(),
        source=source,
        profile=None,
        audience=None,
        secret=secret,
    )
