"""Where connectors are found, and each manifest read strictly.

A run's connectors are those in its skill package's ``connectors/<name>/connector.yaml`` and
in the workspace's ``connectors/<name>/connector.yaml``; a package's connector shadows the
workspace's of the same name (the package was written against it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from proctor.contracts.values import dataclass
from proctor.errors import ParseError

if TYPE_CHECKING:
    from proctor.contracts.connector import Connector

__all__ = ["LoadedConnector", "find_connectors", "load_connector_file"]

_MAX_BYTES = 1024 * 1024
_MAX_CONNECTORS = 256


@dataclass(frozen=True)
class LoadedConnector:
    """A parsed connector, its origin and where it was read (a relative label)."""

    connector: Connector
    origin: str
    source: str


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
    root = base / "connectors"
    if not root.is_dir() or root.is_symlink():
        return {}
    found: dict[str, LoadedConnector] = {}
    for child in sorted(root.iterdir())[:_MAX_CONNECTORS]:
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


def find_connectors(
    workspace_root: Path, package: Path | None = None, package_label: str = ""
) -> dict[str, LoadedConnector]:
    """Every connector a run of ``package`` sees, by name (the package's shadow the workspace's).

    Raises:
        ParseError: a manifest is refused (the message names its file and line).
    """
    found = _folder(workspace_root, "")
    if package is not None and package.resolve() != workspace_root.resolve():
        found.update(_folder(package, package_label or package.name))
    return dict(sorted(found.items()))
