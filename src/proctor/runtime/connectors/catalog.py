"""Where connectors are found, and each manifest read strictly.

A run's connectors are those in its skill package's ``connectors/<name>/connector.yaml``, in
the workspace's ``connectors/<name>/connector.yaml`` and the connector packages installed from
a registry (``.proctor/added-connectors/<publisher>/<name>/<version>/``, the newest version
the workspace's required tier allows, verified against its signature on every read). A
package's connector shadows the workspace's of the same name (the package was written against
it), and the workspace's an installed one (yours take precedence).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from proctor.contracts.values import dataclass, replace
from proctor.errors import ParseError
from proctor.runtime.boundary.plain_file import folder

if TYPE_CHECKING:
    from proctor.contracts.connector import Connector

__all__ = ["MAX_CONNECTORS", "LoadedConnector", "find_connectors", "load_connector_file"]

_MAX_BYTES = 1024 * 1024
MAX_CONNECTORS = 256
"""The most entries of a ``connectors`` folder a run reads."""


@dataclass(frozen=True)
class LoadedConnector:
    """A parsed connector, its origin and where it was read (a relative label)."""

    connector: Connector
    origin: str
    source: str
    identity: str = ""
    """The package identity of an installed connector (``registry:<publisher>/<name>``)."""


def load_connector_file(path: Path, label: str) -> LoadedConnector:
    """Read one ``connector.yaml``.

    Raises:
        ParseError: the manifest is refused (see :func:`proctor.parser.connector.parse_connector`),
            ``connector_unreadable`` when it is not a UTF-8 file under 1 MiB.
    """
    try:
        if path.is_symlink() or path.stat().st_size > _MAX_BYTES:
            raise ParseError(
                "connector.yaml must be a regular file under 1 MiB",
                file=label,
                code="connector_unreadable",
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ParseError(
            "connector.yaml is not a readable UTF-8 file", file=label, code="connector_unreadable"
        ) from exc
    from proctor.parser.connector import origin_of, parse_connector  # a manifest exists

    connector = parse_connector(text, label, folder_name=path.parent.name)
    return LoadedConnector(connector, origin_of(connector), label)


def _folder(base: Path, label: str) -> dict[str, LoadedConnector]:
    # looked at as text first: most runs have no connectors/ folder, and are asked on each call
    where = os.path.join(base, "connectors")
    if not folder(where) or os.path.islink(where):
        return {}
    root = Path(where)
    found: dict[str, LoadedConnector] = {}
    for child in sorted(root.iterdir())[:MAX_CONNECTORS]:
        manifest = child / "connector.yaml"
        if child.is_dir() and not child.is_symlink() and manifest.is_file():
            rel = (
                f"{label}/connectors/{child.name}/connector.yaml"
                if label
                else (f"connectors/{child.name}/connector.yaml")
            )
            loaded = load_connector_file(manifest, rel)
            found[loaded.connector.name] = loaded
    return found


def _installed(
    workspace_root: Path, environ: Mapping[str, str] | None
) -> dict[str, LoadedConnector]:
    from proctor.runtime.packages.installed import ADDED_CONNECTORS

    if not folder(os.path.join(workspace_root, ADDED_CONNECTORS)):
        return {}  # none installed (most workspaces): nothing more is imported
    from proctor.parser.connector import origin_of, parse_connector
    from proctor.runtime.packages.installed import (
        resolve_installed,
        trusted_registry_keys,
        verify_folder,
    )
    from proctor.runtime.packages.manifest import RegistryRefused

    base = workspace_root / ADDED_CONNECTORS
    trusted = trusted_registry_keys(os.environ if environ is None else environ)
    found: dict[str, LoadedConnector] = {}
    for publisher in _names(base):
        for name in _names(base / publisher):
            held = resolve_installed(
                f"{publisher}/{name}", workspace_root=workspace_root, trusted=trusted,
                kind="connector",
            )  # fmt: skip
            label = f"{publisher}/{name}@{held.version}/connector.yaml"
            # parse the very bytes a verification read (never the file read again after it)
            _, package = verify_folder(held.folder, trusted)
            if package.content_digest != held.content_digest:
                raise RegistryRefused(
                    f"{publisher}/{name}@{held.version} changed while it was read",
                    code="package_modified",
                )
            text = package.files["connector.yaml"].decode("utf-8")
            connector = parse_connector(text, label, folder_name=name)
            loaded = LoadedConnector(connector, origin_of(connector), label)
            if name in found:
                raise ParseError(
                    f"two installed connectors are named {name!r} ({found[name].identity} and "
                    f"registry:{publisher}/{name}); remove one, or copy the one to use into "
                    f"connectors/{name}/",
                    file=label,
                    code="connector_ambiguous",
                )
            found[name] = replace(loaded, identity=f"registry:{publisher}/{name}")
    return found


def _names(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.is_dir() and not p.is_symlink())


def find_connectors(
    workspace_root: Path,
    package: Path | None = None,
    package_label: str = "",
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, LoadedConnector]:
    """Every connector a run of ``package`` sees, by name (the package's shadow the workspace's,
    the workspace's an installed one). ``environ`` finds the home whose trusted registry keys
    verify installed connectors (default ``os.environ``).

    Raises:
        ParseError: a manifest is refused (the message names its file and line), or two
            installed connectors share a name (``connector_ambiguous``).
        RegistryRefused: an installed connector does not verify (``package_modified``,
            ``registry_untrusted``, ``tier_too_low`` ...).
    """
    found = _installed(workspace_root, environ)
    found.update(_folder(workspace_root, ""))
    if package is not None and not _same_folder(package, workspace_root):
        found.update(_folder(package, package_label or package.name))
    return dict(sorted(found.items()))


def _same_folder(one: Path, other: Path) -> bool:
    """Whether two paths name the same folder: the same file (two ``stat`` calls), or, when
    either cannot be looked at, the same real path."""
    try:
        return os.path.samestat(os.stat(one), os.stat(other))
    except OSError:
        return os.path.realpath(one) == os.path.realpath(other)
