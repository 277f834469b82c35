"""Optional extras: a command that needs one refuses, naming the extra, before importing it.

A base install (``pip install proctor``) lacks the web stack and the MCP SDK; a command that
needs them says which extra to install rather than ending in a ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib.util

from proctor.errors import ConfigError

__all__ = ["EXTRAS", "require_extra"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "console": ("starlette", "uvicorn", "jinja2", "multipart"),
    "mcp": ("mcp", "mcp_types"),
    "registry": ("starlette", "uvicorn"),
}
"""The modules each extra brings (pyproject.toml's optional dependencies), by import name."""


def require_extra(extra: str, command: str, *, code: str = "extra_missing") -> None:
    """Refuse to go on when a module of ``extra`` cannot be imported.

    Raises:
        ConfigError: ``code`` (exit 3), naming the missing modules and the pip command that
            installs the extra.
    """
    missing = [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"{command} needs {', '.join(missing)}, which this install lacks: install the"
            f" extra with pip install 'proctor[{extra}]' (from a clone: pip install -e"
            f" '.[{extra}]')",
            code=code,
        )
