"""The workspace a run works in, and containment: the one way a tool turns a path into a file.

:meth:`Workspace.resolve` is the only door from a caller-supplied path string to the file
system. It refuses, each with a stable code and a message naming the workspace-relative path
and the rule (never an absolute host path):

- ``path_empty``, ``path_nul``, ``path_control_char``, ``path_too_long``: malformed strings
  (control characters never belong in a name and would let a path forge log or terminal lines);
- ``path_absolute``: absolute paths (``/x``, ``\\x``, ``C:\\x``, ``//host/share``) are refused
  outright rather than accepted when they happen to point inside: a run names files relative to
  its workspace, and an absolute path in an argument would disclose the host layout;
- ``path_outside_workspace``: the path, with every symlink and ``..`` resolved component by
  component (as the kernel will), ends outside the workspace root;
- ``path_symlink_loop``: more than 40 symlinks on the way (a loop);
- ``sensitive_path``: the requested or the resolved path is sensitive
  (:func:`proctor.core.paths.sensitive_reason`), or an existing file's head holds a private key;
- ``authority_file``: a ``write`` to a file that grants authority
  (:func:`proctor.core.paths.authority_reason`).

Reach (``docs/admission.md``): a workspace built with ``roots`` (the folders a ``reach: inputs``
run's inputs name) also admits paths in those roots. A path in a root is written, and shown in
every result and message, as ``$NAME/relative/path`` (``$NAME`` alone is the root itself); an
absolute path is admitted only when, resolved, it lies inside a root, and is then shown in that
form too, so no result names a host path. Every sensitive-file and authority rule applies inside
every root that contains the resolved path, exactly as in the workspace. With roots, a path that
leaves every root is refused with ``path_outside_reach``, as is ``$NAME`` naming no root. A
workspace file whose name begins with ``$`` is named ``./$name``.

Backslashes are treated as separators on every platform, so the string checked is the string
opened. Resolution happens before the check; a symlink swapped in between ``resolve`` and the
``open`` that follows is not covered here (tools open with ``O_NOFOLLOW`` on the last component).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from proctor.core.paths import (
    AUTHORITY_RULES,
    SENSITIVE_RULES,
    authority_reason,
    content_reason,
    sensitive_reason,
)
from proctor.errors import RefusedCall
from proctor.runtime.boundary.roots import ROOT_NAME, checked_root

__all__ = [
    "HEAD_BYTES",
    "MAX_PATH_CHARS",
    "ROOT_NAME",
    "Access",
    "Resolved",
    "Workspace",
    "refusal",
]

Access = Literal["read", "list", "write"]
"""How a tool touches a path: read its content, list a directory, or change it."""

MAX_PATH_CHARS = 4096
MAX_COMPONENT_BYTES = 255
MAX_SYMLINK_HOPS = 40
HEAD_BYTES = 64 * 1024
"""How much of an existing file ``resolve`` reads to look for a private key block."""

_AUTHORITY_WALK_MAX_DIRS = 20_000
_AUTHORITY_WALK_MAX_DEPTH = 12
_WALK_SKIP = frozenset({".git", ".proctor", "node_modules", ".venv", "venv", "__pycache__"})
_DRIVE = re.compile(r"^[A-Za-z]:")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted in the workspace must not hang us
_CONTROL = re.compile(r"[\x01-\x1f\x7f]")
_SHOWN_CHARS = 200


@dataclass(frozen=True)
class Resolved:
    """A contained path: ``abs`` is the real absolute path, ``rel`` its shown POSIX form
    (workspace-relative, ``"."`` for the root; ``$NAME/...`` inside another root). ``root`` is
    ``""`` for the workspace or ``$NAME``. ``abs`` is for opening, never for showing."""

    abs: Path
    rel: str
    root: str = ""

    @property
    def inner(self) -> str:
        """The path relative to its own root (``"."`` for the root itself)."""
        if not self.root:
            return self.rel[2:] if self.rel.startswith("./") else self.rel
        return self.rel[len(self.root) + 1 :] if self.rel != self.root else "."


def _shown(text: str) -> str:
    """A caller-supplied path as messages show it: bounded, one line."""
    flat = text.replace("\n", "\\n").replace("\r", "\\r")
    return flat if len(flat) <= _SHOWN_CHARS else flat[:_SHOWN_CHARS] + "..."


def refusal(code: str, message: str, path: str, rule: str | None = None) -> RefusedCall:
    """A containment refusal with ``details = {path, rule}`` (``path`` workspace-relative)."""
    details: dict[str, str] = {"path": _shown(path)}
    if rule is not None:
        details["rule"] = rule
    return RefusedCall(message, code=code, details=details)


def _joined(root: str, below: str) -> str:
    """The shown form of ``below`` in ``root`` (``""`` is the workspace)."""
    if root:
        return root if below == "." else f"{root}/{below}"
    return "./" + below if below.startswith("$") else below


def _home_state_dir() -> Path | None:
    named = os.environ.get("PROCTOR_HOME")
    try:
        home = Path(named) if named else Path.home() / ".proctor"
        return home.resolve()
    except (OSError, RuntimeError):
        return None


class Workspace:
    """A project directory with its state folder; every tool path goes through :meth:`resolve`.

    Args:
        root: the workspace directory (must exist; symlinks in it are resolved once here).
        extra_authority: workspace-relative files that also grant authority (e.g. a guard
            module named by ``proctor.toml``); never written by a run.
        roots: other folders a ``reach: inputs`` run reaches, by input name (resolved once
            here); a path names one as ``$NAME/...``.

    Raises:
        ConfigError: (code ``workspace_missing``) ``root`` is not a directory; ``root_invalid``
            a root is not a usable folder (:func:`proctor.runtime.boundary.roots.checked_root`).
    """

    def __init__(
        self,
        root: Path,
        *,
        extra_authority: frozenset[str] = frozenset(),
        roots: Mapping[str, str | Path] | None = None,
    ) -> None:
        from proctor.errors import ConfigError

        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise ConfigError("the workspace folder does not exist", code="workspace_missing")
        self.root: Path = real
        self._root_text = str(real)
        self._extra_authority = extra_authority
        self._authority_files: frozenset[str] | None = None
        self._roots = {name: checked_root(name, folder) for name, folder in (roots or {}).items()}
        self._home_state = _home_state_dir() if self._roots else None

    def reaching(self, roots: Mapping[str, str | Path]) -> Workspace:
        """This workspace, also reaching ``roots`` (name -> folder); the authority-file walk
        already done is shared.

        Raises:
            ConfigError: ``root_invalid`` (:func:`proctor.runtime.boundary.roots.checked_root`).
        """
        wider = Workspace(self.root, extra_authority=self._extra_authority, roots=roots)
        wider._authority_files = self._authority_files
        return wider

    @property
    def roots(self) -> dict[str, Path]:
        """The other roots this workspace reaches, by name (real paths: for opening only)."""
        return {name: Path(text) for name, text in self._roots.items()}

    def base_of(self, resolved: Resolved) -> Path:
        """The real folder of the root ``resolved`` lies in (for opening only)."""
        return Path(self._roots[resolved.root[1:]]) if resolved.root else self.root

    def __repr__(self) -> str:
        return f"Workspace({self.root.name!r})"

    @classmethod
    def discover(cls, start: Path) -> Workspace:
        """The nearest folder at or above ``start`` holding ``.proctor/``, ``skills/`` or ``.git``;
        ``start`` itself when none does. The home state folder (``PROCTOR_HOME`` or
        ``~/.proctor``) does not mark its parent as a workspace."""
        begin = Path(os.path.realpath(start))
        home_state = _home_state_dir()
        for folder in (begin, *begin.parents):
            state = folder / ".proctor"
            if state.is_dir() and Path(os.path.realpath(state)) != home_state:
                return cls(folder)
            if (folder / "skills").is_dir() or (folder / ".git").exists():
                return cls(folder)
        return cls(begin)

    @property
    def state_dir(self) -> Path:
        """``root/.proctor``: runs, audit log, trash, journal. Never reachable by a tool path."""
        return self.root / ".proctor"

    def private_dir(self, name: str, *, create: bool = True) -> Path:
        """``root/.proctor/<name>``, created (0700) if missing and ``create``, for proctor's own
        files (trash, journal). Both levels must be real folders: a ``.proctor`` that is a
        symlink (say, one committed to a repository, pointing at a home folder) would carry
        those writes outside.

        Raises:
            RefusedCall: ``state_dir_unsafe`` when either level is a symlink or not a folder.
        """
        folder = self.state_dir
        for level in (folder, folder / name):
            try:
                if create:
                    level.mkdir(mode=0o700)
            except FileExistsError:
                pass
            except OSError as exc:
                raise refusal(
                    "state_dir_unsafe",
                    f"'{self.relative_lexical(level)}' cannot be created",
                    self.relative_lexical(level),
                ) from exc
            try:
                info = os.lstat(level)
            except FileNotFoundError:
                break  # not created yet (create=False): nothing to read through it
            if not stat.S_ISDIR(info.st_mode):
                rel = self.relative_lexical(level)
                raise refusal(
                    "state_dir_unsafe",
                    f"'{rel}' is a symlink or not a folder; proctor keeps its own files only in "
                    "a real folder inside the workspace",
                    rel,
                )
        return folder / name

    def relative_lexical(self, absolute: Path) -> str:
        """``absolute`` relative to the root without resolving it (for messages)."""
        return absolute.relative_to(self.root).as_posix()

    @property
    def authority_files(self) -> frozenset[str]:
        """Workspace-relative ``SKILL.md`` / ``run.yaml`` of every skill package under the root
        (bounded walk, cached) plus the ``extra_authority`` given at construction."""
        if self._authority_files is None:
            self._authority_files = self._find_authority_files() | self._extra_authority
        return self._authority_files

    def _find_authority_files(self) -> frozenset[str]:
        found: set[str] = set()
        for visited, (folder, dirs, files) in enumerate(
            os.walk(self.root, followlinks=False), start=1
        ):
            rel_dir = os.path.relpath(folder, self.root).replace(os.sep, "/")
            depth = 0 if rel_dir == "." else rel_dir.count("/") + 1
            dirs[:] = [d for d in dirs if d not in _WALK_SKIP]
            if depth >= _AUTHORITY_WALK_MAX_DEPTH or visited >= _AUTHORITY_WALK_MAX_DIRS:
                dirs[:] = []
            names = {f.casefold(): f for f in files}
            if "skill.md" in names:
                prefix = "" if rel_dir == "." else rel_dir + "/"
                found.add(prefix + names["skill.md"])
                if "run.yaml" in names:
                    found.add(prefix + names["run.yaml"])
        return frozenset(found)

    # -- resolution ---------------------------------------------------------------------------

    def resolve(self, path: str, access: Access) -> Resolved:
        """Resolve ``path`` and check it may be touched with ``access``.

        ``path`` is workspace-relative, ``$NAME/...`` in a root, or (only when the workspace has
        roots) absolute. ``read`` and ``write`` of an existing regular file also read its first
        :data:`HEAD_BYTES` and refuse a private key block there.

        Raises:
            RefusedCall: ``path_empty``, ``path_nul``, ``path_control_char``, ``path_too_long``,
                ``path_absolute``, ``path_outside_workspace``, ``path_outside_reach``,
                ``path_symlink_loop``, ``sensitive_path``, ``authority_file`` (see the module
                docstring).
        """
        if not isinstance(path, str) or path == "":
            raise refusal("path_empty", "an empty path names no file", "")
        if "\x00" in path:
            raise refusal("path_nul", "a path may not contain a NUL byte", path.replace("\x00", ""))
        if len(path) > MAX_PATH_CHARS:
            raise refusal(
                "path_too_long", f"the path is longer than {MAX_PATH_CHARS} characters", path
            )
        if _CONTROL.search(path):
            raise refusal(
                "path_control_char",
                "a path may not contain control characters (newlines, escapes ...)",
                _CONTROL.sub("?", path),
            )
        text = path.replace("\\", "/")
        absolute = text.startswith("/")
        if _DRIVE.match(text) or (absolute and not self._roots):
            raise refusal(
                "path_absolute",
                "absolute paths are refused; name the file relative to the workspace",
                "<absolute path>",
            )
        parts = [p for p in text.split("/") if p not in ("", ".")]
        for part in parts:
            if len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES:
                named = "<absolute path>" if absolute else path
                raise refusal(
                    "path_too_long",
                    f"a component of '{_shown(named)}' is longer than {MAX_COMPONENT_BYTES} bytes",
                    named,
                )
        if absolute:
            start, label, inner = "/", None, parts
        elif text.startswith("$"):
            start, label, inner = self._named_root(parts[0], path), parts[0], parts[1:]
        else:
            start, label, inner = self._root_text, "", parts
        real = self._walk(inner, "<absolute path>" if absolute else path, start)
        found = self._containing(real)
        if not found:
            raise self._outside(path, absolute)
        rel = _joined(*found[0])
        shown = rel if absolute else path
        requested = "/".join(inner)
        # the name asked for (a symlink's own name counts) and, below, the file it opens, each
        # judged relative to every root holding it
        self._check_rules(requested, shown, access, workspace=label == "")
        for root, below in found:
            if below != "." and (root, below) != (label, requested):
                self._check_rules(below, _joined(root, below), access, workspace=root == "")
        self._check_home_state(real, rel)
        resolved = Resolved(abs=real, rel=rel, root=found[0][0])
        if access in ("read", "write"):
            self._check_head(resolved)
        return resolved

    def _named_root(self, first: str, shown: str) -> str:
        base = self._roots.get(first[1:])
        if base is None:
            raise refusal(
                "path_outside_reach",
                f"'{_shown(first)}' names no root this run reaches (reach: inputs reaches the "
                "folders the run's inputs name; reach: workspace only the workspace); name a "
                "workspace file that begins with '$' as './$name'",
                shown,
            )
        return base

    def _outside(self, path: str, absolute: bool) -> RefusedCall:
        shown = "<absolute path>" if absolute else path
        if not self._roots:
            return refusal(
                "path_outside_workspace", f"'{_shown(shown)}' resolves outside the workspace", shown
            )
        return refusal(
            "path_outside_reach",
            f"'{_shown(shown)}' resolves outside the workspace and every root this run reaches",
            shown,
        )

    def _containing(self, real: Path) -> list[tuple[str, str]]:
        """(root label, path below it) for every root holding ``real``, the deepest first."""
        text = str(real)
        found: list[tuple[int, str, str]] = []
        for label, base in (("", self._root_text), *((f"${n}", b) for n, b in self._roots.items())):
            if text == base:
                found.append((len(base), label, "."))
            elif text.startswith(base.rstrip("/") + "/"):
                found.append((len(base), label, text[len(base.rstrip("/")) + 1 :]))
        found.sort(key=lambda item: -item[0])
        return [(label, below) for _n, label, below in found]

    def _check_home_state(self, real: Path, rel: str) -> None:
        """Another root may hold proctor's home state folder (``PROCTOR_HOME``, any name)."""
        home = self._home_state
        if home is None:
            return
        text, base = str(real), str(home)
        if text == base or text.startswith(base.rstrip("/") + "/"):
            raise refusal(
                "sensitive_path",
                f"'{_shown(rel)}' is in proctor's home state folder; runs never touch it",
                rel,
                "proctor_state",
            )

    def _walk(self, parts: list[str], shown: str, start: str | None = None) -> Path:
        """Resolve like the kernel: component by component, following symlinks, counting hops."""
        current = self._root_text if start is None else start
        pending = list(reversed(parts))
        hops = 0
        while pending:
            part = pending.pop()
            if part == "..":
                current = os.path.dirname(current) or "/"
                continue
            candidate = os.path.join(current, part)
            try:
                is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            except FileNotFoundError:
                is_link = False
            except NotADirectoryError:
                is_link = False
            except OSError as exc:
                raise refusal(
                    "path_invalid", f"'{_shown(shown)}' cannot be examined ({exc.strerror})", shown
                ) from exc
            if not is_link:
                current = candidate
                continue
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise refusal(
                    "path_symlink_loop",
                    f"'{_shown(shown)}' passes through more than {MAX_SYMLINK_HOPS} symlinks "
                    "(a loop)",
                    shown,
                )
            target = os.readlink(candidate).replace("\\", "/")
            if target.startswith("/"):
                current = "/"
            pending.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
        return Path(current)

    def _relative(self, real: Path, shown: str) -> str:
        text = str(real)
        if text == self._root_text:
            return "."
        prefix = self._root_text.rstrip("/") + "/"
        if not text.startswith(prefix):
            raise refusal(
                "path_outside_workspace",
                f"'{_shown(shown)}' resolves outside the workspace",
                shown,
            )
        return text[len(prefix) :]

    def _check_rules(self, rel: str, shown: str, access: Access, *, workspace: bool = True) -> None:
        reason = sensitive_reason(rel)
        if reason is not None:
            raise refusal(
                "sensitive_path",
                f"'{_shown(shown)}' is a sensitive file ({reason}: {SENSITIVE_RULES[reason]}); "
                "runs never read, list or write it",
                shown,
                reason,
            )
        if access == "write":
            files = self.authority_files if workspace else frozenset()
            rule = authority_reason(rel, files)
            if rule is not None:
                raise refusal(
                    "authority_file",
                    f"'{_shown(shown)}' grants authority ({rule}: {AUTHORITY_RULES[rule]}); "
                    "runs never write it",
                    shown,
                    rule,
                )

    def _check_head(self, resolved: Resolved) -> None:
        try:
            fd = os.open(resolved.abs, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
        except OSError:
            return  # nothing there yet, or a folder: the tool reports what it finds
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return
            head = os.read(fd, HEAD_BYTES)
        except OSError:
            return
        finally:
            os.close(fd)
        self.check_content(resolved.rel, head)

    def check_content(self, rel: str, data: bytes) -> None:
        """Refuse bytes (read from or about to be written to ``rel``) holding a private key.

        Raises:
            RefusedCall: ``sensitive_path`` with rule ``private_key_content``.
        """
        reason = content_reason(data)
        if reason is not None:
            raise refusal(
                "sensitive_path",
                f"'{_shown(rel)}' holds a private key block ({reason}); runs never read, list "
                "or write it",
                rel,
                reason,
            )

    def relative(self, absolute: Path) -> str:
        """The workspace-relative POSIX form of a path known to be inside the root.

        Raises:
            RefusedCall: ``path_outside_workspace`` when it is not inside.
        """
        return self._relative(absolute, absolute.name)
