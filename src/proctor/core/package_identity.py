"""The shape of a package identity, checked wherever a person types one.

An identity is decided by where a package came from, never by its own text (see
:attr:`proctor.runtime.skills.LoadedSkill.identity`): ``core:<name>``,
``registry:<publisher>/<name>``, ``local:<workspace-relative path>`` or
``local:outside/<digest>``. A person names one to bind a credential profile to it
(``proctor credential bind``) or to move its state (``proctor store migrate``).
"""

from __future__ import annotations

__all__ = ["IDENTITY_KINDS", "MAX_IDENTITY_CHARS", "is_identity"]

IDENTITY_KINDS = ("core:", "registry:", "local:")
MAX_IDENTITY_CHARS = 1024


def is_identity(text: str) -> bool:
    """Whether ``text`` reads as a package identity: a known kind and something after it,
    printable (no control, bidirectional or invisible character), 1,024 characters at most."""
    return (
        text.startswith(IDENTITY_KINDS)
        and text not in IDENTITY_KINDS
        and len(text) <= MAX_IDENTITY_CHARS
        and text.isprintable()
    )
