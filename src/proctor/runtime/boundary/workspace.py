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
- ``path_changed``: the tree changed while the path was being followed (a folder became a
  symlink under the walk);
- ``sensitive_path``: the requested or the resolved path is sensitive
  (:func:`proctor.core.paths.sensitive_reason`), is proctor's state wherever its settings put it
  (:func:`proctor.runtime.boundary.rules.state_paths`), or an existing file's head holds a
  private key;
- ``hard_link``: a ``read`` or ``write`` of a regular file with more than one hard link (the
  same file under another name may be one outside the workspace, or a sensitive one);
- ``authority_file``: a ``write`` to a file that grants authority or that another tool executes
  (:func:`proctor.core.paths.authority_reason`, :attr:`Workspace.authority_files`);
- ``bad_config``: a ``write`` while ``proctor.toml`` cannot say which files grant authority.

Resolution walks every component through directory descriptors with no-follow, reading each
symlink's text and following it itself (:func:`proctor.runtime.boundary.fds.walk`), so an
in-workspace symlink still leads where it points and is judged there. What a tool then opens,
creates, renames or unlinks is reached from the root's descriptor with no symlink allowed
anywhere (:func:`proctor.runtime.boundary.fds.open_below`): a folder swapped for a symlink
between the check and the use fails the use instead of leading outside.

