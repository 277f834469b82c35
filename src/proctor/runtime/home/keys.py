"""The local Ed25519 signing key: where it lives, creating it once, refusing an exposed one.

The key file is ``<home>/signing_key.pem`` (home = ``PROCTOR_HOME``, else ``~/.proctor``), an
unencrypted PKCS#8 PEM private key, created on first use with mode 0600 inside a home created
with mode 0700. ``PROCTOR_SIGNING_KEY`` names another key file instead; that file must
already exist (proctor only ever creates the key in the home).

A key file that is readable or writable by group or others, or owned by another user, is
refused: a signing key anyone on the machine can read signs for anyone.

A missing key is created only when no receipt would lose its signer by it: a caller that knows
which keys signed the receipts it holds (the session, ``proctor key show``) passes them, and a
missing key where any of them is not kept trusted is refused ``signing_key_missing``.
``proctor key rotate`` (:func:`rotate_key`) makes a new key on purpose and keeps the old
public key trusted in ``<home>/trusted_keys/<hex>.pem``, where :func:`trusted_local_keys`
finds it for ``proctor verify``.

Paths are shown as ``~/.proctor/signing_key.pem``, ``$PROCTOR_HOME/...`` or
``$PROCTOR_SIGNING_KEY``, never as absolute host paths.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError
from proctor.receipts.signing import PublicKey, Signer, parse_private_key_pem
from proctor.runtime.home.files import home_dir, write_private
from proctor.runtime.home.public_key_file import MAX_KEY_FILE as _MAX_KEY_FILE
from proctor.runtime.home.public_key_file import load_public_key_file
from proctor.runtime.testhooks import kill_point

__all__ = [
    "KEY_FILE_NAME",
    "TRUSTED_KEYS_DIR",
    "LocalKey",
    "Rotation",
    "home_dir",
    "load_public_key_file",
    "load_signer",
    "retired_keys",
    "rotate_key",
    "trusted_local_key",
    "trusted_local_keys",
]

KEY_FILE_NAME = "signing_key.pem"
TRUSTED_KEYS_DIR = "trusted_keys"


@dataclass(frozen=True, slots=True)
class LocalKey:
    """The signer, the key file's path, how to show that path, and whether it was just made."""

    signer: Signer
    path: Path
    shown_path: str
    created: bool


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _key_location(environ: Mapping[str, str] | None) -> tuple[Path, str, bool]:
    env = _env(environ)
    named = env.get("PROCTOR_SIGNING_KEY")
    if named:
        return Path(named), "$PROCTOR_SIGNING_KEY", False
    home, shown = home_dir(environ)
    return home / KEY_FILE_NAME, f"{shown}/{KEY_FILE_NAME}", True


