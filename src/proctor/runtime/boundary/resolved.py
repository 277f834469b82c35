"""What containment yields, and how it refuses: :class:`Resolved` and :func:`refusal`.

A :class:`Resolved` is a path :meth:`proctor.runtime.boundary.workspace.Workspace.resolve`
decided: its real absolute form for opening and its shown form for every result and message.
Refusals carry the shown form only, bounded and on one line, so no message names a host path or
forges a log line.
"""

from __future__ import annotations

from pathlib import Path

from proctor.errors import RefusedCall

__all__ = ["Resolved", "check_links", "joined", "refusal", "shown"]

_SHOWN_CHARS = 200


class Resolved:
    """A contained path: ``abs`` is the real absolute path, ``rel`` its shown POSIX form
    (workspace-relative, ``"."`` for the root; ``$NAME/...`` inside another root). ``root`` is
    ``""`` for the workspace or ``$NAME``; ``base`` the real folder of that root. ``abs`` and
    ``base`` are for opening (through :func:`proctor.runtime.boundary.fds.open_below` with
    ``base`` and :attr:`inner`), never for showing.

    Immutable, compared and hashed by its fields like a frozen dataclass. ``abs`` may be given
    as the real path's text: the :class:`~pathlib.Path` is built when first asked for (most
    tools open through :attr:`where` and never need it; building one costs more than the rest
    of a resolution's bookkeeping)."""

    __slots__ = ("_abs", "base", "rel", "root")

    _abs: Path | str
    rel: str
    root: str
    base: str

    def __init__(self, abs: Path | str, rel: str, root: str = "", base: str = "") -> None:
        put = object.__setattr__
        put(self, "_abs", abs)
        put(self, "rel", rel)
        put(self, "root", root)
        put(self, "base", base)

    @property
    def abs(self) -> Path:
        """The real absolute path (for opening only)."""
        held = self._abs
        if isinstance(held, str):
            held = Path(held)
            object.__setattr__(self, "_abs", held)
        return held

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field '{name}' of a Resolved path")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field '{name}' of a Resolved path")

    def __reduce__(self) -> tuple[type[Resolved], tuple[Path | str, str, str, str]]:
        return (Resolved, (self._abs, self.rel, self.root, self.base))

    def _key(self) -> tuple[str, str, str, str]:
        return (str(self._abs), self.rel, self.root, self.base)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Resolved)
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Resolved(abs={self.abs!r}, rel={self.rel!r}, root={self.root!r}, base={self.base!r})"
        )

    @property
    def inner(self) -> str:
        """The path relative to its own root (``"."`` for the root itself)."""
        if not self.root:
            return self.rel[2:] if self.rel.startswith("./") else self.rel
        return self.rel[len(self.root) + 1 :] if self.rel != self.root else "."

    @property
    def where(self) -> tuple[str, str]:
        """``(base, inner)``: the real root folder and the canonical path below it."""
        if self.base:
            return self.base, self.inner
        return str(self.abs.parent), self.abs.name


def shown(text: str) -> str:
    """A caller-supplied path as messages show it: bounded, one line."""
    flat = text.replace("\n", "\\n").replace("\r", "\\r")
    return flat if len(flat) <= _SHOWN_CHARS else flat[:_SHOWN_CHARS] + "..."


def refusal(code: str, message: str, path: str, rule: str | None = None) -> RefusedCall:
    """A containment refusal with ``details = {path, rule}`` (``path`` workspace-relative)."""
    details: dict[str, str] = {"path": shown(path)}
    if rule is not None:
        details["rule"] = rule
    return RefusedCall(message, code=code, details=details)


def joined(root: str, below: str) -> str:
    """The shown form of ``below`` in ``root`` (``""`` is the workspace)."""
    if root:
        return root if below == "." else f"{root}/{below}"
    return "./" + below if below.startswith("$") else below


def check_links(rel: str, links: int) -> None:
    """Refuse a regular file with more than one hard link: another name for it may be a file
    outside the workspace or a sensitive one, and nothing in a name says which.

    Raises:
        RefusedCall: ``hard_link``.
    """
    if links > 1:
        raise refusal(
            "hard_link",
            f"'{shown(rel)}' has {links} hard links; the same file under another name may be "
            "outside the workspace or sensitive, so runs never read or write it",
            rel,
            "hard_link",
        )
