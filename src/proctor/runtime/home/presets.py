"""Saved authority presets: ``<home>/authority/<NAME>.json``.

A preset is an authority a person saved with the workspaces it may be used in::

    {"schema": "proctor.authority_preset.v1", "name": "notes",
     "authority": {"effects": "ask", "standing_approvals": [...]},
     "workspaces": ["/path/to/project"]}

``proctor run --authority NAME`` applies it only inside one of those workspaces (compared by
real path); anywhere else it is refused, so a wide preset saved for one project never reaches
another by accident.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.core.authority import Authority, parse_authority
from proctor.errors import ParseError, UsageError

__all__ = [
    "PRESET_SCHEMA",
    "list_presets",
    "load_preset",
    "preset_authority",
    "remove_preset",
    "save_preset",
]

PRESET_SCHEMA = "proctor.authority_preset.v1"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def _folder(environ: Mapping[str, str] | None) -> Path:
    from proctor.runtime.home.keys import home_dir

    home, _ = home_dir(environ)
    return home / "authority"


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise UsageError(
            "a preset name is 1-64 of a-z, 0-9, '_' and '-', starting with a letter or digit",
            code="preset_name_invalid",
        )


def save_preset(
    name: str,
    authority_doc: Any,
    workspaces: list[Path],
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Validate and save a preset (replacing one of the same name); returns the document.

    Raises:
        UsageError: ``preset_name_invalid``, ``authority_invalid``, ``preset_no_workspace``.
    """
    _check_name(name)
    if isinstance(authority_doc, dict) and "authority" in authority_doc:
        authority_doc = authority_doc["authority"]
    authority = parse_authority(authority_doc, set_by="preset")
    if not workspaces:
        raise UsageError("a preset names at least one workspace", code="preset_no_workspace")
    doc = {
        "schema": PRESET_SCHEMA,
        "name": name,
        "authority": {k: v for k, v in authority.to_json().items() if k != "set_by"},
        "workspaces": sorted({os.path.realpath(w) for w in workspaces}),
    }
    folder = _folder(environ)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = folder / f".{name}.json.tmp"
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(folder / f"{name}.json")
    return doc


def load_preset(name: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A saved preset's document.

    Raises:
        UsageError: ``preset_not_found``, ``preset_invalid``.
    """
    _check_name(name)
    path = _folder(environ) / f"{name}.json"
    from proctor.contracts import json_strict

    try:
        doc = json_strict.loads(path.read_bytes(), source=f"{name}.json")
    except FileNotFoundError as exc:
        raise UsageError(f"no authority preset named {name!r}", code="preset_not_found") from exc
    except OSError as exc:
        raise UsageError(f"authority preset {name!r} is unreadable", code="preset_invalid") from exc
    except ParseError as exc:
        # a limit given twice would grant one authority here and another to a reader keeping
        # the first copy
        raise UsageError(
            f"authority preset {name!r} is unreadable ({exc.code}: {exc})", code="preset_invalid"
        ) from None
    if not isinstance(doc, dict) or doc.get("schema") != PRESET_SCHEMA:
        raise UsageError(f"authority preset {name!r} is not a preset", code="preset_invalid")
    return doc


def list_presets(environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every saved preset, by name."""
    folder = _folder(environ)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            out.append(load_preset(path.stem, environ))
        except UsageError:
            continue
    return out


def remove_preset(name: str, environ: Mapping[str, str] | None = None) -> None:
    """Delete a preset.

    Raises:
        UsageError: ``preset_not_found``.
    """
    load_preset(name, environ)
    (_folder(environ) / f"{name}.json").unlink()


def preset_authority(
    name: str, workspace_root: Path, environ: Mapping[str, str] | None = None
) -> Authority:
    """The preset's authority, when ``workspace_root`` is one of its workspaces.

    Raises:
        UsageError: ``preset_not_found``, ``preset_invalid``, ``preset_not_for_workspace``.
    """
    doc = load_preset(name, environ)
    here = os.path.realpath(workspace_root)
    if here not in (doc.get("workspaces") or []):
        raise UsageError(
            f"authority preset {name!r} does not list this workspace; save it again with"
            " --workspace to allow it here",
            code="preset_not_for_workspace",
        )
    return parse_authority(doc.get("authority"), set_by="preset")