def _read_key_file(path: Path, shown: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise
    except NotADirectoryError as exc:  # a file where the home should be: there is no key
        raise FileNotFoundError(exc.errno, exc.strerror) from exc
    except OSError as exc:
        raise ConfigError(
            f"the signing key {shown} could not be opened: {exc.strerror}",
            code="signing_key_unreadable",
        ) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"the signing key {shown} is not a regular file", code="signing_key_invalid"
            )
        if os.name == "posix":
            if info.st_mode & 0o077:
                raise ConfigError(
                    f"the signing key {shown} is readable or writable by group or others "
                    f"(mode {stat.S_IMODE(info.st_mode):04o}); run: chmod 600 {shown}",
                    code="signing_key_exposed",
                )
            if info.st_uid != os.getuid():
                raise ConfigError(
                    f"the signing key {shown} belongs to another user; use a key file you own",
                    code="signing_key_exposed",
                )
        data = os.read(fd, _MAX_KEY_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_KEY_FILE:
        raise ConfigError(f"the signing key {shown} is too large", code="signing_key_invalid")
    return data


def _create_key(path: Path, signer: Signer | None = None) -> bool:
    """Create a new key at ``path`` (mode 0600); False when another process made it first."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    signer = signer or Signer(Ed25519PrivateKey.generate())
    # Unique per attempt, so two sessions of one process (threads) never share a temp file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.write(fd, signer.private_pem())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        kill_point("key.created")
    finally:
        tmp.unlink(missing_ok=True)
    return True


def load_signer(
    environ: Mapping[str, str] | None = None,
    *,
    create: bool = True,
    held_key_ids: Callable[[], Iterable[str]] | None = None,
) -> LocalKey:
    """The local signing key, created in the home on first use when ``create``.

    ``held_key_ids`` returns the ids of the keys that signed the receipts the caller holds; it
    is called only when the key is missing, and a new key is then made only if every one of
    them is kept trusted (see :func:`retired_keys`).

    Raises:
        ConfigError: ``signing_key_exposed`` (group/other permissions or another owner:
            the message says ``chmod 600``), ``signing_key_invalid`` (not a PEM Ed25519 key),
            ``signing_key_missing`` (``PROCTOR_SIGNING_KEY`` names no file, ``create`` is
            False and there is no key, or a new key would leave held receipts with no trusted
            key: restore the file or run ``proctor key rotate``), ``signing_key_unreadable``,
            ``signing_key_uncreatable`` (the home or the key file cannot be made),
            ``home_missing``.
    """
    path, shown, in_home = _key_location(environ)
    created = False
    try:
        data = _read_key_file(path, shown)
    except FileNotFoundError:
        if not in_home:
            raise ConfigError(
                "PROCTOR_SIGNING_KEY names a file that does not exist", code="signing_key_missing"
            ) from None
        if not create:
            raise ConfigError(
                f"there is no signing key at {shown} yet; `proctor key show` creates one",
                code="signing_key_missing",
            ) from None
        if held_key_ids is not None:
            try:
                _refuse_replacing(shown, held_key_ids(), environ)
            except ConfigError as refusal:
                # another process's first use may have made the key (and signed with it)
                # since the look above: read again before refusing
                try:
                    data = _read_key_file(path, shown)
                except FileNotFoundError:
                    raise refusal from None
                return LocalKey(parse_private_key_pem(data), path, shown, False)
        try:
            created = _create_key(path)
        except OSError as exc:
            raise ConfigError(
                f"the signing key {shown} could not be created: {exc.strerror}",
                code="signing_key_uncreatable",
            ) from exc
        data = _read_key_file(path, shown)
    return LocalKey(parse_private_key_pem(data), path, shown, created)


def _short(key_ids: list[str]) -> str:
    shown = ", ".join(k[:19] + "…" for k in key_ids[:3])
    return shown + (f" and {len(key_ids) - 3} more" if len(key_ids) > 3 else "")


def _refuse_replacing(shown: str, held: Iterable[str], environ: Mapping[str, str] | None) -> None:
    lost = sorted(set(held))
    if lost:
        kept = {key.key_id for key in retired_keys(environ)}
        lost = [key_id for key_id in lost if key_id not in kept]
    if lost:
        raise ConfigError(
            f"there is no signing key at {shown}, but receipts here were signed by"
            f" {_short(lost)}; a new key would leave them unverifiable. Restore the key file,"
            " or run `proctor key rotate` to make a new key on purpose",
            code="signing_key_missing",
            details={"key_ids": lost},
        )


def trusted_local_key(environ: Mapping[str, str] | None = None) -> PublicKey | None:
    """The public half of the local signing key, or ``None`` when none exists (never creates).

    Raises:
        ConfigError: the key file exists but is exposed or invalid (see :func:`load_signer`).
    """
    path, _, in_home = _key_location(environ)
    if in_home and not path.exists():
        return None
    return load_signer(environ, create=False).signer.public_key


def retired_keys(environ: Mapping[str, str] | None = None) -> list[PublicKey]:
    """Public keys kept trusted in ``<home>/trusted_keys/*.pem``: keys ``proctor key rotate``
    retired, or keys a person put there (a file there is trusted like the local key).

    Raises:
        ConfigError: a ``.pem`` file there is not an Ed25519 public key, or the folder cannot
            be read.
    """
    try:
        home, shown = home_dir(environ)
    except ConfigError:
        return []  # no home: nothing kept there (a named key file may still sign)
    folder = home / TRUSTED_KEYS_DIR
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".pem"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise ConfigError(
            f"{shown}/{TRUSTED_KEYS_DIR} could not be read: {exc.strerror}",
            code="public_key_unreadable",
        ) from exc
    keys: list[PublicKey] = []
    for name in names:
        try:
            keys.append(load_public_key_file(folder / name))
        except ConfigError as exc:
            raise ConfigError(
                f"the trusted key {shown}/{TRUSTED_KEYS_DIR}/{name}: {exc.message}", code=exc.code
            ) from exc
    return keys


def trusted_local_keys(environ: Mapping[str, str] | None = None) -> list[PublicKey]:
    """Every key this machine trusts by default: the local signing key (if one exists; none
    is created) and the retired keys kept in the home.

    Raises:
        ConfigError: as :func:`trusted_local_key` and :func:`retired_keys`.
    """
    keys: list[PublicKey] = []
    current = trusted_local_key(environ)
    for key in ([current] if current is not None else []) + retired_keys(environ):
        if all(key.key_id != k.key_id for k in keys):
            keys.append(key)
    return keys


@dataclass(frozen=True, slots=True)
class Rotation:
    """What :func:`rotate_key` did: the retired key (kept trusted; ``None`` when there was no
    key to retire) and the new one."""

    old: PublicKey | None
    new: LocalKey
    trusted_path: str | None


def rotate_key(
    environ: Mapping[str, str] | None = None,
    *,
    before_replace: Callable[[Rotation], None] | None = None,
) -> Rotation:
    """Make a new signing key in the home, keeping the old key's public half trusted.

    In this order, so a kill at any point leaves every receipt with a trusted key: the old
    public key is written to ``<home>/trusted_keys/<hex>.pem``; ``before_replace`` is called
    (the CLI records the rotation in the audit log there); then the key file is replaced
    atomically (or, with no old key, created). The old private key is not kept.

    Raises:
        ConfigError: ``signing_key_named`` (``PROCTOR_SIGNING_KEY`` is set: proctor makes
            keys only in the home), ``signing_key_exposed`` / ``signing_key_invalid`` /
            ``signing_key_unreadable`` (the current key: fix it, or move it aside to rotate
            without keeping it trusted), ``signing_key_uncreatable``, ``home_missing``.
    """
    path, shown, in_home = _key_location(environ)
    if not in_home:
        raise ConfigError(
            "PROCTOR_SIGNING_KEY names the signing key; proctor makes keys only in the home."
            " Unset it to rotate the home's key, or point it at a new key file",
            code="signing_key_named",
        )
    home = path.parent
    for _ in range(2):
        try:
            old: PublicKey | None = parse_private_key_pem(_read_key_file(path, shown)).public_key
        except FileNotFoundError:
            old = None
        except ConfigError as exc:
            raise ConfigError(
                f"{exc.message}; nothing was rotated (to rotate without keeping this key"
                f" trusted, move {shown} aside first)",
                code=exc.code,
            ) from exc
        new = Signer(Ed25519PrivateKey.generate())
        trusted = None
        try:
            if old is not None:
                folder = home / TRUSTED_KEYS_DIR
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                name = old.key_id.removeprefix("sha256:") + ".pem"
                write_private(folder / name, old.pem().encode("ascii"))
                trusted = f"{shown.rsplit('/', 1)[0]}/{TRUSTED_KEYS_DIR}/{name}"
                kill_point("key.rotate.trusted")
            rotation = Rotation(old, LocalKey(new, path, shown, True), trusted)
            if before_replace is not None:
                before_replace(rotation)
            kill_point("key.rotate.audited")
            if old is None:
                if not _create_key(path, new):
                    continue  # another process made a key meanwhile: retire that one
            else:
                write_private(path, new.private_pem())
            kill_point("key.rotate.replaced")
        except OSError as exc:
            raise ConfigError(
                f"the signing key {shown} could not be rotated: {exc.strerror}",
                code="signing_key_uncreatable",
            ) from exc
        return rotation
    raise ConfigError(
        f"the signing key {shown} keeps changing while it is rotated; try again",
        code="signing_key_unreadable",
    )
