"""The isolated workspace of one test: ``<workspace>/.proctor/test/<id>/``.

Each test gets a folder of its own under the package's workspace, holding:

- ``skills/<package>/``: a copy of the package without its ``tests/`` and ``fixtures/`` (a
  run never reads its own expectations; the receipts' package digest covers this copy);
- the package's ``fixtures/``, staged whole at the workspace's root (``fixtures/notes/a.md``
  is ``notes/a.md`` to the run; ``fixtures/policies/`` becomes the test's ``policies/``;
  ``fixtures/skills/<other>/`` stages another package beside the one under test, a
  composite's child, never over it), then ``setup.files``. The package under test is
  treated as hostile: a fixture that is a link, a device or a pipe is refused, not followed
  (a link staged at the root would make ``setup.files`` write wherever it points); files are
  written with ``O_NOFOLLOW`` into folders
  this module made; and a ``proctor.toml`` from the fixtures or ``setup.files`` is refused
  (``test_config_refused``): it would name guard modules that proctor imports as Python in its
  own process, and grant the package's commands network. So a test runs with no configuration
  of the package's: the shipped policies, the fixtures' ``policies/`` rules, and what the test
  file declares (``setup.authority``, ``providers``);
- a test naming ``package: fixtures/<dir>`` runs that fixture package, staged at ``<dir>``,
  instead of ``skills/<package>`` (which it may call by name); every part of the path is a
  folder reached without a link, in the package and as staged (``test_package_invalid``);
- ``.proctor/``: its own receipts, audit log, and home (``.proctor/home``: no key, no
  credential profile, no ``config.json``), which no tool can read. Its own run store too:
  in memory (SQLite ``:memory:``), or ``.proctor/runs.sqlite`` when the workspace is kept
  (``--keep``), so ``proctor history`` can be read there afterwards.

Its environment is built from nothing but what the test declares: ``PROCTOR_HOME`` and fixed
``PATH``, ``HOME``, ``LANG``, ``TZ``, ``TMPDIR`` (commands inherit only those), plus each
``setup.credentials`` value under the delivery variable its requirement declares. Nothing of
the user's environment, home, ``.env``, policies or credentials reaches the run.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath

from proctor.contracts.skill import RunProfile
from proctor.contracts.testfile import SkillTest
from proctor.contracts.values import dataclass, field
from proctor.errors import UsageError
from proctor.runtime.boundary.sanitize import MIN_TAINT_LENGTH
from proctor.runtime.boundary.workspace import Workspace

__all__ = ["CaseWorkspace", "build_workspace", "scratch_base"]

# What read_package skips, and at the package's top the test's own files: a run never sees
# its tests (their expectations) nor a second copy of the fixtures staged at the root.
_SKIP = frozenset({".git", ".proctor", "__pycache__", "node_modules", ".venv"})
_TEST_ONLY = frozenset({"tests", "fixtures"})
_PATH = "/usr/local/bin:/usr/bin:/bin"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class CaseWorkspace:
    """A built test workspace.

    Attributes:
        root: the workspace root (``.proctor/test/<id>``).
        package_ref: the reference of the package copy, relative to ``root``.
        environ: the run's whole environment.
        secrets: every fixture credential value (scrubbed from the report).
    """

    root: Path
    package_ref: str
    environ: dict[str, str]
    secrets: list[str] = field(default_factory=list)

    def remove(self) -> None:
        """Delete the workspace and everything the run left in it."""
        shutil.rmtree(self.root, ignore_errors=True)


def scratch_base(package_folder: Path) -> Path:
    """``.proctor/test`` of the workspace the package lives in, created (0700) if missing.

    Raises:
        RefusedCall: (``state_dir_unsafe``) ``.proctor`` or ``.proctor/test`` is a symlink.
    """
    return Workspace.discover(package_folder).private_dir("test")


def build_workspace(
    test: SkillTest,
    *,
    package_folder: Path,
    package_name: str,
    profile: RunProfile | None,
    test_id: str,
    base: Path,
    keep: bool = False,
) -> CaseWorkspace:
    """Create and fill the test's workspace under ``base``.

    Raises:
        UsageError: ``test_fixture_refused`` (a fixture or ``setup.files`` path outside the
            workspace, into ``.proctor/`` or over the package copy; a fixture that is a link
            or a special file), ``test_config_refused`` (a ``proctor.toml`` among them),
            ``test_credential_unknown``
            (``setup.credentials`` names a provider, or a mode, the package does not declare),
            ``test_credential_ambiguous`` (a plain value for a credential with several modes),
            ``test_credential_too_short`` (a value under 8 characters: it could not be scrubbed
            from inside a longer text), ``test_package_invalid`` (``package:`` names no folder
            holding a SKILL.md under ``fixtures/``, or reaches it through a link).
    """
    root = Path(tempfile.mkdtemp(prefix=_UNSAFE_NAME.sub("_", test_id) + ".", dir=base))
    try:
        state = root / ".proctor"
        home = state / "home"
        tmp = state / "tmp"
        for folder in (state, home, tmp):
            folder.mkdir(mode=0o700, exist_ok=True)
        package_rel = f"skills/{package_name}"
        top = str(package_folder)

        def ignore(folder: str, names: list[str]) -> set[str]:
            skipped = _SKIP | _TEST_ONLY if folder == top else _SKIP
            return {n for n in names if n in skipped}

        shutil.copytree(package_folder, root / package_rel, ignore=ignore, symlinks=True)
        fixtures = package_folder / "fixtures"
        if test.package is not None:  # before anything is staged from there
            _real_folders(package_folder, PurePosixPath(test.package).parts, test.package)
        if fixtures.is_dir() and not fixtures.is_symlink():
            for entry in sorted(fixtures.iterdir()):
                if entry.name == "skills" and entry.is_dir() and not entry.is_symlink():
                    # other packages (a composite's children) beside the package under test
                    for sub in sorted(entry.iterdir()):
                        rel = f"skills/{sub.name}"
                        _check_target(rel, package_rel, "fixtures/" + rel)
                        _stage(sub, root / rel, "fixtures/" + rel)
                    continue
                _check_target(entry.name, package_rel, "fixtures/" + entry.name)
                _stage(entry, root / entry.name, "fixtures/" + entry.name)
        elif fixtures.is_symlink():
            raise _not_regular("fixtures")
        for rel, text in sorted(test.setup.files.items()):
            _check_target(rel, package_rel, f"setup.files {rel!r}")
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_new(target, text.encode("utf-8"), f"setup.files {rel!r}")
        environ = {
            "PROCTOR_HOME": str(home),
            "PATH": _PATH,
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            "TMPDIR": str(tmp),
        }
        if not keep:
            # Deleted with the workspace anyway, the run store lives in memory: a third of
            # a test's time was SQLite creating, syncing and closing a file nobody reads.
            environ["PROCTOR_DATABASE_PATH"] = ":memory:"
        secrets = _credentials(test, profile, environ)
        ref = package_rel
        if test.package is not None:
            ref = _fixture_package(test.package, package_folder, root)
        return CaseWorkspace(root, ref, environ, secrets)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _fixture_package(rel: str, package_folder: Path, root: Path) -> str:
    """The reference, from the test's workspace root, of the fixture package ``rel``
    (``fixtures/<dir>``), staged at ``<dir>``.

    Raises:
        UsageError: ``test_package_invalid``: a part of the path, in the package or as staged,
            is missing, a link or not a folder, or the folder holds no ``SKILL.md`` file.
    """
    parts = PurePosixPath(rel).parts
    staged = _real_folders(root, parts[1:], rel)
    try:
        info = (staged / "SKILL.md").lstat()
    except OSError:
        info = None
    if info is None or not stat.S_ISREG(info.st_mode):
        raise UsageError(
            f"package {rel!r} is not a skill package (it has no SKILL.md file)",
            code="test_package_invalid",
        )
    return "./" + "/".join(parts[1:])


def _real_folders(base: Path, parts: tuple[str, ...], rel: str) -> Path:
    """``base/parts...``, each part checked to be a folder and not a link (nothing followed),
    so a fixture package never leads out of the package or the test's workspace.

    Raises:
        UsageError: ``test_package_invalid``.
    """
    current = base
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\\" in part:
            raise UsageError(
                f"package {rel!r} is not a folder under the package's fixtures/",
                code="test_package_invalid",
            )
        current = current / part
        try:
            info = current.lstat()
        except OSError:
            info = None
        if info is None or not stat.S_ISDIR(info.st_mode):
            raise UsageError(
                f"package {rel!r}: {part!r} is missing, a link or not a folder; a test's "
                "package is a folder under the package's fixtures/, reached without a link",
                code="test_package_invalid",
            )
    return current


def _not_regular(what: str) -> UsageError:
    return UsageError(
        f"{what} is a link or a special file; a test stages regular files and folders only "
        "(a link could make set-up write outside the test's workspace)",
        code="test_fixture_refused",
    )


def _stage(source: Path, target: Path, what: str) -> None:
    """Copy ``source`` (a regular file, or a folder of them) to ``target``, refusing any link
    or special file met on the way; nothing is followed."""
    info = source.lstat()
    if stat.S_ISDIR(info.st_mode):
        target.mkdir(mode=0o755, exist_ok=True)
        if target.is_symlink() or not target.is_dir():
            raise _not_regular(what)
        for entry in sorted(source.iterdir()):
            _stage(entry, target / entry.name, f"{what}/{entry.name}")
        return
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(what)
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _not_regular(what)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    finally:
        os.close(fd)
    _write_new(target, data, what)
    os.chmod(target, stat.S_IMODE(info.st_mode) & 0o755)


def _write_new(target: Path, data: bytes, what: str) -> None:
    """Write ``data`` to ``target`` without following a link there (an existing regular file,
    an earlier fixture, is replaced)."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644)  # fmt: skip
    except OSError as exc:
        raise UsageError(
            f"{what} cannot be staged ({exc.strerror})", code="test_fixture_refused"
        ) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _not_regular(what)
        os.write(fd, data)
    finally:
        os.close(fd)


