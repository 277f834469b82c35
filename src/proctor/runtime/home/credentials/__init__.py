"""Credentials: local encrypted profiles, project bindings, resolution and readiness.

See ``docs/credentials.md``. The driver calls :func:`resolve_credentials` once per command with
one :class:`EnvSnapshot`; ``skill inspect`` and ``needs_credential`` use :func:`readiness`.
"""

from __future__ import annotations

from proctor.runtime.home.credentials.audience import audience_host, normalize_audience
from proctor.runtime.home.credentials.bindings import (
    Bindings,
    bind_provider,
    bind_skill,
    load_bindings,
)
from proctor.runtime.home.credentials.environment import EnvSnapshot, snapshot_environment
from proctor.runtime.home.credentials.model import SOURCES, ResolvedCredential, Secret, Source
from proctor.runtime.home.credentials.resolve import (
    Readiness,
    readiness,
    resolve_credentials,
    setup_commands,
)
from proctor.runtime.home.credentials.store import CredentialStore, ProfileInfo, home_dir

__all__ = [
    "SOURCES",
    "Bindings",
    "CredentialStore",
    "EnvSnapshot",
    "ProfileInfo",
    "Readiness",
    "ResolvedCredential",
    "Secret",
    "Source",
    "audience_host",
    "bind_provider",
    "bind_skill",
    "home_dir",
    "load_bindings",
    "normalize_audience",
    "readiness",
    "resolve_credentials",
    "setup_commands",
    "snapshot_environment",
]