Reach (``docs/admission.md``): a workspace built with ``roots`` (the folders a ``reach: inputs``
run's inputs name) also admits paths in those roots. A path in a root is written, and shown in
every result and message, as ``$NAME/relative/path`` (``$NAME`` alone is the root itself); an
absolute path is admitted only when, resolved, it lies inside a root, and is then shown in that
form too, so no result names a host path. Every sensitive-file and authority rule applies inside
every root that contains the resolved path, exactly as in the workspace. With roots, a path that
leaves every root is refused with ``path_outside_reach``, as is ``$NAME`` naming no root. A
workspace file whose name begins with ``$`` is named ``./$name``.

Backslashes are treated as separators on every platform, so the string checked is the string
opened.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from proctor.core.paths import (
    AUTHORITY_RULES,
    SENSITIVE_RULES,
    authority_reason,
    sensitive_reason,
)
from proctor.errors import ConfigError, RefusedCall, UsageError
from proctor.runtime.boundary.fds import SymlinkLoop, changed, open_below, openat2_available, walk
from proctor.runtime.boundary.opened import HEAD_BYTES, check_content, judge_open
from proctor.runtime.boundary.real import real_folder, real_path
from proctor.runtime.boundary.resolved import Resolved, check_links, joined, refusal
from proctor.runtime.boundary.resolved import shown as _shown
from proctor.runtime.boundary.roots import ROOT_NAME, checked_root, home_state_dir
from proctor.runtime.boundary.roots import refuse_broad_root as refuse_broad_root
from proctor.runtime.boundary.rules import Rules

__all__ = [
    "HEAD_BYTES",
    "MAX_PATH_CHARS",
    "ROOT_NAME",
    "Access",
    "Resolved",
    "Workspace",
    "check_links",
    "refusal",
    "refuse_broad_root",
]

Access = Literal["read", "list", "write"]
"""How a tool touches a path: read its content, list a directory, or change it."""

MAX_PATH_CHARS = 4096
MAX_COMPONENT_BYTES = 255

_DRIVE = re.compile(r"^[A-Za-z]:")
_NAMED_MAX = 1024  # paths whose name verdicts a workspace keeps (emptied when full)
_GOVERNING_MAX = 64  # the governing workspaces it keeps, one per package (emptied when full)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted in the workspace must not hang us
_CONTROL = re.compile(r"[\x01-\x1f\x7f]")


class Workspace:
    """A project directory with its state folder; every tool path goes through :meth:`resolve`.

    Args:
        root: the workspace directory (must exist; symlinks in it are resolved once here).
        extra_authority: workspace-relative files that also grant authority (the run's own
            skill package); never written by a run.
        roots: other folders a ``reach: inputs`` run reaches, by input name (resolved once
            here); a path names one as ``$NAME/...``.
        environ: the settings that place proctor's state (``PROCTOR_RECEIPT_DIR`` ...;
            default ``os.environ``): a run never reads, lists or writes that state.

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
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env: Mapping[str, str] = os.environ if environ is None else environ
        self._setup(
            root, roots, env, lambda real: Rules(real, extra_authority=extra_authority, environ=env)
        )

    def _setup(
        self,
        root: Path,
        roots: Mapping[str, str | Path] | None,
        environ: Mapping[str, str],
        rules: Callable[[Path], Rules],
    ) -> None:
        real = Path(real_path(root))
        if not real.is_dir():
            raise ConfigError("the workspace folder does not exist", code="workspace_missing")
        self.root: Path = real
        self._state_dir: Path | None = None  # root/.proctor once asked (a run asks twice)
        self._root_text = str(real)
        self._root_prefix = self._root_text.rstrip("/") + "/"
        self._environ: Mapping[str, str] = environ
        self.rules = rules(real)
        self._roots = {name: checked_root(name, folder) for name, folder in (roots or {}).items()}
        # path -> (the rules that judged it, its resolution): see _named_read
        self._named: dict[str, tuple[Rules, Resolved]] = {}
        # extra authority -> (the settings, the workspace governing derived): see governing
        self._governing: dict[frozenset[str], tuple[Mapping[str, str], Workspace]] = {}

    def _derived(
        self,
        *,
        roots: Mapping[str, str | Path],
        extra_authority: frozenset[str],
        environ: Mapping[str, str],
    ) -> Workspace:
        # the same checks as a new workspace's, with the rules made once (sharing the walk),
        # not made and then replaced: a run's governor derives one per call
        other = Workspace.__new__(Workspace)
        rules = self.rules
        other._setup(
            self.root,
            roots,
            environ,
            lambda _real: rules.sharing(extra_authority=extra_authority, environ=environ),
        )
        return other

    def reaching(self, roots: Mapping[str, str | Path]) -> Workspace:
        """This workspace, also reaching ``roots`` (name -> folder); the authority-file walk
        already done is shared.

        Raises:
            ConfigError: ``root_invalid`` (:func:`proctor.runtime.boundary.roots.checked_root`).
        """
        return self._derived(
            roots=roots, extra_authority=self.rules.extra_authority, environ=self._environ
        )

    def governing(
        self, *, extra_authority: frozenset[str], environ: Mapping[str, str],
        real_root: str | None = "",
    ) -> Workspace:  # fmt: skip
        """This workspace as a run's tools see it: ``extra_authority`` (the run's own package
        files) added, proctor's state placed as ``environ`` says (the session's settings).
        The walk already done is shared; ``self`` when nothing changes.

        A workspace with no other roots (a session's) keeps what it derived, one per extra
        authority, and hands it out again while the settings are the same mapping, the root
        resolves to itself and is a folder, and proctor's state resolves to the same real paths
        (each resolved again at every ask: a link swapped in between is seen); the derived
        one's verdicts on names read (``_named``) are kept with it, as they are functions of the
        path's text and of those rules alone. ``real_root``: :func:`real_folder` of the root as
        the run resolved it at its start (one answer for the run; ``""``, the default: asked
        here)."""
        extra = self.rules.extra_authority | extra_authority
        if extra == self.rules.extra_authority and environ is self._environ:
            return self
        if self._roots:  # a root is checked again by each derivation: nothing is kept
            return self._derived(roots=self._roots, extra_authority=extra, environ=environ)
        held = self._governing.get(extra)
        # kept while the root is still itself and a folder, and proctor's state resolves to the
        # very paths it did: the checks a new derivation makes
        if (
            held is not None
            and held[0] is environ
            and held[1].rules.same_state(environ)
            # still itself, and a folder
            and (real_folder(self._root_text) if real_root == "" else real_root) == self._root_text
        ):
            return held[1]
        derived = self._derived(roots=self._roots, extra_authority=extra, environ=environ)
        if len(self._governing) >= _GOVERNING_MAX:
            self._governing.clear()
        self._governing[extra] = (environ, derived)
        return derived

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
        ``~/.proctor``) does not mark its parent as a workspace.

        Raises:
            UsageError: ``workspace_refused`` when that folder is the user's home folder or
                ``/``: a run there would reach every file the user has;
                ``workspace_unreachable`` when a folder on the way cannot be searched.
        """
        begin = Path(os.path.realpath(start))
        home_state = home_state_dir()
        found = begin
        try:
            for folder in (begin, *begin.parents):
                state = folder / ".proctor"
                if (state.is_dir() and Path(os.path.realpath(state)) != home_state) or (
                    (folder / "skills").is_dir() or (folder / ".git").exists()
                ):
                    found = folder
                    break
        except PermissionError as exc:
            # a folder at or above ``start`` lacks search (x) permission for this user
            raise UsageError(
                f"cannot look for the workspace from the folder {begin.name!r}: a folder at"
                f" or above it cannot be searched by this user ({exc.strerror}). Run proctor"
                " from a folder you can reach, or give search (x) permission on every folder"
                " above it",
                code="workspace_unreachable",
            ) from exc
        refuse_broad_root(found)
        return cls(found)

    @property
    def state_dir(self) -> Path:
        """``root/.proctor``: runs, audit log, trash, journal. Never reachable by a tool path."""
        held = self._state_dir
        if held is None:
            held = self._state_dir = self.root / ".proctor"
        return held

    def private_dir(self, name: str, *, create: bool = True) -> Path:
        """``root/.proctor/<name>``, created (0700) if missing and ``create``, for proctor's own
        files (trash, journal, locks). Both levels must be real folders: a ``.proctor`` that
        is a symlink (say, one committed to a repository, pointing at a home folder) would
        carry those writes outside.

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

    def private_file(self, name: str, below: str) -> Resolved:
        """``.proctor/<name>/<below>`` as a :class:`Resolved` for proctor's own use (no rule
        applies; the folder is checked as :meth:`private_dir` does).

        Raises:
            RefusedCall: ``state_dir_unsafe``.
        """
        folder = self.private_dir(name)
        inner = f".proctor/{name}/{below}" if below != "." else f".proctor/{name}"
        return Resolved(abs=folder / below, rel=inner, base=self._root_text)

    def relative_lexical(self, absolute: Path) -> str:
        """``absolute`` relative to the root without resolving it (for messages)."""
        return absolute.relative_to(self.root).as_posix()

    # -- what is what (rules.Rules) ----------------------------------------------------------

    @property
    def authority_files(self) -> frozenset[str]:
        """Every workspace-relative path a run never writes, as it stands now (files and
        folders; a folder covers everything in it): see
        :attr:`proctor.runtime.boundary.rules.Rules.authority_files`.

        Raises:
            ConfigError: ``bad_config``: ``proctor.toml`` or ``.proctor/config`` is invalid.
        """
        return self.rules.authority_files

    @property
    def state_files(self) -> frozenset[str]:
        """Workspace-relative paths of proctor's state its settings put inside the workspace
        outside ``.proctor/``: never read, listed or written by a run."""
        return self.rules.state_files

    @property
    def allow_write(self) -> frozenset[str]:
        """The tool-config paths ``[containment] allow_write`` lifts (empty when none).

        Raises:
            ConfigError: ``bad_config`` (:func:`proctor.runtime.boundary.rules.containment_config`).
        """
        return self.rules.allow_write

    # -- resolution ---------------------------------------------------------------------------

    def resolve(self, path: str, access: Access) -> Resolved:
        """Resolve ``path`` and check it may be touched with ``access``: see
        :meth:`resolve_seen`, whose first item this is."""
        return self.resolve_seen(path, access)[0]

    def resolve_seen(self, path: str, access: Access) -> tuple[Resolved, bytes | None]:
        """Resolve ``path`` and check it may be touched with ``access``; with it, the file's every
        byte when the check read all of them (:func:`proctor.runtime.boundary.opened.judge_open`),
        else ``None``.

        ``path`` is workspace-relative, ``$NAME/...`` in a root, or (only when the workspace has
        roots) absolute. ``read`` and ``write`` of an existing regular file also read its first
        :data:`HEAD_BYTES` and refuse a private key block there, and refuse it when it has more
        than one hard link.

        Raises:
            RefusedCall: ``path_empty``, ``path_nul``, ``path_control_char``, ``path_too_long``,
                ``path_absolute``, ``path_outside_workspace``, ``path_outside_reach``,
                ``path_symlink_loop``, ``path_changed``, ``path_invalid``, ``sensitive_path``,
                ``hard_link``, ``authority_file``, ``bad_config`` (see the module docstring).
        """
        if access == "read" and (again := self._named_read(path)) is not None:
            return again
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
        if access in ("read", "write") and inner and ".." not in inner and openat2_available():
            # The common case in one lookup: judge the path as named, then open it with no
            # symlink allowed anywhere. If that open succeeds, the path as named was its own
            # real form (what the walk's first step proves with a lookup of its own); if it
            # fails (a link on the way, nothing there, ...), the walk below decides as always.
            lexical = start.rstrip("/") + "/" + "/".join(inner)
            found = self._containing(lexical)
            if found:
                resolved = self._judged(lexical, found, label, inner, path, absolute, access)
                opened, seen = self._opened_and_checked(resolved)
                if opened:
                    if access == "read":
                        if len(self._named) >= _NAMED_MAX:
                            self._named.clear()
                        self._named[path] = (self.rules, resolved)
                    return resolved, seen
        shown_asked = "<absolute path>" if absolute else path
        real = self._walk(start, inner, shown_asked)
        found = self._containing(real)
        if not found:
            raise self._outside(path, absolute)
        resolved = self._judged(real, found, label, inner, path, absolute, access)
        return resolved, self._check_file(resolved) if access in ("read", "write") else None

    def _named_read(self, path: str) -> tuple[Resolved, bytes | None] | None:
        """A read of a path the one-lookup route resolved before, or None. What is kept is a
        verdict on the string alone (its form, its root, every name rule: for a read all pure
        functions of the string and of :attr:`rules`); nothing on disk is. The no-symlink open
        and the file's judging are done again here, so a folder on the way swapped for a
        symlink (or a file for a link) fails the open and the path is resolved afresh."""
        held = self._named.get(path) if type(path) is str else None
        if held is None or held[0] is not self.rules or not openat2_available():
            return None
        opened, seen = self._opened_and_checked(held[1])
        return (held[1], seen) if opened else None

    def _judged(
        self,
        real: str,
        found: list[tuple[str, str]],
        label: str | None,
        inner: list[str],
        path: str,
        absolute: bool,
        access: Access,
    ) -> Resolved:
        """``real`` (inside the roots ``found``) after every rule on names: proctor's state,
        then the name asked for and the file it leads to (``RefusedCall``: ``sensitive_path``,
        ``authority_file``, ``bad_config``)."""
        rel = joined(*found[0])
        shown = rel if absolute else path
        requested = "/".join(inner)
        self._check_state(real, rel)
        # the name asked for (a symlink's own name counts) and, below, the file it opens, each
        # judged relative to every root holding it
        self._check_rules(requested, shown, access, workspace=label == "")
        for root, below in found:
            if below != "." and (root, below) != (label, requested):
                self._check_rules(below, joined(root, below), access, workspace=root == "")
        root_label = found[0][0]
        base = self._roots[root_label[1:]] if root_label else self._root_text
        return Resolved(abs=real, rel=rel, root=root_label, base=base)

    def _walk(self, start: str, inner: list[str], shown: str) -> str:
        try:
            return walk(start, inner)
        except SymlinkLoop as exc:
            raise refusal(
                "path_symlink_loop",
                f"'{_shown(shown)}' passes through more than 40 symlinks (a loop)",
                shown,
            ) from exc
        except OSError as exc:
            if changed(exc):
                raise refusal(
                    "path_changed", f"'{_shown(shown)}' changed while it was being resolved", shown
                ) from exc
            raise refusal(
                "path_invalid", f"'{_shown(shown)}' cannot be examined ({exc.strerror})", shown
            ) from exc

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

    def _containing(self, text: str) -> list[tuple[str, str]]:
        """(root label, path below it) for every root holding ``text``, the deepest first."""
        if not self._roots:  # the workspace alone (every run without reach: inputs)
            if text == self._root_text:
                return [("", ".")]
            prefix = self._root_prefix
            return [("", text[len(prefix) :])] if text.startswith(prefix) else []
        found: list[tuple[int, str, str]] = []
        for label, base in (("", self._root_text), *((f"${n}", b) for n, b in self._roots.items())):
            if text == base:
                found.append((len(base), label, "."))
            elif text.startswith(base.rstrip("/") + "/"):
                found.append((len(base), label, text[len(base.rstrip("/")) + 1 :]))
        found.sort(key=lambda item: -item[0])
        return [(label, below) for _n, label, below in found]

    def is_state(self, real: str) -> bool:
        """Whether the real absolute path ``real`` is, or lies in, proctor's state as this
        workspace's settings place it (never read, listed or written by a run)."""
        return self.rules.is_state(real)

    def _check_state(self, real: str, rel: str) -> None:
        if self.is_state(real):
            raise refusal(
                "sensitive_path",
                f"'{_shown(rel)}' is proctor's own state (proctor_state: its receipts, audit "
                "log, run store, home or signing key); runs never read, list or write it",
                rel,
                "proctor_state",
            )

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

    def write_rule(self, rel: str, shown: str) -> str | None:
        """The authority rule a write of the workspace path ``rel`` breaks, or None.

        Raises:
            RefusedCall: ``bad_config`` when the workspace's config cannot say.
        """
        try:
            return self.rules.write_rule(rel)
        except ConfigError as exc:
            raise refusal(
                "bad_config",
                f"'{_shown(shown)}' is not written: the workspace configuration that says which "
                f"files grant authority is invalid ({exc.message})",
                shown,
            ) from exc

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
            rule = self.write_rule(rel, shown) if workspace else authority_reason(rel)
            if rule is not None:
                raise refusal(
                    "authority_file",
                    f"'{_shown(shown)}' grants authority ({rule}: {AUTHORITY_RULES[rule]}); "
                    "runs never write it",
                    shown,
                    rule,
                )

    def _opened_and_checked(self, resolved: Resolved) -> tuple[bool, bytes | None]:
        """Open ``resolved`` with no symlink allowed on the way and judge what it is (as
        :meth:`_check_file`); ``(False, None)``, having judged nothing, when it cannot be opened
        so."""
        base, inner = resolved.where
        try:
            fd = open_below(base, inner, os.O_RDONLY | _NONBLOCK)
        except OSError:
            return False, None
        return True, judge_open(resolved.rel, fd)

    def _check_file(self, resolved: Resolved) -> bytes | None:
        """:func:`proctor.runtime.boundary.opened.judge_open` of the file at ``resolved``
        (``RefusedCall``: ``hard_link``, ``sensitive_path``, ``path_changed``)."""
        base, inner = resolved.where
        try:
            fd = open_below(base, inner, os.O_RDONLY | _NONBLOCK)
        except OSError as exc:
            if changed(exc):
                raise refusal(
                    "path_changed",
                    f"'{_shown(resolved.rel)}' changed while it was being resolved",
                    resolved.rel,
                ) from exc
            return None  # nothing there yet: the tool reports what it finds
        return judge_open(resolved.rel, fd)

    def check_content(self, rel: str, data: bytes) -> None:
        """Refuse bytes (read from or about to be written to ``rel``) holding a private key.

        Raises:
            RefusedCall: ``sensitive_path`` with rule ``private_key_content``.
        """
        check_content(rel, data)

    def take_seen(self, target: Resolved) -> bytes | None:
        """The bytes containment read of ``target`` during the call under way, for its handler
        to use once instead of reading the file again: none here (the view a handler gets,
        :mod:`proctor.runtime.boundary.views`, holds them)."""
        return None

    def relative(self, absolute: Path) -> str:
        """The workspace-relative POSIX form of a path known to be inside the root.

        Raises:
            RefusedCall: ``path_outside_workspace`` when it is not inside.
        """
        return self._relative(absolute, absolute.name)