def _check_target(rel: str, package_rel: str, what: str) -> None:
    path = PurePosixPath(rel)
    parts = path.parts
    if parts and parts[0] == "proctor.toml":
        raise UsageError(
            f"{what}: a test never stages a proctor.toml (it could name guard modules proctor "
            "would import, or grant the package's commands network); a test's authority comes "
            "from its test file (setup.authority, providers)",
            code="test_config_refused",
        )
    refused = (
        path.is_absolute()
        or "\\" in rel
        or not parts
        or any(p in ("..", ".") for p in parts)
        or parts[0] == ".proctor"
        or PurePosixPath(*parts[:2]) == PurePosixPath(package_rel)
        or (len(parts) == 1 and parts[0] == "skills")
    )
    if refused:
        raise UsageError(
            f"{what} cannot be staged: a test stages files inside its workspace, never into "
            ".proctor/ or over the package under test",
            code="test_fixture_refused",
        )


def _credentials(test: SkillTest, profile: RunProfile | None, environ: dict[str, str]) -> list[str]:
    requirements = profile.credentials if profile is not None else {}
    secrets: list[str] = []
    for provider, given in sorted(test.setup.credentials.items()):
        matching = {n: r for n, r in requirements.items() if r.provider == provider}
        if not matching:
            raise UsageError(
                f"setup.credentials names provider {provider!r}, which no credential of the "
                "package declares",
                code="test_credential_unknown",
            )
        for name, requirement in sorted(matching.items()):
            modes = {mode: auth.delivery.env for mode, auth in requirement.auth.items()}
            if isinstance(given, str):
                if len(modes) != 1:
                    raise UsageError(
                        f"credential {name!r} has several auth modes ({', '.join(sorted(modes))})"
                        f"; give setup.credentials.{provider} as {{MODE: value}}",
                        code="test_credential_ambiguous",
                    )
                chosen = {next(iter(modes)): given}
            else:
                chosen = dict(given)
            for mode, value in chosen.items():
                if len(value) < MIN_TAINT_LENGTH:
                    # a shorter value is only recognised as a whole string, so it could
                    # show inside a message or a body of the report
                    raise UsageError(
                        f"setup.credentials.{provider}: a fixture credential has at least "
                        f"{MIN_TAINT_LENGTH} characters, so it is scrubbed wherever it shows",
                        code="test_credential_too_short",
                    )
                if mode not in modes:
                    raise UsageError(
                        f"setup.credentials.{provider}: credential {name!r} has no auth mode "
                        f"{mode!r}",
                        code="test_credential_unknown",
                    )
                environ[modes[mode]] = value
                secrets.append(value)
    return secrets
